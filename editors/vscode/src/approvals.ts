// Where an approval can be decided. Only a surface that shows the whole
// effect decides: the chat's approval card (render.ts) shows the title,
// the whole command or diff and what a session approval would admit, and
// offers Approve, Approve for session and Deny. Every other surface — the
// notification VS Code folds to one line and cuts, the status bar — only
// opens the card.

import type { ConfirmEffectParams } from "./protocol";
import { displayText } from "./text";

/** The one action of an approval's notification: it opens the card. */
export const reviewAction = "Review…";

/** An approval's notification: its text and the actions it offers. */
export interface ApprovalNotice {
  text: string;
  actions: readonly string[];
}

/**
 * approvalNotice is the notification of an approval: what asks (a
 * delegated child names itself), the title, the start of a command on one
 * line (its newlines shown as ⏎, cut with a marker), the tool and effect,
 * and the single action Review…. A notification cannot show the whole
 * effect, so it never approves or denies.
 */
export function approvalNotice(p: ConfirmEffectParams): ApprovalNotice {
  let who = "octet";
  let title = p.title;
  if (p.agentPath) {
    who = `octet sub-agent ${displayText(p.agentPath, "line", 80)}`;
    const prefix = `${p.agentPath}: `;
    title = title.startsWith(prefix) ? title.slice(prefix.length) : title;
  }
  const what = p.tool === "bash" && p.detail ? `: ${displayText(p.detail, "line", 160)}` : "";
  const text =
    `${who} wants to ${displayText(title, "line", 120)}${what} ` +
    `(${displayText(p.tool, "line", 60)}, ${displayText(p.effect, "line", 60)}). Review it in the chat to approve or deny.`;
  // One pass over the whole: a link cannot be formed across two pieces.
  return { text: displayText(text, "message"), actions: [reviewAction] };
}

/** How an approval ended, as the chat's card shows it. */
export type Settled = "approved" | "denied" | "withdrawn";

/**
 * decidedText is what Review… answers on the notification of an
 * approval that is no longer pending (VS Code cannot take a notification
 * down): how it ended, or that it is gone when that is not known (the
 * window's record of settled approvals is bounded).
 */
export function decidedText(p: ConfirmEffectParams, state: Settled | undefined): string {
  const what = `"${displayText(p.title, "line", 120)}"`;
  const how: Record<Settled, string> = {
    approved: "was already approved.",
    denied: "was already denied.",
    withdrawn: "was withdrawn: the call no longer waits for an answer (its run ended or was cancelled).",
  };
  const text = `octet: ${what} ${state ? how[state] : "no longer waits for an answer."}`;
  // One pass over the whole, as approvalNotice: a notification renders links.
  return displayText(text, "message");
}

/**
 * scopeText says what Approve for session admits besides this call, for
 * the rest of the session (the server's rule is exact: this path, or this
 * very command in this directory and environment).
 */
export function scopeText(p: ConfirmEffectParams): string {
  const s = p.ruleScope;
  if (!s) {
    return "";
  }
  if (s.command !== undefined) {
    return "Approve for session also admits this exact command again, in this directory and environment, for the rest of the session.";
  }
  if (s.path !== undefined) {
    return `Approve for session also admits every later ${displayText(p.tool, "line", 60)} of ${displayText(s.path, "line")}, whatever it changes, for the rest of the session.`;
  }
  return `Approve for session also admits later ${displayText(p.tool, "line", 60)} calls like this one for the rest of the session.`;
}
