// HTML of chat items for the webview. All text is escaped; the webview's
// script only wires the data-* attributes to messages to the extension.

import { scopeText } from "./approvals";
import type { Chip } from "./attachments";
import type { AgentItem, ChatItem, ErrorAction, PlanItem, RetryItem, ToolItem, ToolStatus } from "./chatModel";
import { formatCost, formatTokens, retryText } from "./format";
import { escapeHtml, renderMarkdown } from "./markdown";
import type { FileChange } from "./protocol";
import { displayText } from "./text";

const actionLabel: Record<ErrorAction, string> = {
  retry: "Retry",
  newSession: "New Session",
  showLog: "Show Log",
  selectModel: "Select Model",
  openSettings: "Open Settings",
  restart: "Restart octet",
};

const toolIcon: Record<string, string> = {
  streaming: "…",
  waiting: "?",
  running: "⟳",
  ok: "✓",
  error: "✗",
  denied: "⊘",
};

/**
 * argSummary is a one-line summary of a tool call's JSON arguments: its
 * command, path or pattern, every line of it (newlines shown as ⏎),
 * cut with a marker.
 */
export function argSummary(args: string): string {
  let v: unknown;
  try {
    v = JSON.parse(args);
  } catch {
    return displayText(args, "line", 80);
  }
  if (v === null || typeof v !== "object") {
    return "";
  }
  const o = v as Record<string, unknown>;
  const s = typeof o.command === "string" ? o.command : typeof o.path === "string" ? o.path : typeof o.pattern === "string" ? o.pattern : "";
  return displayText(s, "line", 80);
}

/** toolName is a tool's name on one line ("tool" when it has none yet). */
function toolName(name: string): string {
  return name === "" ? "tool" : displayText(name, "line", 60);
}

function changesHtml(runId: string, changes: FileChange[]): string {
  if (changes.length === 0) {
    return "";
  }
  const rows = changes
    .map(
      (c) =>
        `<li><span class="kind kind-${escapeHtml(c.kind)}">${escapeHtml(c.kind)}</span> ` +
        `<a href="#" class="file" data-file="${escapeHtml(c.path)}">${escapeHtml(c.path)}</a> ` +
        `<a href="#" class="open-diff" data-run="${escapeHtml(runId)}" data-path="${escapeHtml(c.path)}">open diff</a></li>`,
    )
    .join("");
  return `<ul class="changes">${rows}</ul>`;
}

/** diffHtml renders a unified diff with its added and removed lines marked. */
export function diffHtml(diff: string): string {
  const lines = diff.split("\n").map((l) => {
    const cls = l.startsWith("+++") || l.startsWith("---") ? "hdr" : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : l.startsWith("@@") ? "hunk" : "";
    return cls ? `<span class="${cls}">${escapeHtml(l)}</span>` : escapeHtml(l);
  });
  return `<pre class="diff">${lines.join("\n")}</pre>`;
}

const agentIcon: Record<string, string> = {
  pending: "…",
  running: "⟳",
  idle: "◌",
  completed: "✓",
  failed: "✗",
  cancelled: "⊘",
  disconnected: "⚠",
};

/** agentActivity is the one line saying what a child agent is doing now. */
export function agentActivity(a: AgentItem): string {
  const t = a.activeCall !== undefined ? a.tools.find((x) => x.callId === a.activeCall) : undefined;
  if (t) {
    const arg = argSummary(t.args);
    const what = t.status === "waiting" ? "waiting for approval: " : "";
    return `${what}${toolName(t.name)}${arg ? " " + arg : ""}`;
  }
  if (a.status === "running" && a.live.trim() !== "") {
    const l = displayText(a.live.replace(/\s+/g, " ").trim(), "line");
    return a.live.length >= 240 ? "…" + l : l;
  }
  if (a.status === "pending") {
    return "waiting to start";
  }
  if (a.status === "running") {
    return "thinking";
  }
  return "";
}

