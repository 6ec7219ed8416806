import * as assert from "node:assert/strict";
import { test } from "node:test";
import { actionsFor, ChatModel, outputLimit } from "../chatModel";
import { retryText } from "../format";
import type { ConfirmEffectParams, OctetEvent } from "../protocol";

let seq = 0;
function ev(m: ChatModel, event: OctetEvent, runId = "run_1", sessionId = "s1"): void {
  m.applyEvent({ sessionId, runId, seq: ++seq, event });
}

function kinds(m: ChatModel): string[] {
  return m.items.map((i) => i.kind);
}

test("streamed text and reasoning make one assistant item, committed once durable", () => {
  const m = new ChatModel();
  m.addUser("hi");
  ev(m, { kind: "run_started", runId: "run_1" });
  assert.equal(m.state, "running");
  assert.equal(m.runId, "run_1");
  ev(m, { kind: "output_delta", channel: "reasoning", text: "think" });
  ev(m, { kind: "output_delta", channel: "text", text: "Hel" });
  ev(m, { kind: "output_delta", channel: "text", text: "lo" });
  ev(m, { kind: "assistant_committed", entryId: "e1" });
  const a = m.items[1];
  assert.equal(a.kind, "assistant");
  if (a.kind === "assistant") {
    assert.equal(a.text, "Hello");
    assert.equal(a.reasoning, "think");
    assert.equal(a.committed, true);
  }
  ev(m, { kind: "output_delta", channel: "text", text: "Next" });
  assert.deepEqual(kinds(m), ["user", "assistant", "assistant"]);
});

test("a main-request retry drops the provisional output; recovered output stays apart", () => {
  const m = new ChatModel();
  ev(m, { kind: "run_started", runId: "run_1" });
  ev(m, { kind: "output_delta", channel: "text", text: "partial" });
  ev(m, { kind: "tool_call_started", callId: "c9", name: "read" });
  m.takeChanges();
  ev(m, { kind: "provider_retry", attempt: 1, operation: null, retryKind: "interrupted_inference" });
  assert.deepEqual(kinds(m), ["retry"]);
  assert.equal(m.takeChanges().ids.length, 3, "the dropped items are redrawn (removed), the retry row drawn");
  m.addRecovered({ sessionId: "s1", runId: "run_1", channel: "text", text: "partial" });
  ev(m, { kind: "output_delta", channel: "text", text: "answer" });
  assert.deepEqual(kinds(m), ["retry", "recovered", "assistant"]);
  const a = m.items[2];
  assert.ok(a.kind === "assistant" && a.text === "answer", "recovered text is never part of the answer");
});

test("an auxiliary retry (compaction) keeps the answer", () => {
  const m = new ChatModel();
  ev(m, { kind: "output_delta", channel: "text", text: "kept" });
  ev(m, { kind: "provider_retry", attempt: 1, operation: "compaction" });
  assert.deepEqual(kinds(m), ["assistant", "retry"]);
});

test("retries show as they happen: one row per run, updated in place, done once the run goes on", () => {
  const m = new ChatModel();
  ev(m, { kind: "run_started", runId: "run_1" });
  const cause = "cannot connect to the provider: connection refused";
  ev(m, { kind: "provider_retry", attempt: 1, maxAttempts: 29, delayMs: 1000, operation: null, reason: "connect", cause });
  ev(m, { kind: "provider_retry", attempt: 3, maxAttempts: 29, delayMs: 3500, operation: null, reason: "connect", cause, giveUpInMs: 355_000 });
  assert.deepEqual(kinds(m), ["retry"]);
  const r = m.items[0];
  assert.ok(r.kind === "retry" && !r.done);
  assert.equal(retryText(r), `retrying 3/29 in 4 s: ${cause} (gives up in 6 min)`);
  ev(m, { kind: "provider_retry", attempt: 4, maxAttempts: null, delayMs: 60_000, operation: null, reason: "connect", cause });
  assert.equal(retryText(r), `retrying 4 in 1 min: ${cause}`, "while octet waits for the network there is no attempt limit");
  ev(m, { kind: "output_delta", channel: "text", text: "back" });
  assert.ok(r.done);
  assert.equal(retryText(r), `retried 4 times: ${cause}`);
  ev(m, { kind: "provider_retry", attempt: 1, maxAttempts: 5, delayMs: 200, operation: "compaction", cause: "HTTP 503" });
  assert.deepEqual(kinds(m), ["retry", "assistant", "retry"], "a later retry gets a row of its own");
  const c = m.items[2];
  assert.ok(c.kind === "retry" && retryText(c) === "retrying compaction 1/5 in 1 s: HTTP 503");
  ev(m, { kind: "run_finished", outcome: "failed", error: "gave up" });
  assert.ok(c.done, "the run's end ends its retries");
});

