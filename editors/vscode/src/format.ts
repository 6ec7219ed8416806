// Formatting for the status bar, quick picks and the chat: costs, token
// counts, states. Untrusted text goes through displayText (text.ts).

import { splitAttached } from "./attachments";
import type { SessionState } from "./chatModel";
import type { FileChange, ModelInfo, TranscriptEntry, Usage } from "./protocol";
import { displayText } from "./text";

/** formatCost formats micro-dollars as dollars ("$0.0042"); unknown is "". */
export function formatCost(micros: number | undefined): string {
  if (micros === undefined) {
    return "";
  }
  const d = micros / 1e6;
  if (d >= 100) {
    return `$${d.toFixed(0)}`;
  }
  if (d >= 1) {
    return `$${d.toFixed(2)}`;
  }
  return `$${d.toFixed(4)}`;
}

/** formatDuration formats milliseconds as "4 s", "2 min" or "1 h 5 min" (rounded up). */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.ceil(ms / 1000));
  if (s < 60) {
    return `${s} s`;
  }
  const m = Math.ceil(s / 60);
  return m < 60 ? `${m} min` : `${Math.floor(m / 60)} h${m % 60 === 0 ? "" : ` ${m % 60} min`}`;
}

/**
 * retryText is how the chat says a provider retry (both plugins use these
 * words): "retrying 3/29 in 4 s: <cause>" ("retrying 3 in 4 s" while octet
 * waits for the network, with no attempt limit), "(gives up in 6 min)"
 * when octet knows; once the run went on, "retried 3 times: <cause>".
 */
export function retryText(r: { attempt: number; maxAttempts?: number; delayMs: number; giveUpInMs?: number; operation: string; cause: string; done: boolean }): string {
  const what = r.operation === "" ? "" : ` ${r.operation}`;
  if (r.done) {
    return `retried${what} ${r.attempt} ${r.attempt === 1 ? "time" : "times"}: ${r.cause}`;
  }
  const of = r.maxAttempts === undefined ? `${r.attempt}` : `${r.attempt}/${r.maxAttempts}`;
  const giveUp = r.giveUpInMs === undefined ? "" : ` (gives up in ${formatDuration(r.giveUpInMs)})`;
  return `retrying${what} ${of} in ${formatDuration(r.delayMs)}: ${r.cause}${giveUp}`;
}

/** formatTokens formats a token count ("950", "12.3k", "1.2M"). */
export function formatTokens(n: number): string {
  if (n < 1000) {
    return String(n);
  }
  if (n < 1e6) {
    return `${(n / 1000).toFixed(n < 1e4 ? 1 : 0)}k`;
  }
  return `${(n / 1e6).toFixed(1)}M`;
}

/** contextFill is how full the context is, in percent, or undefined. */
export function contextFill(u: Usage): number | undefined {
  if (!u.contextWindow || u.contextTokens === undefined) {
    return undefined;
  }
  return Math.min(100, Math.round((100 * u.contextTokens) / u.contextWindow));
}

const stateText: Record<SessionState, string> = {
  none: "no session",
  idle: "idle",
  running: "running",
  waiting_for_approval: "waiting for approval",
};

const stateIcon: Record<SessionState, string> = {
  none: "$(circle-outline)",
  idle: "$(check)",
  running: "$(sync~spin)",
  waiting_for_approval: "$(bell-dot)",
};

/** statusText is the status bar text: state, model, cost and context fill. */
export function statusText(state: SessionState, model: string, u: Usage): string {
  const parts = [`${stateIcon[state]} octet: ${stateText[state]}`];
  if (model !== "") {
    parts.push(displayText(model, "label", 40));
  }
  const cost = formatCost(u.costMicros);
  if (cost !== "") {
    parts.push(u.complete === false ? `≥${cost}` : cost);
  }
  const fill = contextFill(u);
  if (fill !== undefined) {
    parts.push(`ctx ${fill}%`);
  }
  return parts.join(" · ");
}

