// The chat transcript as the extension shows it, built from octet/event
// and octet/recoveredOutput notifications, from resume transcripts and
// from the extension's own actions. It knows nothing of VS Code.

import type {
  AgentStatus,
  AgentUsage,
  ChildInfo,
  ConfirmEffectParams,
  EventParams,
  FileChange,
  Plan,
  PlanStep,
  RecoveredOutputParams,
  RunEnd,
  TranscriptEntry,
  Usage,
} from "./protocol";
import { type Chip, splitAttached } from "./attachments";
import { imageLabel } from "./images";

/** An action offered with an error. */
export type ErrorAction = "retry" | "newSession" | "showLog" | "selectModel" | "openSettings" | "restart";

export type ToolStatus = "streaming" | "waiting" | "running" | "ok" | "error" | "denied";

/** A tool call in the chat. */
export interface ToolItem {
  id: string;
  kind: "tool";
  runId: string;
  callId: string;
  name: string;
  args: string;
  output: string;
  status: ToolStatus;
  /** reason is a denial's reason code (tool_policy_decision). */
  reason?: string;
  /**
   * result is the result text of a call that failed or was denied: why,
   * in the tool's words (the transcript's tool_result).
   */
  result?: string;
  changes?: FileChange[];
}

/** A tool call of a delegated child agent. */
export interface AgentTool {
  callId: string;
  name: string;
  args: string;
  status: ToolStatus;
}

/** The most of a child's text and tool calls a card keeps. */
export const agentLimits = { answer: 4000, live: 240, tools: 50 } as const;

/**
 * A delegated child agent: its card is created at its first agent_updated
 * (or first event) and updated in place by the parent's agent_updated
 * events and the child's own events.
 */
export interface AgentItem {
  id: string;
  kind: "agent";
  agentId: string;
  agentPath: string;
  /** sessionId is the child's session. */
  sessionId: string;
  status: AgentStatus;
  task: string;
  /** runId is the child's current (or last) run, what Stop cancels. */
  runId?: string;
  /** live is the tail of the answer being streamed (clipped). */
  live: string;
  /** liveFull is the answer being streamed, up to its commit. */
  liveFull?: string;
  /** activeCall is the callId of the child's tool call in progress. */
  activeCall?: string;
  /** tools are the child's last tool calls; toolCount counts them all. */
  tools: AgentTool[];
  toolCount: number;
  /** answer is the child's last committed answer (clipped). */
  answer: string;
  error: string;
  usage?: AgentUsage;
}

/**
 * The model's plan (its update_plan tool): one card per chat, updated in
 * place by each plan event (and by a resumed session's plan).
 */
export interface PlanItem {
  id: string;
  kind: "plan";
  explanation: string;
  steps: PlanStep[];
}

/** planTool is the tool whose calls the plan card stands for. */
export const planTool = "update_plan";

/**
 * A provider retry of a run, as it happens: one row per run, updated by
 * each retry (provider_retry) and done once the run goes on or ends.
 */
export interface RetryItem {
  id: string;
  kind: "retry";
  runId: string;
  attempt: number;
  /** maxAttempts is undefined while octet waits for the network (no limit but time). */
  maxAttempts?: number;
  delayMs: number;
  /** giveUpInMs is how long until octet gives up, when it knows. */
  giveUpInMs?: number;
  /** operation is an auxiliary operation's name (compaction), "" for the answer. */
  operation: string;
  cause: string;
  done: boolean;
}

export type ChatItem =
  | { id: string; kind: "user"; text: string; attached?: Chip[] }
  | RetryItem
  | PlanItem
  | { id: string; kind: "assistant"; runId: string; text: string; reasoning: string; committed: boolean }
  | ToolItem
  | AgentItem
  | { id: string; kind: "recovered"; runId: string; channel: string; text: string }
  | { id: string; kind: "approval"; params: ConfirmEffectParams; state: "pending" | "approved" | "denied" | "withdrawn" }
  | { id: string; kind: "run"; runId: string; outcome: string; changes: FileChange[] }
  | { id: string; kind: "error"; text: string; actions: ErrorAction[] }
  | { id: string; kind: "info"; text: string };