test("a tool call goes from streaming to waiting to done, with output and changes", () => {
  const m = new ChatModel();
  ev(m, { kind: "run_started", runId: "run_1" });
  ev(m, { kind: "tool_call_started", callId: "c1", name: "edit" });
  ev(m, { kind: "tool_call_delta", callId: "c1", delta: '{"path":' });
  ev(m, { kind: "tool_call_delta", callId: "c1", delta: '"a.txt"}' });
  const approval: ConfirmEffectParams = {
    sessionId: "s1", runId: "run_1", callId: "c1", tool: "edit", effect: "workspace_mutation", title: "edit a.txt", digest: "AB", diff: "d",
  };
  m.addApproval(approval);
  m.addApproval(approval); // a copy re-sent after a resume
  m.setWaiting(approval);
  assert.equal(m.state, "waiting_for_approval");
  assert.equal(m.pendingApprovals().length, 1);
  m.settleApproval("ab", "approved");
  assert.equal(m.pendingApprovals().length, 0);
  ev(m, { kind: "tool_policy_decision", callId: "c1", decision: "allowed", reason: "approved" });
  ev(m, { kind: "tool_started", callId: "c1", tool: "edit" });
  ev(m, { kind: "tool_output", callId: "c1", text: "edited" });
  const change = { path: "a.txt", kind: "modify" as const, diff: "--- a/a.txt\n" };
  ev(m, { kind: "tool_finished", callId: "c1", isError: false, changes: [change] });
  const t = m.items.find((i) => i.kind === "tool");
  assert.ok(t && t.kind === "tool");
  assert.equal(t.args, '{"path":"a.txt"}');
  assert.equal(t.status, "ok");
  assert.equal(t.output, "edited");
  ev(m, { kind: "run_finished", outcome: "completed" });
  assert.equal(m.state, "idle");
  assert.deepEqual(m.runChanges("run_1"), [change]);
});

test("a denied call stays denied when it finishes", () => {
  const m = new ChatModel();
  ev(m, { kind: "tool_call_started", callId: "c1", name: "bash" });
  ev(m, { kind: "tool_policy_decision", callId: "c1", decision: "denied", reason: "approval_denied" });
  ev(m, { kind: "tool_finished", callId: "c1", isError: true });
  const t = m.items[0];
  assert.ok(t.kind === "tool" && t.status === "denied" && t.reason === "approval_denied");
});

test("a failed run shows its error with actions and withdraws its approvals", () => {
  const m = new ChatModel();
  m.addApproval({ sessionId: "s1", runId: "run_1", callId: "c1", tool: "bash", effect: "host_process", title: "run x", digest: "d1" });
  ev(m, { kind: "run_finished", outcome: "failed", error: "cannot reach the provider" });
  const err = m.items.find((i) => i.kind === "error");
  assert.ok(err && err.kind === "error" && err.text === "cannot reach the provider");
  assert.deepEqual(err.actions, ["retry", "showLog"]);
  assert.equal(m.pendingApprovals().length, 0);
  assert.deepEqual(actionsFor("hard usage ceiling: start a new session"), ["newSession", "showLog"]);
  assert.ok(actionsFor("unknown model gpt-x").includes("selectModel"));
});

test("usage adds the run's usage events to the session's totals", () => {
  const m = new ChatModel();
  m.sessionUsage = { input: 100, output: 10, costMicros: 50, complete: true };
  ev(m, { kind: "usage", input: 20, cachedInput: 0, output: 2, reasoning: 0, costMicros: 5, complete: true, contextTokens: 22, contextWindow: 1000 });
  assert.deepEqual(
    { i: m.usage().input, o: m.usage().output, c: m.usage().costMicros, ctx: m.usage().contextTokens },
    { i: 120, o: 12, c: 55, ctx: 22 },
  );
  ev(m, { kind: "run_finished", outcome: "completed" });
  ev(m, { kind: "usage", input: 1, output: 1, complete: false, contextTokens: 30, contextWindow: 1000 });
  assert.equal(m.usage().input, 121);
  assert.equal(m.usage().complete, false);
});

