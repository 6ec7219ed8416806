import * as assert from "node:assert/strict";
import { test } from "node:test";
import { pickers } from "../pickers";
import { renderItem, welcomeHtml } from "../render";

test("the pickers offer the catalog's models, the efforts and the modes, with the current values", () => {
  const p = pickers([{ id: "gpt-5.1-codex", reasoning: true }, { id: "gpt-4.1", reasoning: false }], "gpt-5.1-codex", "high", "controlled");
  assert.deepEqual(p.models.map((m) => m.value), ["gpt-5.1-codex", "gpt-4.1"]);
  assert.deepEqual(p.efforts.map((e) => e.value), ["", "none", "minimal", "low", "medium", "high", "xhigh"]);
  assert.equal(p.effort, "high");
  assert.equal(p.effortNote, "");
  assert.deepEqual(p.modes.map((m) => m.label), ["Ask", "Auto-read", "Full access"]);
  assert.equal(p.mode, "controlled");
  const q = pickers([{ id: "gpt-4.1", reasoning: false }], "my-model", "", undefined);
  assert.deepEqual(q.models.map((m) => m.value), ["my-model", "gpt-4.1"], "the current model is offered even when not listed");
  assert.notEqual(q.effortNote, "", "a model without reasoning controls takes no effort");
  assert.equal(q.mode, "controlled_bash_approval");
});

test("an empty chat welcomes with what to try and the keys", () => {
  const w = welcomeHtml("Ask", "ask before every edit and every command");
  for (const k of ["@", "Ctrl+Alt+K", "Ctrl+Alt+O", "Enter"]) {
    assert.ok(w.includes(`<kbd>${k}</kbd>`), k);
  }
  assert.match(w, /Mode <strong>Ask<\/strong>: ask before every edit and every command/);
});

test("a retry row says what happens and offers Cancel until the run goes on", () => {
  const r = { id: "i1", kind: "retry" as const, runId: "run_1", attempt: 3, maxAttempts: 29, delayMs: 4000, operation: "", cause: "cannot connect <x>", done: false };
  const html = renderItem(r);
  assert.ok(html.includes("retrying 3/29 in 4 s: cannot connect &lt;x&gt;"), html);
  assert.match(html, /data-retry-cancel="run_1"[^>]*>Cancel<\/button>/);
  assert.ok(!renderItem({ ...r, done: true }).includes("<button"));
});