/** The state of the session the chat shows. */
export type SessionState = "none" | "idle" | "running" | "waiting_for_approval";

/** ChatModel is the transcript and status of one session. */
export class ChatModel {
  items: ChatItem[] = [];
  state: SessionState = "none";
  runId: string | undefined;
  /** sessionUsage is the session's known usage before the current run. */
  sessionUsage: Usage = {};
  /** runUsage is the current run's usage so far (its usage events). */
  runUsage: Usage = {};
  /**
   * sessionTotals are the session's known totals as the last usage event
   * said them (delegated children included), while a run goes on.
   */
  private sessionTotals: Usage | undefined;
  private n = 0;
  private dirty = new Set<string>();
  private reset = false;
  /** planCalls are update_plan calls: the plan card shows them, no tool item. */
  private planCalls = new Set<string>();

  /** nextId returns a new item id. */
  private nextId(): string {
    return `i${++this.n}`;
  }

  private add<T extends ChatItem>(item: T): T {
    this.items.push(item);
    this.dirty.add(item.id);
    return item;
  }

  private touch(item: ChatItem): void {
    this.dirty.add(item.id);
  }

  /** clear empties the transcript (a new or resumed session). */
  clear(): void {
    this.items = [];
    this.state = "none";
    this.runId = undefined;
    this.sessionUsage = {};
    this.runUsage = {};
    this.sessionTotals = undefined;
    this.dirty.clear();
    this.planCalls.clear();
    this.reset = true;
  }

  /** setPlan shows the plan: the chat's plan card, made or updated in place. */
  setPlan(p: Plan): void {
    const steps = Array.isArray(p.plan)
      ? p.plan.filter((s): s is PlanStep => s !== null && typeof s === "object" && typeof s.step === "string")
      : [];
    const explanation = typeof p.explanation === "string" ? p.explanation : "";
    const card = this.items.find((i): i is PlanItem => i.kind === "plan");
    if (card) {
      card.steps = steps;
      card.explanation = explanation;
      this.touch(card);
      return;
    }
    this.add<PlanItem>({ id: this.nextId(), kind: "plan", explanation, steps });
  }

  /**
   * planCall reports whether an event is of an update_plan call (noting
   * the call when it names the tool), which gets no tool item.
   */
  private planCall(e: Record<string, unknown>): boolean {
    const callId = typeof e.callId === "string" ? e.callId : "";
    if ((e.kind === "tool_call_started" && e.name === planTool) || (e.kind === "tool_started" && e.tool === planTool)) {
      this.planCalls.add(callId);
    }
    return this.planCalls.has(callId);
  }

  /**
   * takeChanges returns what changed since the last call: reset when the
   * whole transcript must be drawn again, else the ids of changed items
   * (removed items are in the list but no longer in items).
   */
  takeChanges(): { reset: boolean; ids: string[] } {
    const c = { reset: this.reset, ids: [...this.dirty] };
    this.reset = false;
    this.dirty.clear();
    return c;
  }

  /** addUser shows a prompt with the chips of what it carries. */
  addUser(text: string, attached: Chip[] = []): void {
    this.add({ id: this.nextId(), kind: "user", text, ...(attached.length > 0 ? { attached } : {}) });
  }

  /** retry shows a provider retry in the run's retry row (made or updated in place). */
  private retry(runId: string, e: Record<string, unknown>): void {
    const num = (k: string): number | undefined => (typeof e[k] === "number" ? (e[k] as number) : undefined);
    const str = (k: string): string => (typeof e[k] === "string" ? (e[k] as string) : "");
    let r = this.items.find((i): i is RetryItem => i.kind === "retry" && i.runId === runId && !i.done);
    r ??= this.add<RetryItem>({ id: this.nextId(), kind: "retry", runId, attempt: 0, delayMs: 0, operation: "", cause: "", done: false });
    r.attempt = num("attempt") ?? r.attempt + 1;
    r.maxAttempts = num("maxAttempts");
    r.delayMs = num("delayMs") ?? 0;
    r.giveUpInMs = num("giveUpInMs");
    r.operation = str("operation");
    r.cause = str("cause") || str("reason");
    this.touch(r);
  }

