import * as assert from "node:assert/strict";
import { test } from "node:test";
import { ChatModel, type AgentItem } from "../chatModel";
import { approvalNotice } from "../approvals";
import type { EventParams, OctetEvent } from "../protocol";
import { agentActivity, agentUsage, renderItem } from "../render";

let seq = 0;
const child = "s_child";

/** parent sends an event of the chat's own session (s1). */
function parent(m: ChatModel, event: OctetEvent): void {
  m.applyEvent({ sessionId: "s1", runId: "run_root", seq: ++seq, event });
}

/** kid sends an event of the delegated child, as octet lsp does. */
function kid(m: ChatModel, event: OctetEvent, runId = "run_kid"): void {
  const p: EventParams = { sessionId: child, runId, seq: ++seq, parentSessionId: "s1", agentPath: "root/worker1", event };
  m.applyChildEvent(p);
}

function updated(m: ChatModel, status: string, extra: Record<string, unknown> = {}): void {
  parent(m, { kind: "agent_updated", agentId: "a1", agentPath: "root/worker1", sessionId: child, status, ...extra });
}

function card(m: ChatModel): AgentItem {
  const a = m.items.filter((i): i is AgentItem => i.kind === "agent");
  assert.equal(a.length, 1, "one card per child");
  return a[0];
}

test("agent_updated pending→running→idle→completed updates one card in place", () => {
  const m = new ChatModel();
  parent(m, { kind: "run_started", runId: "run_root" });
  updated(m, "pending", { task: "read notes.txt and summarize it" });
  const a = card(m);
  assert.equal(a.status, "pending");
  assert.equal(a.agentPath, "root/worker1");
  assert.equal(a.task, "read notes.txt and summarize it");
  assert.equal(agentActivity(a), "waiting to start");
  assert.ok(!renderItem(a).includes("data-agent-stop"), "no Stop before the child's run is known");
  m.takeChanges();
  updated(m, "running");
  assert.equal(card(m).status, "running");
  assert.deepEqual(m.takeChanges().ids, [a.id], "the card is redrawn, not added again");
  kid(m, { kind: "run_started", runId: "run_kid" });
  assert.ok(renderItem(a).includes('data-agent-stop="run_kid"'), "Stop cancels the child's run");
  updated(m, "idle", { usage: { input: 1200, output: 300, costPicodollars: 4_200_000_000, complete: true } });
  assert.equal(a.status, "idle");
  assert.ok(!renderItem(a).includes("data-agent-stop"), "no Stop once idle");
  assert.equal(agentUsage(a), "1.2k in · 300 out · $0.0042");
  updated(m, "completed");
  assert.equal(a.status, "completed");
  assert.equal(a.usage?.costPicodollars, 4_200_000_000, "usage stays when a later update has none");
  const html = renderItem(a);
  assert.ok(html.includes("badge-completed") && html.includes("root/worker1") && html.includes("$0.0042"), html);
  assert.deepEqual(m.items.map((i) => i.kind), ["agent"]);
});

test("the child's events fold into its card: current tool, live text, tool count, answer", () => {
  const m = new ChatModel();
  updated(m, "running", { task: "t" });
  kid(m, { kind: "run_started", runId: "run_kid" });
  kid(m, { kind: "tool_call_started", callId: "c1", name: "read" });
  kid(m, { kind: "tool_call_delta", callId: "c1", delta: '{"path":"notes.txt"}' });
  kid(m, { kind: "tool_started", callId: "c1", tool: "read" });
  const a = card(m);
  assert.equal(agentActivity(a), "read notes.txt");
  kid(m, { kind: "tool_finished", callId: "c1", isError: false });
  kid(m, { kind: "tool_call_started", callId: "c2", name: "bash" });
  kid(m, { kind: "tool_call_delta", callId: "c2", delta: '{"command":"false"}' });
  kid(m, { kind: "tool_started", callId: "c2", tool: "bash" });
  kid(m, { kind: "tool_finished", callId: "c2", isError: true });
  assert.equal(a.toolCount, 2);
  assert.deepEqual(a.tools.map((t) => t.status), ["ok", "error"]);
  kid(m, { kind: "output_delta", channel: "reasoning", text: "hidden thoughts" });
  kid(m, { kind: "output_delta", channel: "text", text: "The notes say " });
  kid(m, { kind: "output_delta", channel: "text", text: "hello." });
  assert.equal(agentActivity(a), "The notes say hello.");
  kid(m, { kind: "assistant_committed", entryId: "e1" });
  kid(m, { kind: "run_finished", outcome: "completed" });
  updated(m, "idle");
  assert.equal(a.answer, "The notes say hello.");
  assert.equal(agentActivity(a), "");
  const html = renderItem(a);
  assert.ok(html.includes("<details") && html.includes("2 tool calls") && html.includes("notes.txt"), html);
  assert.ok(!html.includes("hidden thoughts"), "reasoning is not the answer");
  assert.deepEqual(m.items.map((i) => i.kind), ["agent"], "the child's tools are not the parent's transcript");
});