/** agentUsage is a child's usage in a few words ("1.2k in · 300 out · $0.0042"). */
export function agentUsage(a: AgentItem): string {
  const u = a.usage;
  if (!u) {
    return "";
  }
  const parts: string[] = [];
  if (u.input !== undefined) {
    parts.push(`${formatTokens(u.input)} in`);
  }
  if (u.output !== undefined) {
    parts.push(`${formatTokens(u.output)} out`);
  }
  if (u.costPicodollars !== undefined) {
    parts.push(formatCost(u.costPicodollars / 1e6) + (u.complete === false ? "+" : ""));
  } else if (u.complete === false) {
    parts.push("cost unknown");
  }
  return parts.join(" · ");
}

function agentHtml(item: AgentItem): string {
  const id = escapeHtml(item.id);
  const st = escapeHtml(item.status);
  const activity = agentActivity(item);
  const usage = agentUsage(item);
  const tools = item.tools
    .map(
      (t) =>
        `<li class="status-${escapeHtml(t.status)}"><span class="icon">${toolIcon[t.status] ?? ""}</span> <strong>${escapeHtml(toolName(t.name))}</strong> ` +
        `<span class="arg">${escapeHtml(argSummary(t.args))}</span></li>`,
    )
    .join("");
  const hidden = item.toolCount - item.tools.length;
  const detail =
    item.toolCount === 0
      ? ""
      : `<details class="agent-tools"><summary>${item.toolCount} tool call${item.toolCount === 1 ? "" : "s"}</summary>` +
        `${hidden > 0 ? `<div class="more">${hidden} earlier not shown</div>` : ""}<ul>${tools}</ul></details>`;
  const stop =
    (item.status === "pending" || item.status === "running") && item.runId
      ? `<button class="secondary stop" data-agent-stop="${escapeHtml(item.runId)}" title="Cancel this sub-agent's run (the parent goes on)">Stop</button>`
      : "";
  return (
    `<div id="${id}" class="item agent agent-${st}" data-session="${escapeHtml(item.sessionId)}">` +
    `<div class="head"><span class="badge badge-${st}">${agentIcon[item.status] ?? ""} ${st}</span> ` +
    `<strong class="path">${escapeHtml(displayText(item.agentPath || item.agentId || "sub-agent", "line", 120))}</strong>${stop}</div>` +
    (item.task !== "" ? `<div class="task">${escapeHtml(displayText(item.task, "line", 400))}</div>` : "") +
    (activity !== "" ? `<div class="activity">${escapeHtml(activity)}</div>` : "") +
    detail +
    (item.answer !== "" ? `<div class="answer">${renderMarkdown(item.answer)}</div>` : "") +
    (item.error !== "" ? `<div class="message error-text">${escapeHtml(item.error)}</div>` : "") +
    (usage !== "" ? `<div class="usage">${escapeHtml(usage)}</div>` : "") +
    `</div>`
  );
}

const stepIcon: Record<string, string> = { completed: "✓", in_progress: "▸", pending: "○" };

/** planHtml is the plan card: the steps as a checklist. */
export function planHtml(item: PlanItem): string {
  const done = item.steps.filter((s) => s.status === "completed").length;
  const steps = item.steps
    .map(
      (s) =>
        `<li class="step step-${escapeHtml(s.status)}"><span class="icon">${stepIcon[s.status] ?? "○"}</span> ` +
        `${escapeHtml(displayText(s.step, "line", 300))}</li>`,
    )
    .join("");
  return (
    `<div id="${escapeHtml(item.id)}" class="item plan"><div class="head"><strong>Plan</strong> ` +
    `<span class="progress">${done} of ${item.steps.length} done</span></div>` +
    (item.explanation !== "" ? `<div class="explanation">${escapeHtml(displayText(item.explanation, "line", 400))}</div>` : "") +
    `<ul class="steps">${steps}</ul></div>`
  );
}

const chipTitle: Record<Chip["kind"], string> = { image: "an image", file: "a file", range: "lines of a file" };