  /** retried marks the run's retry row done: the run went on, or ended. */
  private retried(runId: string): void {
    for (const i of this.items) {
      if (i.kind === "retry" && i.runId === runId && !i.done) {
        i.done = true;
        this.touch(i);
      }
    }
  }

  addInfo(text: string): void {
    this.add({ id: this.nextId(), kind: "info", text });
  }

  addError(text: string, actions: ErrorAction[]): void {
    this.add({ id: this.nextId(), kind: "error", text, actions });
  }

  /** addApproval shows a pending approval; a second copy of one is ignored. */
  addApproval(params: ConfirmEffectParams): void {
    if (this.findApproval(params.digest)) {
      return;
    }
    this.add({ id: this.nextId(), kind: "approval", params, state: "pending" });
  }

  /** approvalId is the id of the item showing the approval of digest, if any. */
  approvalId(digest: string): string | undefined {
    return this.findApproval(digest)?.id;
  }

  private findApproval(digest: string) {
    const d = digest.toLowerCase();
    return this.items.find(
      (i): i is Extract<ChatItem, { kind: "approval" }> => i.kind === "approval" && i.params.digest.toLowerCase() === d,
    );
  }

  /** settleApproval records how a pending approval ended. */
  settleApproval(digest: string, state: "approved" | "denied" | "withdrawn"): void {
    const a = this.findApproval(digest);
    if (a && a.state === "pending") {
      a.state = state;
      this.touch(a);
    }
  }

  /** pendingApprovals are the approvals still waiting for an answer. */
  pendingApprovals(): ConfirmEffectParams[] {
    return this.items.flatMap((i) => (i.kind === "approval" && i.state === "pending" ? [i.params] : []));
  }

  private openAssistant(runId: string) {
    const last = this.items[this.items.length - 1];
    if (last && last.kind === "assistant" && !last.committed && last.runId === runId) {
      return last;
    }
    for (let i = this.items.length - 1; i >= 0; i--) {
      const it = this.items[i];
      if (it.kind === "assistant" && !it.committed && it.runId === runId) {
        return it;
      }
      if (it.kind !== "tool") {
        break;
      }
    }
    return this.add({ id: this.nextId(), kind: "assistant", runId, text: "", reasoning: "", committed: false });
  }

  private tool(runId: string, callId: string): ToolItem {
    const t = this.items.find((i): i is ToolItem => i.kind === "tool" && i.callId === callId && i.runId === runId);
    return t ?? this.add<ToolItem>({ id: this.nextId(), kind: "tool", runId, callId, name: "", args: "", output: "", status: "streaming" });
  }

  /** discardProvisional drops the output of an attempt the provider retries. */
  private discardProvisional(runId: string): void {
    const keep = this.items.filter((i) => {
      const drop =
        (i.kind === "assistant" && !i.committed && i.runId === runId) ||
        (i.kind === "tool" && i.status === "streaming" && i.runId === runId);
      if (drop) {
        this.dirty.add(i.id);
      }
      return !drop;
    });
    this.items = keep;
  }

  /** agent returns the card of a child session, if there is one. */
  agent(sessionId: string): AgentItem | undefined {
    return this.items.find((i): i is AgentItem => i.kind === "agent" && i.sessionId === sessionId);
  }

  /** agentRun is the card whose child's current run is runId, if any. */
  agentRun(runId: string): AgentItem | undefined {
    return this.items.find((i): i is AgentItem => i.kind === "agent" && i.runId === runId);
  }

  private agentCard(sessionId: string, agentId: string, agentPath: string): AgentItem {
    const a = this.agent(sessionId);
    if (a) {
      a.agentId ||= agentId;
      a.agentPath ||= agentPath;
      return a;
    }
    return this.add<AgentItem>({
      id: this.nextId(), kind: "agent", agentId, agentPath, sessionId, status: "pending", task: "",
      live: "", tools: [], toolCount: 0, answer: "", error: "",
    });
  }

  /** addChildren shows the children a resumed parent session lists. */
  addChildren(children: ChildInfo[]): void {
    for (const c of children) {
      const a = this.agentCard(c.sessionId, c.agentId, c.agentPath);
      a.status = c.status;
      a.task = c.task ?? a.task;
      this.touch(a);
    }
  }