test("a long answer and many tools are clipped; a follow-up task clears the stale run id", () => {
  const m = new ChatModel();
  updated(m, "running");
  kid(m, { kind: "run_started", runId: "run_kid" });
  for (let i = 0; i < 60; i++) {
    kid(m, { kind: "tool_call_started", callId: `c${i}`, name: "read" });
    kid(m, { kind: "tool_finished", callId: `c${i}` });
  }
  kid(m, { kind: "output_delta", channel: "text", text: "x".repeat(10000) });
  const a = card(m);
  assert.ok(a.live.length <= 240);
  kid(m, { kind: "assistant_committed" });
  assert.equal(a.toolCount, 60);
  assert.equal(a.tools.length, 50);
  assert.ok(a.answer.length <= 4000 && a.answer.endsWith("…"));
  assert.ok(renderItem(a).includes("10 earlier not shown"));
  updated(m, "idle");
  updated(m, "pending", { task: "again" });
  assert.equal(a.runId, undefined);
  assert.equal(a.task, "again");
});

test("a failed child shows its error; its pending approval is withdrawn when its run ends", () => {
  const m = new ChatModel();
  updated(m, "running");
  kid(m, { kind: "run_started", runId: "run_kid" });
  const ap = { sessionId: "s1", runId: "run_kid", callId: "c1", tool: "bash", effect: "host", title: "root/worker1: run ls", digest: "D", agentPath: "root/worker1", childSessionId: child };
  m.addApproval(ap);
  m.setWaiting(ap);
  assert.equal(agentActivity(card(m)), "waiting for approval: bash");
  assert.deepEqual(m.items.map((i) => i.kind), ["agent", "approval"], "no stray tool item in the parent's transcript");
  kid(m, { kind: "run_finished", outcome: "failed", error: "provider: 500" });
  updated(m, "failed", { error: "session cost ceiling reached" });
  const a = card(m);
  assert.equal(a.status, "failed");
  assert.equal(a.error, "session cost ceiling reached");
  assert.equal(m.pendingApprovals().length, 0);
  const html = renderItem(a);
  assert.ok(html.includes("badge-failed") && html.includes("session cost ceiling reached"), html);
  assert.ok(renderItem(m.items[1]).includes("Sub-agent <strong>root/worker1</strong> asks"));
});

test("a child's approval notification names the child", () => {
  const p = { sessionId: "s1", runId: "r", callId: "c", tool: "bash", effect: "host_process", title: "root/worker1: run ls", digest: "D", agentPath: "root/worker1" };
  const review = ". Review it in the chat to approve or deny.";
  assert.equal(approvalNotice(p).text, "octet sub-agent root/worker1 wants to run ls (bash, host_process)" + review);
  assert.equal(approvalNotice({ ...p, agentPath: undefined, title: "run ls" }).text, "octet wants to run ls (bash, host_process)" + review);
});

test("a hostile task, path, answer and error show as text", () => {
  const m = new ChatModel();
  const evil = `<img src=x onerror="alert(1)">`;
  parent(m, { kind: "agent_updated", agentId: "a1", agentPath: `root/${evil}`, sessionId: child, status: "running", task: evil });
  kid(m, { kind: "run_started", runId: `r"><script>alert(2)</script>` });
  kid(m, { kind: "tool_call_started", callId: "c1", name: evil });
  kid(m, { kind: "tool_call_delta", callId: "c1", delta: JSON.stringify({ path: evil }) });
  kid(m, { kind: "tool_started", callId: "c1" });
  kid(m, { kind: "output_delta", channel: "text", text: evil });
  kid(m, { kind: "assistant_committed" });
  updated(m, "failed", { error: evil });
  card(m).status = "running";
  const html = renderItem(card(m));
  assert.ok(!html.includes("<img") && !html.includes("<script"), html);
  assert.ok(html.includes("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"), html);
  assert.ok(html.includes('data-agent-stop="r&quot;&gt;&lt;script&gt;'), html);
});

test("a resumed parent lists its children as cards", () => {
  const m = new ChatModel();
  m.loadTranscript([]);
  m.addChildren([{ sessionId: child, agentId: "a1", agentPath: "root/worker1", status: "disconnected", task: "t" }]);
  const a = card(m);
  assert.equal(a.status, "disconnected");
  assert.ok(renderItem(a).includes("badge-disconnected"));
});

test("a child's own children get cards of their own", () => {
  const m = new ChatModel();
  updated(m, "running");
  kid(m, { kind: "agent_updated", agentId: "a2", agentPath: "root/worker1/worker1", sessionId: "s_grandchild", status: "running", task: "deeper" });
  m.applyChildEvent({ sessionId: "s_grandchild", runId: "run_gc", seq: ++seq, parentSessionId: child, agentPath: "root/worker1/worker1", event: { kind: "run_started", runId: "run_gc" } });
  const cards = m.items.filter((i): i is AgentItem => i.kind === "agent");
  assert.deepEqual(cards.map((c) => [c.agentPath, c.status]), [["root/worker1", "running"], ["root/worker1/worker1", "running"]]);
  assert.equal(m.agentRun("run_gc")?.sessionId, "s_grandchild");
});
