// Types of the octet editor protocol (docs/protocol.md) that the extension
// uses. Only the fields the extension reads are declared.

/** The policies a session can run under, strictest first. */
export type EffectPolicy = "controlled_bash_approval" | "controlled" | "unsafe_host";

/** A setting's value and where it came from. */
export interface Sourced<T> {
  value: T;
  source: string;
}

/** The EffectiveToolPolicy snapshot. */
export interface EffectiveToolPolicy {
  effect_policy?: Sourced<EffectPolicy>;
  [key: string]: Sourced<unknown> | undefined;
}

/** One structured change of a file (tool_finished.changes, session/diff). */
export interface FileChange {
  path: string;
  kind: "add" | "modify" | "delete";
  diff: string;
  diffOmitted?: boolean;
  note?: string;
  conflict?: string;
}

/** The params of octet/confirmEffect. */
export interface ConfirmEffectParams {
  sessionId: string;
  runId: string;
  callId: string;
  tool: string;
  effect: string;
  title: string;
  detail?: string;
  diff?: string;
  digest: string;
  expiresAt?: string;
  ruleScope?: { path?: string; command?: string };
  /** agentPath and childSessionId name the delegated child asking. */
  agentPath?: string;
  childSessionId?: string;
}

/** The result of octet/confirmEffect. */
export interface ConfirmEffectResult {
  decision: "approve" | "approve_for_session" | "deny";
  digest: string;
  reason?: string;
}

/** An octet/event's event object. */
export interface OctetEvent {
  kind: string;
  [field: string]: unknown;
}

/** The params of octet/event. */
export interface EventParams {
  sessionId: string;
  runId: string;
  epoch?: string;
  seq: number;
  /** parentSessionId and agentPath are set on a delegated child's events. */
  parentSessionId?: string;
  agentPath?: string;
  event: OctetEvent;
}

/** The statuses of a delegated child agent (agent_updated). */
export type AgentStatus = "pending" | "running" | "idle" | "completed" | "failed" | "cancelled" | "disconnected";

/** A child's usage in agent_updated (cost in picodollars). */
export interface AgentUsage {
  input?: number;
  cachedInput?: number;
  output?: number;
  reasoning?: number;
  costPicodollars?: number;
  complete?: boolean;
}

/** A child of a resumed parent session (resume result children). */
export interface ChildInfo {
  sessionId: string;
  agentId: string;
  agentPath: string;
  status: AgentStatus;
  task?: string;
}

/** The params of octet/recoveredOutput. */
export interface RecoveredOutputParams {
  sessionId: string;
  runId: string;
  seq?: number;
  channel: string;
  text: string;
  attempt?: number;
}

/** Usage totals (octet/prompt answers, resume, usage events). */
export interface Usage {
  input?: number;
  cachedInput?: number;
  output?: number;
  reasoning?: number;
  costMicros?: number;
  requests?: number;
  complete?: boolean;
  contextTokens?: number;
  contextWindow?: number;
  uncertainty?: string;
  refusal?: string;
  /** session is, in a usage event, the session's known totals after the request (every run and child). */
  session?: Usage;
}

/** An assistant item of a transcript entry. */
export interface TranscriptItem {
  type: "text" | "reasoning" | "function_call";
  text?: string;
  callId?: string;
  name?: string;
  arguments?: string;
}

/** A transcript entry (octet/session/resume, octet/session/transcript). */
export interface TranscriptEntry {
  id: string;
  parent?: string;
  time?: string;
  type: string;
  runId?: string;
  text?: string;
  /** images are a prompt's images (kept by octet, named here). */
  images?: { mimeType: string; bytes: number; sha256?: string }[];
  items?: TranscriptItem[];
  result?: {
    callId: string;
    tool: string;
    text: string;
    isError: boolean;
    /** details.policy_denial is the reason code of a call that was denied. */
    details?: { changes?: FileChange[]; plan?: PlanStep[]; explanation?: string; policy_denial?: string };
  };
  summary?: string;
}

/** One step of the model's plan. */
export interface PlanStep {
  step: string;
  status: "pending" | "in_progress" | "completed";
}

/** The model's plan (plan events, resume's plan). */
export interface Plan {
  explanation?: string;
  plan: PlanStep[];
}

/** How a run of a transcript ended when it did not complete (resume's and transcript's runs). */
export interface RunEnd {
  runId: string;
  outcome: "failed" | "cancelled" | "max_turns";
  error?: string;
}

/** The result of octet/session/transcript. */
export interface TranscriptPage {
  /** entries are newest first. */
  entries: TranscriptEntry[];
  nextBefore?: string;
  runs?: RunEnd[];
}

/** The params of octet/saveDocuments (server → client). */
export interface SaveDocumentsParams {
  uris: string[];
  reason: string;
}

/** The result of octet/saveDocuments. */
export interface SaveDocumentsResult {
  saved: string[];
  declined: string[];
}

/** An LSP Diagnostic as octet/diagnostics carries it. */
export interface LspDiagnostic {
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
  severity?: 1 | 2 | 3 | 4;
  code?: string | number;
  source?: string;
  message: string;
}

/** The result of octet/session/resume. */
export interface ResumeResult {
  sessionId: string;
  head: string;
  transcript: TranscriptEntry[];
  runs?: RunEnd[];
  transcriptNextBefore?: string;
  usage?: Usage;
  recoveredOutput?: RecoveredOutputParams[];
  pendingApprovals?: ConfirmEffectParams[];
  activeRunId?: string;
  epoch?: string;
  lastSeq?: number;
  children?: ChildInfo[];
  plan?: Plan;
  /** model is the model the session's next request uses. */
  model?: string;
  /** reasoning is the effort its next request uses ("" the provider's default). */
  reasoning?: string;
}

/** One session of octet/session/list. */
export interface SessionInfo {
  sessionId: string;
  title?: string;
  cwd?: string;
  createdAt?: string;
  updatedAt?: string;
  usageUncertain?: boolean;
}

/** The answer of octet/prompt. */
export interface PromptResult {
  runId: string;
  outcome: "completed" | "cancelled" | "failed" | "max_turns";
  usage?: Usage;
  error?: string;
}

/** One model of octet/models. */
export interface ModelInfo {
  id: string;
  /** null: octet does not know (a model only the endpoint lists). */
  contextWindow?: number | null;
  maxOutputTokens?: number | null;
  reasoning?: boolean | null;
  images?: boolean | null;
  /** Present when the endpoint's list was read: whether it lists the model. */
  listed?: boolean;
}

/** The params of window/showMessage and window/showMessageRequest (type 1 error, 2 warning, 3 info, 4 log). */
export interface ShowMessageParams {
  type: number;
  message: string;
  actions?: { title: string }[];
}

/**
 * clientCapabilities adds octet's to the capabilities vscode-languageclient
 * computed, and takes back window.workDoneProgress: VS Code would show the
 * server's progress (the tool running, with the model's arguments) in the
 * status bar, where `$(name)` is drawn as an icon; the chat and octet's own
 * status bar item show the run instead.
 */
export function clientCapabilities(caps: { experimental?: unknown; window?: { workDoneProgress?: boolean } }): void {
  caps.experimental = {
    ...(caps.experimental as object | undefined),
    octet: { confirmEffect: true, events: true, recoveredOutput: true, saveDocuments: true, diagnostics: true },
  };
  caps.window = { ...caps.window, workDoneProgress: false };
}

/** Error codes of the octet protocol. */
export const ErrorCodes = {
  RunEnded: -32803,
  SessionBusy: -32010,
  NoSession: -32011,
  NoRun: -32012,
  Backend: -32013,
} as const;