test("a resumed transcript shows prompts, answers and tool calls with their results", () => {
  const m = new ChatModel();
  m.addUser("old");
  m.loadTranscript(
    [
      { id: "1", type: "user", text: "fix it" },
      {
        id: "2", type: "assistant", runId: "r",
        items: [
          { type: "reasoning", text: "hmm" }, { type: "text", text: "ok" },
          { type: "function_call", callId: "c1", name: "edit", arguments: "{}" },
          { type: "function_call", callId: "c2", name: "bash", arguments: "{}" },
          { type: "function_call", callId: "c3", name: "read", arguments: "{}" },
        ],
      },
      { id: "3", type: "tool_result", runId: "r", result: { callId: "c1", tool: "edit", text: "old_text not found in a.go", isError: true } },
      {
        id: "4", type: "tool_result", runId: "r",
        result: { callId: "c2", tool: "bash", text: "Tool call was not approved. The user's reason: no", isError: true, details: { policy_denial: "approval_denied" } },
      },
      { id: "5", type: "tool_result", runId: "r", result: { callId: "c3", tool: "read", text: "1: package a", isError: false } },
    ],
    [{ sessionId: "s", runId: "r", channel: "text", text: "lost" }],
  );
  assert.deepEqual(kinds(m), ["user", "assistant", "tool", "tool", "tool", "recovered"]);
  const [failed, denied, read] = m.items.slice(2, 5);
  assert.ok(failed.kind === "tool" && failed.status === "error" && failed.result === "old_text not found in a.go" && failed.output === "");
  assert.ok(denied.kind === "tool" && denied.status === "denied" && denied.result?.startsWith("Tool call was not approved."), "a denial is shown as denied");
  assert.ok(read.kind === "tool" && read.status === "ok" && read.output === "1: package a" && read.result === undefined);
  assert.equal(m.takeChanges().reset, true);
});

test("why a live call failed or was denied is what its tool_finished says", () => {
  const m = new ChatModel();
  ev(m, { kind: "tool_call_started", callId: "c1", name: "edit" });
  ev(m, { kind: "tool_finished", callId: "c1", isError: true, error: "file changed after the change was shown for approval; nothing was written" });
  ev(m, { kind: "tool_call_started", callId: "c2", name: "bash" });
  ev(m, { kind: "tool_policy_decision", callId: "c2", decision: "denied", reason: "approval_denied" });
  ev(m, { kind: "tool_finished", callId: "c2", isError: true, error: "Tool call was not approved. The user's reason: not now" });
  ev(m, { kind: "tool_call_started", callId: "c3", name: "read" });
  ev(m, { kind: "tool_finished", callId: "c3", isError: false });
  const [t1, t2, t3] = m.items;
  assert.ok(t1.kind === "tool" && t1.status === "error" && t1.result?.startsWith("file changed after"));
  assert.ok(t2.kind === "tool" && t2.status === "denied" && t2.result?.endsWith("not now"));
  assert.ok(t3.kind === "tool" && t3.result === undefined, "a call that succeeded has no reason to show");
});

test("a finished call without streamed output shows its result once read, cut to a bound", () => {
  const m = new ChatModel();
  ev(m, { kind: "tool_call_started", callId: "c1", name: "diagnostics" });
  ev(m, { kind: "tool_finished", callId: "c1", isError: false });
  ev(m, { kind: "tool_call_started", callId: "c2", name: "bash" });
  ev(m, { kind: "tool_output", callId: "c2", text: "streamed" });
  ev(m, { kind: "tool_finished", callId: "c2", isError: false });
  assert.ok(m.needsResult("run_1", "c1") && !m.needsResult("run_1", "c2"));
  m.setToolResult("run_1", "c1", "a.ts:1:14: error: Type 'string' is not assignable to type 'number'. [ts 2322]");
  m.setToolResult("run_1", "c2", "the result");
  const [t1, t2] = m.items;
  assert.ok(t1.kind === "tool" && t1.output.startsWith("a.ts:1:14: error"));
  assert.ok(t2.kind === "tool" && t2.output === "streamed", "streamed output stays");
  assert.ok(!m.needsResult("run_1", "c1"));
  m.setToolResult("run_1", "c1", "x");
  ev(m, { kind: "tool_call_started", callId: "c3", name: "read" });
  ev(m, { kind: "tool_finished", callId: "c3", isError: false });
  m.setToolResult("run_1", "c3", "y".repeat(outputLimit + 5));
  const t3 = m.items[2];
  assert.ok(t3.kind === "tool" && t3.output.endsWith("[… 5 more characters in the session file]"));
});