  /** agentUpdated folds the parent's agent_updated event into the child's card. */
  private agentUpdated(e: Record<string, unknown>): void {
    const str = (k: string): string => (typeof e[k] === "string" ? (e[k] as string) : "");
    const sid = str("sessionId");
    if (sid === "") {
      return;
    }
    const a = this.agentCard(sid, str("agentId"), str("agentPath"));
    const status = str("status");
    if (status === "pending" && a.status === "idle") {
      // A follow-up task: a new run comes; the last one's id is stale.
      a.runId = undefined;
    }
    if (status !== "") {
      a.status = status as AgentStatus;
    }
    if (str("task") !== "") {
      a.task = str("task");
    }
    if (status === "failed" || str("error") !== "") {
      a.error = str("error") || a.error;
    }
    if (e.usage !== null && typeof e.usage === "object") {
      a.usage = e.usage as AgentUsage;
    }
    if (status !== "running" && status !== "pending") {
      a.activeCall = undefined;
    }
    this.touch(a);
  }

  private agentTool(a: AgentItem, callId: string): AgentTool {
    let t = a.tools.find((x) => x.callId === callId);
    if (!t) {
      t = { callId, name: "", args: "", status: "streaming" };
      a.tools.push(t);
      a.toolCount++;
      if (a.tools.length > agentLimits.tools) {
        a.tools.shift();
      }
    }
    return t;
  }

  /**
   * applyChildEvent folds an event of a delegated child (parentSessionId
   * is this chat's session, or a child's for a grandchild) into the
   * child's card; a child's agent_updated makes its own children's cards.
   */
  applyChildEvent(p: EventParams): void {
    const e = p.event;
    if (e.kind === "agent_updated") {
      this.agentCard(p.sessionId, "", p.agentPath ?? "");
      this.agentUpdated(e);
      return;
    }
    const str = (k: string): string => (typeof e[k] === "string" ? (e[k] as string) : "");
    const a = this.agentCard(p.sessionId, "", p.agentPath ?? "");
    switch (e.kind) {
      case "run_started":
        a.runId = str("runId") || p.runId;
        a.live = "";
        break;
      case "output_delta":
        if (str("channel") !== "reasoning") {
          a.live = (a.live + str("text")).slice(-agentLimits.live);
          const full = a.liveFull ?? "";
          if (full.length <= agentLimits.answer) {
            a.liveFull = full + str("text");
          }
        }
        break;
      case "assistant_committed":
        if ((a.liveFull ?? "").trim() !== "") {
          a.answer = clip(a.liveFull ?? "", agentLimits.answer);
        }
        a.liveFull = "";
        break;
      case "provider_retry":
        if (e.operation === null || e.operation === undefined || e.operation === "") {
          a.live = "";
          a.liveFull = "";
        }
        break;
      case "tool_call_started": {
        const t = this.agentTool(a, str("callId"));
        t.name = str("name");
        a.activeCall = t.callId;
        break;
      }
      case "tool_call_delta": {
        const t = this.agentTool(a, str("callId"));
        if (t.args.length < 2000) {
          t.args += str("delta");
        }
        break;
      }
      case "tool_started":
      case "tool_policy_decision": {
        const t = this.agentTool(a, str("callId"));
        t.name ||= str("tool");
        if (e.kind === "tool_policy_decision" && str("decision") === "denied") {
          t.status = "denied";
        } else if (t.status === "streaming" || t.status === "waiting") {
          t.status = "running";
        }
        a.activeCall = t.callId;
        a.live = "";
        break;
      }
      case "tool_finished": {
        const t = this.agentTool(a, str("callId"));
        if (t.status !== "denied") {
          t.status = e.isError === true ? "error" : "ok";
        }
        if (a.activeCall === t.callId) {
          a.activeCall = undefined;
        }
        break;
      }
      case "run_finished":
        a.activeCall = undefined;
        for (const t of a.tools) {
          if (t.status === "running" || t.status === "waiting" || t.status === "streaming") {
            t.status = "error";
          }
        }
        for (const i of this.items) {
          if (i.kind === "approval" && i.state === "pending" && i.params.runId === p.runId) {
            i.state = "withdrawn";
            this.touch(i);
          }
        }
        if (str("outcome") === "failed" && str("error") !== "") {
          a.error = str("error");
        }
        break;
      default:
        return;
    }
    this.touch(a);
  }

