import * as assert from "node:assert/strict";
import { test } from "node:test";
import { Attachments, lines, rankFiles, refLabel, refLimit, splitAttached } from "../attachments";
import { ChatModel } from "../chatModel";
import { attachmentsHtml, renderItem } from "../render";

const png = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0]);
const range = (a: number, b: number) => ({ start: { line: a, character: 0 }, end: { line: b, character: 4 } });

test("references and images wait as chips, go as octet/prompt context and leave with the prompt", () => {
  const a = new Attachments();
  assert.equal(a.addImage("shot.png", png), "");
  assert.equal(a.addRef({ uri: "file:///w/a.ts", label: "a.ts" }), "");
  assert.equal(a.addRef({ uri: "file:///w/b.ts", range: range(2, 6), label: refLabel("b.ts", range(2, 6)) }), "");
  assert.equal(a.addRef({ uri: "file:///w/a.ts", label: "a.ts" }), "", "the same file again is ignored");
  assert.deepEqual(
    a.chips().map((c) => `${c.kind}:${c.label}`),
    ["image:shot.png, 1 KB", "file:a.ts", "range:b.ts:3-7"],
  );
  assert.deepEqual(a.context(), [
    { uri: "file:///w/a.ts" },
    { uri: "file:///w/b.ts", range: range(2, 6) },
    { type: "image", mimeType: "image/png", data: Buffer.from(png).toString("base64") },
  ]);
  a.remove(1);
  assert.deepEqual(a.chips().map((c) => c.label), ["shot.png, 1 KB", "b.ts:3-7"]);
  const taken = a.take();
  assert.ok(a.empty() && !taken.empty());
  for (let i = 0; i < refLimit; i++) {
    assert.equal(a.addRef({ uri: `file:///w/f${i}`, label: `f${i}` }), "");
  }
  assert.match(a.addRef({ uri: "file:///w/one-more", label: "x" }), /at most 16/);
});

test("a reference is named by its file, its lines and its symbol", () => {
  assert.equal(refLabel("src/a.go"), "src/a.go");
  assert.equal(refLabel("src/a.go", range(4, 4)), "src/a.go:5");
  assert.equal(refLabel("src/a.go", range(4, 9), "greet"), "greet · src/a.go:5-10");
  assert.deepEqual(lines({ start: { line: 2, character: 0 }, end: { line: 5, character: 0 } }, () => 7), { start: { line: 2, character: 0 }, end: { line: 4, character: 7 } });
  assert.deepEqual(lines(range(2, 5), () => 7), range(2, 5));
});

test("an @-mention's files: names that start with the query first, then names and paths that hold it", () => {
  const paths = ["src/server/main.go", "main.go", "docs/domain.md", "cmd/octet/main_test.go", "README.md", "internal/mapping/ain.go"];
  assert.deepEqual(rankFiles(paths, "main", 10), ["main.go", "src/server/main.go", "cmd/octet/main_test.go", "docs/domain.md", "internal/mapping/ain.go"]);
  assert.deepEqual(rankFiles(paths, "MAIN.go", 1), ["main.go"], "case is ignored");
  assert.deepEqual(rankFiles(paths, "srvmn", 10), ["src/server/main.go"], "characters in order");
  assert.equal(rankFiles(paths, "", 3).length, 3);
});

test("a resumed prompt shows what it carried as chips, not the attached text", () => {
  const text =
    "Explain @greet\n\nThe user attached this context:\n\n--- attachment 1: a.go lines 3-7 (editor buffer, unsaved changes included) ---\nfunc greet() {}\n" +
    "--- end of attachment 1 ---\n\n--- attachment 2: b.go ---\npackage b\n--- end of attachment 2 ---\n";
  assert.deepEqual(splitAttached(text), { text: "Explain @greet", titles: ["a.go:3-7", "b.go"] });
  assert.deepEqual(splitAttached("plain"), { text: "plain", titles: [] });
  const typed = "What does\n\nThe user attached this context:\nmean?";
  assert.deepEqual(splitAttached(typed), { text: typed, titles: [] }, "a prompt that only quotes the marker stays whole");
  const m = new ChatModel();
  m.loadTranscript([{ id: "e1", type: "user", text }]);
  const u = m.items[0];
  assert.ok(u.kind === "user" && u.text === "Explain @greet");
  const html = renderItem(u);
  assert.ok(html.includes("a.go:3-7") && html.includes("chip-range") && html.includes("chip-file"), html);
  assert.ok(!html.includes("func greet"), html);
});

test("the composer's chips are escaped and each has a remove button", () => {
  const html = attachmentsHtml([{ label: "<b>.ts", kind: "file" }, { label: "x.ts:1-2", kind: "range" }]);
  assert.ok(html.includes("&lt;b&gt;.ts") && !html.includes("<b>"), html);
  assert.ok(html.includes('data-remove-attachment="0"') && html.includes('data-remove-attachment="1"'), html);
});
