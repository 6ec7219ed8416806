import * as assert from "node:assert/strict";
import { test } from "node:test";
import { changePicks, modelPicks, rewindPicks, statusText, statusTooltip } from "../format";
import { argSummary } from "../render";
import { displayText } from "../text";
import { icons, links, shownLabel } from "./vscodeSyntax";

test("a label draws no icon a model or repository wrote; it reads as the text", () => {
  for (const s of ["$(check) done", "echo $(whoami)", "a\\$(x)", "$($(sync~spin))"]) {
    const out = displayText(s, "label");
    assert.deepEqual(icons(out), [], `${s} -> ${out}`);
    // VS Code shows an escaped \$( as $(: the label reads as the text.
    assert.equal(shownLabel(out), s);
  }
  assert.equal(displayText("$(check) done", "line"), "$(check) done", "plain surfaces draw no icons: nothing to escape");
});

test("a notification makes no link of untrusted text", () => {
  const s = "[Approve](command:workbench.action.terminal.sendSequence?%7B%22text%22%3A%22curl%20x%7Csh%5Cn%22%7D) or [docs](https://example.com)";
  const out = displayText(s, "message");
  assert.deepEqual(links(s).length, 2, "VS Code would make two links of it");
  assert.deepEqual(links(out), [], out);
  assert.ok(out.includes("command:workbench.action.terminal.sendSequence"), "the text is still there to read");
});

test("controls, bidirectional and invisible characters are made visible; newlines on one line are ⏎", () => {
  assert.equal(displayText("a\x1b[31mb\rc\x7f", "line"), "a^[[31mb^Mc^?");
  assert.equal(displayText("safe\u202Eexe.txt", "line"), "safe⟨U+202E⟩exe.txt");
  assert.equal(displayText("x\u200B\u200B\u200B\u200By", "line"), "x⟨4 × U+200B⟩y");
  assert.equal(displayText("tag\u{E0041}", "line"), "tag⟨U+E0041⟩");
  assert.equal(displayText("lone\uD800", "line"), "lone⟨U+D800⟩");
  assert.equal(displayText("npm test\ncurl x | sh", "line"), "npm test⏎curl x | sh");
  assert.equal(displayText("npm test\ncurl x | sh", "block"), "npm test\ncurl x | sh");
  assert.equal(displayText("a\n\n\n\nb", "block"), "a\n⟨3 blank lines⟩\nb");
  assert.equal(displayText(`ok${" ".repeat(200)}rm -rf ~`, "line"), "ok⟨200 spaces⟩rm -rf ~");
  assert.equal(displayText("héllo wörld ⟨kept⟩ 日本", "line"), "héllo wörld ⟨kept⟩ 日本", "visible text and octet's own marks pass unchanged");
});

test("a bound cuts with an explicit marker", () => {
  const long = "abcdefghij".repeat(5);
  assert.equal(displayText(long, "line", 4), "abcd…⟨46 more characters⟩");
  assert.equal(displayText("abcdefghij", "line", 4), "abcdefghij", "a marker never stands for less than itself");
  assert.equal(displayText("abcd", "line", 4), "abcd");
  assert.equal(displayText(`ab\u202E${long}`, "line", 4), "ab…⟨51 more characters⟩", "an escape is never split");
});

test("status bar, quick picks and chat summaries escape what a model or repository names", () => {
  const hostile = "$(check) gpt\u202E\nfree";
  const s = statusText("idle", hostile, {});
  assert.deepEqual(icons(s), ["check"], `only octet's own state icon: ${s}`);
  assert.ok(s.includes("\\$(check) gpt⟨U+202E⟩⏎free"), s);
  assert.ok(statusTooltip("idle", hostile, {}).includes("Model: $(check) gpt⟨U+202E⟩⏎free"));
  assert.ok(statusText("idle", "m".repeat(100), {}).includes("…⟨60 more characters⟩"), "a long name is cut with a marker");

  const picks = [
    ...changePicks([{ path: "$(warning) a\u202Etxt.exe", kind: "modify", diff: "" }]),
    ...rewindPicks([{ id: "e", parent: "p", type: "user", text: "fix $(bug)\nthen [x](command:y)" }]),
    ...modelPicks([{ id: "$(star) best" }], ""),
  ];
  for (const p of picks) {
    assert.deepEqual(icons(p.label), [], p.label);
    assert.ok(!p.label.includes("\n") && !p.label.includes("\u202E"), p.label);
  }
  assert.equal(modelPicks([{ id: "$(star) best" }], "")[0].value, "$(star) best", "the model picked is the one named, not its label");
  assert.equal(argSummary('{"command":"echo a\\u202E\\nrm -rf ~"}'), "echo a⟨U+202E⟩⏎rm -rf ~");
});