/** statusTooltip is the status bar tooltip with the usage in detail. */
export function statusTooltip(state: SessionState, model: string, u: Usage): string {
  const lines = [`octet — ${stateText[state]}`];
  if (model !== "") {
    lines.push(`Model: ${displayText(model, "line", 200)}`);
  }
  if (u.input !== undefined || u.output !== undefined) {
    lines.push(`Tokens: ${formatTokens(u.input ?? 0)} in (${formatTokens(u.cachedInput ?? 0)} cached), ${formatTokens(u.output ?? 0)} out`);
  }
  const cost = formatCost(u.costMicros);
  if (cost !== "") {
    lines.push(`Cost: ${cost}${u.complete === false ? " (some usage unknown)" : ""}`);
  }
  const fill = contextFill(u);
  if (fill !== undefined) {
    lines.push(`Context: ${formatTokens(u.contextTokens ?? 0)} of ${formatTokens(u.contextWindow ?? 0)} (${fill}%)`);
  }
  return lines.join("\n");
}

/** relativeTime formats an RFC 3339 time as "5 min ago". */
export function relativeTime(iso: string | undefined, now: number = Date.now()): string {
  if (!iso) {
    return "";
  }
  const t = Date.parse(iso);
  if (Number.isNaN(t)) {
    return "";
  }
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) {
    return "just now";
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)} min ago`;
  }
  if (s < 86400) {
    return `${Math.floor(s / 3600)} h ago`;
  }
  return `${Math.floor(s / 86400)} d ago`;
}

const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/**
 * formatWhen says when an RFC 3339 time was, in local time: "just now",
 * "5 min ago · 14:05", "3 h ago · 09:12", "yesterday 09:12", "3 Dec
 * 14:05" (with the year when it is not this one); "" when it is not a time.
 */
export function formatWhen(iso: string | undefined, now: Date = new Date()): string {
  const t = iso ? new Date(iso) : undefined;
  if (!t || Number.isNaN(t.getTime())) {
    return "";
  }
  const two = (n: number) => String(n).padStart(2, "0");
  const clock = `${two(t.getHours())}:${two(t.getMinutes())}`;
  const day = (d: Date) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  const days = Math.round((day(now) - day(t)) / 86_400_000);
  if (days === 0) {
    const rel = relativeTime(iso, now.getTime());
    return rel === "just now" ? rel : `${rel} · ${clock}`;
  }
  if (days === 1) {
    return `yesterday ${clock}`;
  }
  const year = t.getFullYear() === now.getFullYear() ? "" : ` ${t.getFullYear()}`;
  return `${t.getDate()} ${months[t.getMonth()]}${year} ${clock}`;
}

/** A quick pick item carrying the value it stands for. */
export interface Pick<T> {
  label: string;
  description?: string;
  value: T;
}

/** changePicks are the files a run changed, to pick one to open. */
export function changePicks(changes: FileChange[]): Pick<FileChange>[] {
  return changes.map((c) => ({ label: displayText(c.path, "label", 200), description: c.kind, value: c }));
}

/** rewindPicks are the prompts a session can be rewound to before (their text on one line). */
export function rewindPicks(entries: TranscriptEntry[], now: Date = new Date()): Pick<TranscriptEntry>[] {
  return entries.map((e) => ({ label: displayText(splitAttached(e.text ?? "").text, "label", 120), description: formatWhen(e.time, now), value: e }));
}

/** modelPicks are the models to choose from, the current one marked. */
export function modelPicks(models: ModelInfo[], current: string): Pick<string>[] {
  return models.map((m) => ({
    label: displayText(m.id, "label", 120),
    description: [
      m.id === current ? "current" : "",
      typeof m.contextWindow === "number" ? `${m.contextWindow} tokens` : "context window unknown",
      m.listed === false ? "not listed by the endpoint" : "",
    ]
      .filter((x) => x !== "")
      .join(" · "),
    value: m.id,
  }));
}