test("a resumed session keeps the markers of runs that failed or were cancelled, where they ended", () => {
  const m = new ChatModel();
  m.loadTranscript(
    [
      { id: "1", type: "user", runId: "r1", text: "one" },
      { id: "2", type: "assistant", runId: "r1", items: [{ type: "text", text: "done" }] },
      { id: "3", type: "user", runId: "r2", text: "two" },
      { id: "4", type: "user", runId: "r3", text: "three" },
      { id: "5", type: "assistant", runId: "r3", items: [{ type: "text", text: "partial" }] },
      { id: "6", type: "user", runId: "r4", text: "four" },
    ],
    [],
    [{ runId: "r2", outcome: "failed", error: "the provider refused the API key (HTTP 401)" }, { runId: "r3", outcome: "cancelled" }, { runId: "gone", outcome: "failed" }],
  );
  assert.deepEqual(
    m.items.map((i) => (i.kind === "run" ? `run:${i.outcome}` : i.kind === "error" ? `error:${i.text}` : i.kind)),
    ["user", "assistant", "user", "run:failed", "error:the provider refused the API key (HTTP 401)", "user", "assistant", "run:cancelled", "user"],
  );
});

test("with the session's totals in usage events, the status counts children and earlier runs once", () => {
  const m = new ChatModel();
  m.sessionUsage = { input: 100, output: 10, costMicros: 50, complete: true };
  ev(m, { kind: "usage", input: 20, output: 2, costMicros: 5, complete: true, contextTokens: 22, contextWindow: 1000, session: { input: 900, output: 90, costMicros: 700 } });
  assert.deepEqual({ i: m.usage().input, c: m.usage().costMicros, ctx: m.usage().contextTokens, ok: m.usage().complete }, { i: 900, c: 700, ctx: 22, ok: true });
  ev(m, { kind: "run_finished", outcome: "completed" });
  assert.equal(m.usage().costMicros, 700, "the totals stay after the run");
});

test("the plan is one card updated in place; update_plan calls get no tool item", () => {
  const m = new ChatModel();
  ev(m, { kind: "run_started", runId: "run_1" });
  ev(m, { kind: "tool_call_started", callId: "p1", name: "update_plan" });
  ev(m, { kind: "tool_call_delta", callId: "p1", delta: "{}" });
  ev(m, { kind: "tool_started", callId: "p1", tool: "update_plan" });
  ev(m, { kind: "tool_policy_decision", callId: "p1", decision: "allowed" });
  ev(m, { kind: "plan", callId: "p1", explanation: "parser first", plan: [{ step: "Read", status: "in_progress" }, { step: "Fix", status: "pending" }] });
  ev(m, { kind: "tool_finished", callId: "p1", isError: false });
  ev(m, { kind: "output_delta", channel: "text", text: "reading" });
  ev(m, { kind: "tool_started", callId: "p2", tool: "update_plan" });
  m.takeChanges();
  ev(m, { kind: "plan", callId: "p2", plan: [{ step: "Read", status: "completed" }, { step: "Fix", status: "in_progress" }] });
  ev(m, { kind: "tool_finished", callId: "p2", isError: false });
  assert.deepEqual(kinds(m), ["plan", "assistant"]);
  const p = m.items[0];
  assert.ok(p.kind === "plan");
  if (p.kind === "plan") {
    assert.deepEqual(p.steps.map((s) => s.status + ":" + s.step), ["completed:Read", "in_progress:Fix"]);
    assert.equal(p.explanation, "");
    assert.deepEqual(m.takeChanges().ids, [p.id], "the card is redrawn in place");
  }
  ev(m, { kind: "tool_started", callId: "p3", tool: "update_plan" });
  ev(m, { kind: "tool_finished", callId: "p3", isError: true });
  assert.deepEqual(kinds(m), ["plan", "assistant", "info"], "a failed update says so");
});

test("a resumed transcript shows the plan its update_plan results recorded, then resume's plan", () => {
  const m = new ChatModel();
  m.loadTranscript([
    { id: "e1", type: "user", text: "fix" },
    { id: "e2", type: "assistant", runId: "r", items: [{ type: "function_call", callId: "p1", name: "update_plan", arguments: "{}" }] },
    {
      id: "e3", type: "tool_result", runId: "r",
      result: { callId: "p1", tool: "update_plan", text: "Plan updated", isError: false, details: { plan: [{ step: "Read", status: "in_progress" }], explanation: "why" } },
    },
  ]);
  assert.deepEqual(kinds(m), ["user", "plan"]);
  m.setPlan({ plan: [{ step: "Read", status: "completed" }] });
  assert.deepEqual(kinds(m), ["user", "plan"]);
  const p = m.items[1];
  assert.ok(p.kind === "plan" && p.steps[0].status === "completed");
});