  /** applyEvent folds one octet/event into the transcript. */
  applyEvent(p: EventParams): void {
    const e = p.event;
    const runId = p.runId;
    const str = (k: string): string => (typeof e[k] === "string" ? (e[k] as string) : "");
    if (e.kind.startsWith("tool_") && this.planCall(e)) {
      if (e.kind === "tool_finished" && e.isError === true) {
        this.addInfo("The plan was not updated (update_plan failed).");
      }
      return;
    }
    if (e.kind === "output_delta" || e.kind === "tool_call_started" || e.kind === "tool_started" || e.kind === "run_finished") {
      this.retried(runId);
    }
    switch (e.kind) {
      case "plan":
        this.setPlan(e as unknown as Plan);
        break;
      case "run_started":
        this.runId = str("runId") || runId;
        this.state = "running";
        break;
      case "session_state": {
        const s = str("state");
        this.state = s === "running" || s === "waiting_for_approval" ? s : "idle";
        this.runId = str("activeRunId") || undefined;
        break;
      }
      case "output_delta": {
        const a = this.openAssistant(runId);
        if (str("channel") === "reasoning") {
          a.reasoning += str("text");
        } else {
          a.text += str("text");
        }
        this.touch(a);
        break;
      }
      case "assistant_committed": {
        const a = this.items.find((i) => i.kind === "assistant" && !i.committed && i.runId === runId);
        if (a && a.kind === "assistant") {
          a.committed = true;
          this.touch(a);
        }
        break;
      }
      case "tool_call_started": {
        const t = this.tool(runId, str("callId"));
        t.name = str("name");
        this.touch(t);
        break;
      }
      case "tool_call_delta": {
        const t = this.tool(runId, str("callId"));
        t.args += str("delta");
        this.touch(t);
        break;
      }
      case "tool_started": {
        const t = this.tool(runId, str("callId"));
        t.name ||= str("tool");
        if (t.status === "streaming" || t.status === "waiting") {
          t.status = "running";
        }
        this.touch(t);
        break;
      }
      case "tool_policy_decision": {
        const t = this.tool(runId, str("callId"));
        if (str("decision") === "denied") {
          t.status = "denied";
          t.reason = str("reason");
        } else if (t.status === "streaming" || t.status === "waiting") {
          t.status = "running";
        }
        this.touch(t);
        break;
      }
      case "tool_output": {
        const t = this.tool(runId, str("callId"));
        t.output += str("text");
        this.touch(t);
        break;
      }
      case "tool_finished": {
        const t = this.tool(runId, str("callId"));
        if (t.status !== "denied") {
          t.status = e.isError === true ? "error" : "ok";
        }
        if (e.isError === true && str("error") !== "") {
          t.result = str("error");
        }
        if (Array.isArray(e.changes)) {
          t.changes = e.changes as FileChange[];
        }
        this.touch(t);
        break;
      }
      case "provider_retry":
        if (e.operation === null || e.operation === undefined || e.operation === "") {
          this.discardProvisional(runId);
        }
        this.retry(runId, e);
        break;
      case "usage":
        this.runUsage = e as Usage;
        if (e.session !== null && typeof e.session === "object") {
          this.sessionTotals = e.session as Usage;
        }
        break;
      case "run_finished":
        this.finishRun(runId, str("outcome"), str("error"));
        break;
      case "agent_updated":
        this.agentUpdated(e);
        break;
      default:
        break;
    }
  }