/** chipHtml is one chip (remove: a button that removes it). */
function chipHtml(c: Chip, remove = ""): string {
  return (
    `<span class="chip chip-${c.kind}${c.kind === "image" ? " image-chip" : ""}" title="${chipTitle[c.kind]}">` +
    `${escapeHtml(displayText(c.label, "line", 120))}${remove}</span>`
  );
}

/** chipsHtml shows what a prompt carried as chips. */
function chipsHtml(chips: Chip[]): string {
  return chips.length === 0 ? "" : `<div class="chips">${chips.map((c) => chipHtml(c)).join("")}</div>`;
}

/**
 * attachmentsHtml is the composer's chips: what waits for the next prompt
 * (images, files, selections, symbols), each with a button that removes it.
 */
export function attachmentsHtml(chips: Chip[]): string {
  return chips
    .map((c, i) =>
      chipHtml(
        c,
        ` <button type="button" class="secondary remove-attachment" data-remove-attachment="${i}" title="Remove" aria-label="Remove ${escapeHtml(displayText(c.label, "line", 120))}">×</button>`,
      ),
    )
    .join("");
}

/**
 * welcomeHtml is what an empty chat shows: what octet does here and how
 * to talk to it (the keys are the extension's keybindings).
 */
export function welcomeHtml(mode: string, description: string): string {
  const hint = (k: string, what: string) => `<li><kbd>${escapeHtml(k)}</kbd> ${escapeHtml(what)}</li>`;
  return (
    `<div class="welcome"><h2>Ask octet</h2>` +
    `<p>octet reads, searches and edits this workspace and runs commands. ` +
    `Mode <strong>${escapeHtml(mode)}</strong>: ${escapeHtml(description)} (the picker under the prompt changes it).</p>` +
    `<ul class="hints">` +
    hint("@", "mentions a file or a symbol: it goes with the prompt") +
    hint("Ctrl+Alt+K", "adds the editor's selection (⌘⌥K on macOS)") +
    hint("Ctrl+Alt+O", "comes back to this chat from anywhere (⌘⌥O)") +
    hint("Enter", "sends; Shift+Enter starts a new line; while a run works, Enter steers it and Alt+Enter queues a follow-up") +
    hint("Paste / drop", "images go with the prompt too") +
    `</ul><p class="try">Try: “Explain what this project does”, “Find where errors are logged”, “Add a test for @main.go”.</p></div>`
  );
}

/** retryHtml is a run's provider retries: what failed, when octet tries again, and Cancel. */
function retryHtml(item: RetryItem): string {
  const cancel = item.done ? "" : ` <button class="secondary" data-retry-cancel="${escapeHtml(item.runId)}" title="Cancel the run">Cancel</button>`;
  return (
    `<div id="${escapeHtml(item.id)}" class="item retry${item.done ? " done" : ""}"><span class="icon">${item.done ? "↻" : "⟳"}</span> ` +
    `<span class="text">${escapeHtml(displayText(retryText(item), "line", 400))}</span>${cancel}</div>`
  );
}

const toolStatusText: Partial<Record<ToolStatus, string>> = { error: "failed", waiting: "waiting for approval" };

/**
 * toolHtml is a tool call's row: its name, the gist of its arguments and
 * its status; a failed or denied call says why in its own words (the
 * arguments and output fold away under the row).
 */
function toolHtml(item: ToolItem): string {
  const failed = item.status === "error" || item.status === "denied";
  const why = failed ? (item.result ?? "") : "";
  const output = item.output === "" ? "" : `<pre class="output">${escapeHtml(item.output)}</pre>`;
  const args = item.args === "" ? "" : `<pre class="args">${escapeHtml(item.args)}</pre>`;
  return (
    `<div id="${escapeHtml(item.id)}" class="item tool status-${escapeHtml(item.status)}"><details>` +
    `<summary><span class="icon">${toolIcon[item.status] ?? ""}</span> <strong>${escapeHtml(toolName(item.name))}</strong> ` +
    `<span class="arg">${escapeHtml(argSummary(item.args))}</span> <span class="status">${escapeHtml(toolStatusText[item.status] ?? item.status)}</span></summary>` +
    `${args}${output}</details>` +
    (why !== "" ? `<div class="why">${escapeHtml(displayText(why, "block", 1000))}</div>` : "") +
    `${changesHtml(item.runId, item.changes ?? [])}</div>`
  );
}

