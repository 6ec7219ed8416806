import * as assert from "node:assert/strict";
import { test } from "node:test";
import { argSummary, diffHtml, renderItem } from "../render";

const params = { sessionId: "s", runId: "r", callId: "c", tool: "edit", effect: "workspace_mutation", title: "edit <a>.txt", digest: "D1", diff: "--- a\n+++ b\n" };

test("an approval offers Approve for session only when the call has a scope", () => {
  const without = renderItem({ id: "i1", kind: "approval", params, state: "pending" });
  assert.ok(!without.includes("approve_for_session"), without);
  assert.ok(without.includes('data-decision="deny_reason"') && without.includes('data-decision="view_diff"'), without);
  assert.ok(without.includes("edit &lt;a&gt;.txt"), "the title is escaped");
  const withScope = renderItem({ id: "i1", kind: "approval", params: { ...params, ruleScope: { path: "a.txt" } }, state: "pending" });
  assert.ok(withScope.includes('data-decision="approve_for_session"'), withScope);
  const settled = renderItem({ id: "i1", kind: "approval", params, state: "denied" });
  assert.ok(!settled.includes("<button") && settled.includes("denied"), settled);
});

test("reasoning is collapsed and recovered output is labelled apart from the answer", () => {
  const a = renderItem({ id: "i2", kind: "assistant", runId: "r", text: "answer", reasoning: "why", committed: true });
  assert.match(a, /<details class="reasoning"><summary>Reasoning<\/summary>/);
  assert.ok(!a.includes("<details class=\"reasoning\" open"));
  const r = renderItem({ id: "i3", kind: "recovered", runId: "r", channel: "text", text: "<partial>" });
  assert.ok(r.includes("not part of the answer") && r.includes("&lt;partial&gt;"), r);
});

test("a tool's changes link to their diffs; errors carry their actions", () => {
  const t = renderItem({ id: "i4", kind: "tool", runId: "r1", callId: "c", name: "edit", args: '{"path":"a.txt"}', output: "", status: "ok", changes: [{ path: "a.txt", kind: "modify", diff: "" }] });
  assert.ok(t.includes('class="open-diff" data-run="r1" data-path="a.txt"'), t);
  const e = renderItem({ id: "i5", kind: "error", text: "boom", actions: ["retry", "showLog"] });
  assert.ok(e.includes('data-action="retry">Retry') && e.includes('data-action="showLog">Show Log'), e);
  assert.equal(argSummary('{"command":"go test ./...\\nmore"}'), "go test ./...⏎more");
});

test("diffs mark added and removed lines and escape them", () => {
  const h = diffHtml("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-<old>\n+new\n ctx");
  assert.ok(h.includes('<span class="del">-&lt;old&gt;</span>') && h.includes('<span class="add">+new</span>'), h);
  assert.ok(h.includes('<span class="hdr">--- a/x</span>') && h.includes(" ctx"), h);
});

test("the plan card is a checklist with its progress, its text escaped", () => {
  const html = renderItem({
    id: "i1", kind: "plan", explanation: "<b>why</b>",
    steps: [{ step: "Read <x>", status: "completed" }, { step: "Fix", status: "in_progress" }, { step: "Test", status: "pending" }],
  });
  assert.match(html, /1 of 3 done/);
  assert.match(html, /class="step step-completed"><span class="icon">✓<\/span> Read &lt;x&gt;/);
  assert.match(html, /step-in_progress"><span class="icon">▸/);
  assert.match(html, /&lt;b&gt;why&lt;\/b&gt;/);
  assert.doesNotMatch(html, /<b>/);
});

test("a failed or denied call's row says why in words; its JSON arguments stay folded", () => {
  const args = '{"path":"a.txt","old_text":"x","new_text":"y"}';
  const t = renderItem({ id: "i6", kind: "tool", runId: "r", callId: "c", name: "edit", args, output: "", status: "error", result: "old_text not found in <a.txt>" });
  assert.match(t, /<span class="status">failed<\/span>/);
  assert.ok(t.includes('<div class="why">old_text not found in &lt;a.txt&gt;</div>'), t);
  assert.ok(t.indexOf("why") > t.indexOf("</details>"), "the reason is outside the folded part");
  const d = renderItem({ id: "i7", kind: "tool", runId: "r", callId: "c", name: "bash", args: "{}", output: "", status: "denied", result: "Tool call was not approved." });
  assert.ok(d.includes('<span class="status">denied</span>') && d.includes("Tool call was not approved."), d);
  const ok = renderItem({ id: "i8", kind: "tool", runId: "r", callId: "c", name: "read", args: "{}", output: "text", status: "ok" });
  assert.ok(!ok.includes('class="why"'), ok);
});