  /**
   * usage is the session's usage including the current run: the known
   * totals, complete only when both parts are, and the latest context fill.
   */
  usage(): Usage {
    const a = this.sessionUsage;
    const b = this.runUsage;
    const t = this.sessionTotals;
    if (t) {
      return { ...t, complete: a.complete !== false && b.complete !== false, contextTokens: b.contextTokens ?? a.contextTokens, contextWindow: b.contextWindow ?? a.contextWindow };
    }
    const sum = (x?: number, y?: number) => (x === undefined && y === undefined ? undefined : (x ?? 0) + (y ?? 0));
    return {
      input: sum(a.input, b.input),
      cachedInput: sum(a.cachedInput, b.cachedInput),
      output: sum(a.output, b.output),
      reasoning: sum(a.reasoning, b.reasoning),
      costMicros: sum(a.costMicros, b.costMicros),
      complete: a.complete !== false && b.complete !== false,
      contextTokens: b.contextTokens ?? a.contextTokens,
      contextWindow: b.contextWindow ?? a.contextWindow,
    };
  }

  private finishRun(runId: string, outcome: string, error: string): void {
    this.sessionUsage = this.usage();
    this.runUsage = {};
    this.sessionTotals = undefined;
    this.state = "idle";
    this.runId = undefined;
    for (const i of this.items) {
      if (i.kind === "approval" && i.state === "pending" && i.params.runId === runId) {
        i.state = "withdrawn";
        this.touch(i);
      }
      if (i.kind === "tool" && i.runId === runId && (i.status === "running" || i.status === "waiting" || i.status === "streaming")) {
        i.status = "error";
        this.touch(i);
      }
    }
    const changes = this.items.flatMap((i) => (i.kind === "tool" && i.runId === runId && i.changes ? i.changes : []));
    this.add({ id: this.nextId(), kind: "run", runId, outcome, changes: mergeChanges(changes) });
    if (outcome === "failed") {
      this.addError(error || "The run failed.", actionsFor(error));
    }
  }

  /** addRecovered shows recovered output of an interrupted attempt. */
  addRecovered(p: RecoveredOutputParams): void {
    if (p.text === "") {
      return;
    }
    this.add({ id: this.nextId(), kind: "recovered", runId: p.runId, channel: p.channel, text: p.text });
  }

  /** setWaiting marks the call an approval is for as waiting. */
  setWaiting(p: ConfirmEffectParams): void {
    const child = p.childSessionId ? this.agent(p.childSessionId) : this.agentRun(p.runId);
    if (child) {
      const t = this.agentTool(child, p.callId);
      t.name ||= p.tool;
      t.status = "waiting";
      child.activeCall = t.callId;
      this.touch(child);
      this.state = "waiting_for_approval";
      return;
    }
    const t = this.tool(p.runId, p.callId);
    t.name ||= p.tool;
    t.status = "waiting";
    this.touch(t);
    this.state = "waiting_for_approval";
  }

  /** loadTranscript replaces the transcript with a resumed session's. */
  loadTranscript(entries: TranscriptEntry[], recovered: RecoveredOutputParams[] = [], runs: RunEnd[] = []): void {
    this.clear();
    const tools = new Map<string, ToolItem>();
    /** ends is where each run's items end, for the marker of a run that did not complete. */
    const ends = new Map<string, number>();
    for (const e of entries) {
      const runId = e.runId ?? "";
      switch (e.type) {
        case "user":
        case "steering":
        case "follow_up": {
          const { text, titles } = splitAttached(e.text ?? "");
          this.addUser(text, [
            ...(e.images ?? []).map((i): Chip => ({ label: imageLabel(i.mimeType, i.bytes), kind: "image" })),
            ...titles.map((t): Chip => ({ label: t, kind: /:\d+(-\d+)?$/.test(t) ? "range" : "file" })),
          ]);
          break;
        }
        case "assistant": {
          let text = "";
          let reasoning = "";
          const calls: TranscriptItemCall[] = [];
          for (const it of e.items ?? []) {
            if (it.type === "text") {
              text += it.text ?? "";
            } else if (it.type === "reasoning") {
              reasoning += it.text ?? "";
            } else if (it.type === "function_call") {
              calls.push({ callId: it.callId ?? "", name: it.name ?? "", args: it.arguments ?? "" });
            }
          }
          if (text !== "" || reasoning !== "") {
            this.add({ id: this.nextId(), kind: "assistant", runId, text, reasoning, committed: true });
          }
          for (const c of calls) {
            if (c.name === planTool) {
              continue;
            }
            const t = this.add<ToolItem>({ id: this.nextId(), kind: "tool", runId, callId: c.callId, name: c.name, args: c.args, output: "", status: "ok" });
            tools.set(c.callId, t);
          }
          break;
        }
        case "tool_result": {
          const r = e.result;
          if (!r) {
            break;
          }
          if (r.tool === planTool) {
            if (!r.isError && r.details?.plan) {
              this.setPlan({ plan: r.details.plan, explanation: r.details.explanation });
            }
            break;
          }
          const t = tools.get(r.callId);
          if (t) {
            t.status = r.isError ? (r.details?.policy_denial !== undefined ? "denied" : "error") : "ok";
            if (r.isError) {
              t.result = r.text;
            } else {
              t.output = clipOutput(r.text);
            }
            t.changes = r.details?.changes;
          }
          break;
        }
        case "compaction":
          this.addInfo("Earlier conversation compacted.");
          break;
        default:
          break;
      }
      if (runId !== "") {
        ends.set(runId, this.items.length);
      }
    }
    this.markRuns(runs, ends);
    for (const r of recovered) {
      this.addRecovered(r);
    }
    this.state = "idle";
    this.reset = true;
  }