/** renderItem returns the HTML of one chat item (its outer element has id). */
export function renderItem(item: ChatItem): string {
  const id = escapeHtml(item.id);
  switch (item.kind) {
    case "user":
      return `<div id="${id}" class="item user">${renderMarkdown(item.text)}${chipsHtml(item.attached ?? [])}</div>`;
    case "retry":
      return retryHtml(item);
    case "assistant": {
      const reasoning =
        item.reasoning === ""
          ? ""
          : `<details class="reasoning"><summary>Reasoning</summary>${renderMarkdown(item.reasoning)}</details>`;
      const cls = item.committed ? "" : " streaming";
      return `<div id="${id}" class="item assistant${cls}">${reasoning}<div class="answer">${renderMarkdown(item.text)}</div></div>`;
    }
    case "tool":
      return toolHtml(item);
    case "agent":
      return agentHtml(item);
    case "plan":
      return planHtml(item);
    case "recovered":
      return (
        `<div id="${id}" class="item recovered"><div class="label">Recovered ${escapeHtml(item.channel)} of an interrupted attempt ` +
        `(not part of the answer)</div><pre>${escapeHtml(item.text)}</pre></div>`
      );
    case "approval": {
      const p = item.params;
      const d = escapeHtml(p.digest);
      const body = p.diff ? diffHtml(p.diff) : p.detail ? `<pre class="detail">${escapeHtml(p.detail)}</pre>` : "";
      const buttons =
        item.state !== "pending"
          ? `<div class="settled">${escapeHtml(item.state)}</div>`
          : `<div class="buttons">` +
            `<button data-approval="${d}" data-decision="approve">Approve</button>` +
            (p.ruleScope ? `<button data-approval="${d}" data-decision="approve_for_session">Approve for session</button>` : "") +
            `<button class="secondary" data-approval="${d}" data-decision="deny">Deny</button>` +
            `<button class="secondary" data-approval="${d}" data-decision="deny_reason">Deny with reason…</button>` +
            (p.diff ? `<button class="secondary" data-approval="${d}" data-decision="view_diff">View diff</button>` : "") +
            `</div>`;
      const scope = item.state === "pending" ? scopeText(p) : "";
      return (
        `<div id="${id}" class="item approval state-${escapeHtml(item.state)}" tabindex="-1">` +
        (p.agentPath ? `<div class="agent-of">Sub-agent <strong>${escapeHtml(displayText(p.agentPath, "line", 120))}</strong> asks</div>` : "") +
        `<div class="title">Approval: ${escapeHtml(p.title)}</div>` +
        `${p.diff && p.detail ? `<div class="detail">${escapeHtml(p.detail)}</div>` : ""}${body}` +
        (scope !== "" ? `<div class="scope">${escapeHtml(scope)}</div>` : "") +
        `${buttons}</div>`
      );
    }
    case "run":
      return (
        `<div id="${id}" class="item run outcome-${escapeHtml(item.outcome)}"><span class="outcome">Run ${escapeHtml(item.outcome)}</span>` +
        `${changesHtml(item.runId, item.changes)}</div>`
      );
    case "error": {
      const buttons = item.actions.map((a) => `<button class="secondary" data-action="${a}">${actionLabel[a]}</button>`).join("");
      return `<div id="${id}" class="item error"><div class="message">${escapeHtml(item.text)}</div><div class="buttons">${buttons}</div></div>`;
    }
    case "info":
      return `<div id="${id}" class="item info">${escapeHtml(item.text)}</div>`;
  }
}