  /** needsResult reports whether a finished call of the chat shows no result yet. */
  needsResult(runId: string, callId: string): boolean {
    const t = this.items.find((i): i is ToolItem => i.kind === "tool" && i.callId === callId && i.runId === runId);
    return t !== undefined && t.status === "ok" && t.output === "";
  }

  /** setToolResult shows a finished call's result text (cut to a bound) as its output. */
  setToolResult(runId: string, callId: string, text: string): void {
    const t = this.items.find((i): i is ToolItem => i.kind === "tool" && i.callId === callId && i.runId === runId);
    if (t && t.output === "") {
      t.output = clipOutput(text);
      this.touch(t);
    }
  }

  /**
   * markRuns puts, after a resumed run's last item (ends), the marker of a
   * run that did not complete and its error, as the live chat showed them.
   */
  private markRuns(runs: RunEnd[], ends: Map<string, number>): void {
    const at = runs.flatMap((r) => (ends.has(r.runId) ? [{ r, i: ends.get(r.runId) as number }] : [])).sort((a, b) => b.i - a.i);
    for (const { r, i } of at) {
      const marker: ChatItem[] = [{ id: this.nextId(), kind: "run", runId: r.runId, outcome: r.outcome, changes: [] }];
      if (r.outcome === "failed") {
        marker.push({ id: this.nextId(), kind: "error", text: r.error || "The run failed.", actions: ["showLog"] });
      }
      this.items.splice(i, 0, ...marker);
    }
  }

  /** runChanges are the changes listed for a finished run. */
  runChanges(runId: string): FileChange[] {
    const r = this.items.find((i) => i.kind === "run" && i.runId === runId);
    return r && r.kind === "run" ? r.changes : [];
  }
}

interface TranscriptItemCall {
  callId: string;
  name: string;
  args: string;
}

/** The most of a call's result the chat keeps (the session file holds all of it). */
export const outputLimit = 20_000;

/** clipOutput cuts a call's result to outputLimit characters, saying how much is left out. */
export function clipOutput(text: string): string {
  return text.length > outputLimit ? `${text.slice(0, outputLimit)}\n[… ${text.length - outputLimit} more characters in the session file]` : text;
}

/** clip shortens text to at most n characters, marking the cut. */
export function clip(text: string, n: number): string {
  const t = text.trim();
  return t.length > n ? t.slice(0, n - 1) + "…" : t;
}

/** mergeChanges keeps one change per path, the last one. */
export function mergeChanges(changes: FileChange[]): FileChange[] {
  const m = new Map<string, FileChange>();
  for (const c of changes) {
    m.set(c.path, c);
  }
  return [...m.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** actionsFor chooses the actions offered with a failed run's error. */
export function actionsFor(error: string): ErrorAction[] {
  const actions: ErrorAction[] = ["retry"];
  if (/hard usage ceiling|start a new session/i.test(error)) {
    actions.unshift("newSession");
    actions.splice(actions.indexOf("retry"), 1);
  }
  if (/model/i.test(error)) {
    actions.push("selectModel");
  }
  actions.push("showLog");
  return actions;
}
