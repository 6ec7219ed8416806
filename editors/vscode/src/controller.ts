// The controller: one octet lsp client, the session the chat shows, and
// every command, approval and view action.

import * as path from "node:path";
import * as vscode from "vscode";
import type { CancellationToken, LanguageClient } from "vscode-languageclient/node";
import { approvalNotice, decidedText, reviewAction, type Settled } from "./approvals";
import { ChatModel, type ErrorAction } from "./chatModel";
import type { ViewMessage } from "./chatView";
import { ChatView } from "./chatView";
import { createClient } from "./client";
import { diffPath } from "./diff";
import { DiffDocuments, octetEditor, proposedScheme, scheme, showChange, showProposed } from "./diffDocs";
import { changePicks, modelPicks, rewindPicks } from "./format";
import type { Attachments } from "./attachments";
import { Composer } from "./composer";
import { pickers } from "./pickers";
import { modeOf, modes, policyOf, sandboxLabel } from "./policy";
import {
  ErrorCodes,
  type ConfirmEffectParams,
  type ConfirmEffectResult,
  type EffectiveToolPolicy,
  type EventParams,
  type FileChange,
  type ModelInfo,
  type PromptResult,
  type RecoveredOutputParams,
  type ResumeResult,
  type SaveDocumentsParams,
  type SessionInfo,
  type ShowMessageParams,
  type TranscriptEntry,
  type TranscriptPage,
} from "./protocol";
import { SessionNode, SessionsTree } from "./sessionsTree";
import { EditorSync } from "./sync";
import { Status } from "./status";
import { displayText } from "./text";

const lastSessionKey = "octet.lastSession";
/** maxSettled bounds the approvals whose outcome Review… can still tell. */
const maxSettled = 256;

interface Pending {
  params: ConfirmEffectParams;
  resolve: (r: ConfirmEffectResult) => void;
}

/** errorCode returns a JSON-RPC error's code, if it is one. */
function errorCode(e: unknown): number | undefined {
  return typeof e === "object" && e !== null && typeof (e as { code?: unknown }).code === "number" ? (e as { code: number }).code : undefined;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Octet is the extension's state. */
export class Octet implements vscode.Disposable {
  private client: LanguageClient | undefined;
  readonly model = new ChatModel();
  private sessionId: string | undefined;
  private modelName = "";
  private policy: string | undefined;
  /** The OS sandbox the session's commands run in (sandboxLabel). */
  private sandbox: string | undefined;
  /** effort is the session's reasoning effort ("" the provider's default). */
  private effort = "";
  /**
   * efforts are the efforts this window set, by session: an older octet
   * does not say a resumed session's (a session it opens afresh has the
   * default).
   */
  private efforts = new Map<string, string>();
  /** models is the catalog (octet/models), for the model picker. */
  private models: ModelInfo[] = [];
  private lastPrompt: string | undefined;
  private lastAttached: Attachments | undefined;
  /** composer holds what waits for the next prompt. */
  private readonly composer: Composer;
  /** sync sends the editor's diagnostics and saves octet's edits before commands. */
  private readonly sync = new EditorSync(() => this.workspaceRoot());
  private pending = new Map<string, Pending>();
  /** settled remembers how the last approvals ended (bounded), for Review… on a stale notification. */
  private settled = new Map<string, Settled>();
  /** approvalDiffs maps a pending approval to its proposed-content URI. */
  private approvalDiffs = new Map<string, string>();
  private readonly docs = new DiffDocuments();
  private readonly status = new Status();
  readonly view: ChatView;
  readonly tree: SessionsTree;
  private disposables: vscode.Disposable[] = [];

  constructor(
    private readonly ctx: vscode.ExtensionContext,
    private readonly output: vscode.LogOutputChannel,
  ) {
    this.view = new ChatView(ctx.extensionUri, this.model, (m) => void this.onView(m));
    this.tree = new SessionsTree(() => this.listSessions(), () => this.sessionId);
    this.composer = new Composer(this.view, () => this.workspaceRoot());
    this.disposables.push(
      vscode.workspace.registerTextDocumentContentProvider(scheme, this.docs),
      vscode.workspace.registerTextDocumentContentProvider(proposedScheme, this.docs),
      vscode.window.registerWebviewViewProvider(ChatView.viewId, this.view, { webviewOptions: { retainContextWhenHidden: true } }),
      vscode.window.createTreeView("octet.sessions", { treeDataProvider: this.tree }),
      this.docs,
      this.status,
      this.sync,
    );
    this.refresh();
  }

  /** commands maps each contributed command to its handler. */
  commands(): Record<string, (...args: never[]) => unknown> {
    return {
      "octet.newSession": () => this.newSession(),
      "octet.cancelRun": () => this.cancel(),
      "octet.finishNow": () => this.finishNow(),
      "octet.showRunDiff": () => this.showRunDiff(),
      "octet.rewind": () => this.rewind(),
      "octet.selectModel": () => this.selectModel(),
      "octet.policyMode": () => this.pickPolicy(),
      "octet.showLog": () => this.output.show(),
      "octet.restartServer": () => this.restart(),
      "octet.refreshSessions": () => this.tree.refresh(),
      "octet.resumeSession": (n: SessionNode) => this.resume(n.info.sessionId),
      "octet.renameSession": (n: SessionNode) => this.rename(n),
      "octet.forkSession": (n: SessionNode) => this.fork(n),
      "octet.deleteSession": (n: SessionNode) => this.deleteSession(n),
      "octet.focusChat": () => this.view.focusPrompt(),
      "octet.addSelection": () => this.composer.addSelection(),
      "octet.approveInDiff": (uri?: vscode.Uri) => this.decideInDiff(uri, "approve"),
      "octet.denyInDiff": (uri?: vscode.Uri) => this.decideInDiff(uri, "deny"),
    };
  }

  private refresh(): void {
    this.view.update();
    const configured = policyOf(vscode.workspace.getConfiguration("octet").get<string>("policyMode", "ask"));
    this.status.update(this.model, this.modelName, this.policy ?? configured, this.sandbox);
    this.view.setPickers(pickers(this.models, this.modelName, this.effort, this.policy ?? configured));
  }

  // --- the server ---------------------------------------------------------

  /** start starts octet lsp and restores the workspace's last session. */
  async start(): Promise<void> {
    const made = createClient(this.output, { workspace: { handleApplyEdit: this.sync.applyEdit } });
    if ("error" in made) {
      this.output.error(made.error);
      this.status.problem(made.error);
      this.model.addError(made.error, ["openSettings", "restart"]);
      this.refresh();
      void vscode.window.showErrorMessage(displayText(made.error, "message", 600), "Open Settings").then((a) => {
        if (a) {
          void this.onAction("openSettings");
        }
      });
      return;
    }
    const c = made.client;
    this.client = c;
    c.onNotification("octet/event", (p: EventParams) => this.onEvent(p));
    c.onNotification("octet/recoveredOutput", (p: RecoveredOutputParams) => {
      if (p.sessionId === this.sessionId) {
        this.model.addRecovered(p);
        this.refresh();
      }
    });
    c.onRequest("octet/confirmEffect", (p: ConfirmEffectParams, token: CancellationToken) => this.confirm(p, token));
    c.onRequest("octet/saveDocuments", (p: SaveDocumentsParams) => this.sync.saveDocuments(p));
    // vscode-languageclient would put the server's messages into
    // notifications as they are, and approve from one that shows the
    // approval's text folded and cut: these handlers replace its own.
    c.onNotification("window/showMessage", (p: ShowMessageParams) => this.serverMessage(p));
    c.onRequest("window/showMessageRequest", (p: ShowMessageParams) => this.serverMessageRequest(p));
    try {
      await c.start();
    } catch (e) {
      const text = `octet lsp did not start: ${message(e)}`;
      this.output.error(text);
      this.status.problem(text);
      this.model.addError(text, ["showLog", "openSettings", "restart"]);
      this.refresh();
      return;
    }
    this.sync.attach(c);
    await this.loadModels();
    const last = this.ctx.workspaceState.get<string>(lastSessionKey);
    if (last) {
      await this.resume(last, true);
    }
    this.tree.refresh();
    this.refresh();
  }

  private async restart(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    for (const [, p] of this.pending) {
      p.resolve({ decision: "deny", digest: p.params.digest });
    }
    this.pending.clear();
    if (c) {
      await c.stop().catch(() => undefined);
    }
    this.sessionId = undefined;
    this.model.clear();
    await this.start();
  }

  private async request<T>(method: string, params: object): Promise<T> {
    if (!this.client) {
      throw new Error("octet is not running: see the octet output channel (octet: Show Log)");
    }
    return this.client.sendRequest<T>(method, params);
  }

  private async loadModels(): Promise<ModelInfo[]> {
    try {
      const r = await this.request<{ models: ModelInfo[]; default: string }>("octet/models", {});
      if (this.modelName === "") {
        this.modelName = vscode.workspace.getConfiguration("octet").get<string>("model", "") || r.default;
      }
      this.models = r.models;
      return r.models;
    } catch (e) {
      this.output.warn(`octet/models: ${message(e)}`);
      return [];
    }
  }

  private onEvent(p: EventParams): void {
    if (p.sessionId !== this.sessionId) {
      // A delegated child of the chat's session (or a child's child): its card shows it.
      const parent = p.parentSessionId;
      if (this.sessionId !== undefined && parent !== undefined && (parent === this.sessionId || this.model.agent(parent))) {
        this.model.applyChildEvent(p);
        this.refresh();
      }
      return;
    }
    this.model.applyEvent(p);
    if (p.event.kind === "run_finished") {
      this.tree.refresh();
    }
    if (p.event.kind === "tool_finished" && typeof p.event.callId === "string" && this.model.needsResult(p.runId, p.event.callId)) {
      void this.showResult(p.sessionId, p.runId, p.event.callId);
    }
    this.refresh();
  }

  /**
   * showResult shows a finished call's result (what the model was told),
   * which its events do not carry unless it streamed output: from the
   * transcript, where it is durable by its tool_finished.
   */
  private async showResult(sessionId: string, runId: string, callId: string): Promise<void> {
    try {
      const t = await this.request<TranscriptPage>("octet/session/transcript", { sessionId, limit: 20 });
      const r = t.entries.find((e) => e.type === "tool_result" && e.result?.callId === callId)?.result;
      if (r && sessionId === this.sessionId) {
        this.model.setToolResult(runId, callId, r.text);
        this.refresh();
      }
    } catch (e) {
      this.output.warn(`could not read the result of ${callId}: ${message(e)}`);
    }
  }

  // --- sessions -------------------------------------------------------------

  private workspaceRoot(): string | undefined {
    return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  }

  private async listSessions(): Promise<SessionInfo[]> {
    if (!this.client) {
      return [];
    }
    const root = this.workspaceRoot();
    const r = await this.request<{ sessions: SessionInfo[] }>("octet/session/list", root ? { cwd: root, limit: 200 } : { limit: 200 });
    return root ? r.sessions.filter((s) => !s.cwd || s.cwd === root || s.cwd.startsWith(root + path.sep)) : r.sessions;
  }

  private setSession(id: string | undefined): void {
    this.sessionId = id;
    void this.ctx.workspaceState.update(lastSessionKey, id);
    this.tree.refresh();
  }

  /** newSession starts a session in the configured policy mode and model. */
  async newSession(): Promise<string | undefined> {
    const cfg = vscode.workspace.getConfiguration("octet");
    const params: Record<string, unknown> = { effectPolicy: policyOf(cfg.get<string>("policyMode", "ask")) };
    const m = cfg.get<string>("model", "");
    if (m !== "") {
      params.model = m;
    }
    const effort = cfg.get<string>("reasoningEffort", "");
    if (effort !== "") {
      params.reasoning = effort;
    }
    try {
      const r = await this.request<{ sessionId: string; effectiveToolPolicy: EffectiveToolPolicy }>("octet/session/new", params);
      this.model.clear();
      this.policy = r.effectiveToolPolicy.effect_policy?.value;
      this.sandbox = sandboxLabel(r.effectiveToolPolicy);
      this.modelName = m !== "" ? m : this.modelName;
      this.effort = effort;
      this.efforts.set(r.sessionId, effort);
      this.setSession(r.sessionId);
      this.refresh();
      await this.view.reveal();
      return r.sessionId;
    } catch (e) {
      this.showError(`octet could not start a session: ${message(e)}`, ["showLog", "openSettings"]);
      return undefined;
    }
  }

  /** resume shows a session from disk (quiet: a restored one may be gone). */
  async resume(id: string, quiet = false): Promise<void> {
    try {
      const r = await this.request<ResumeResult>("octet/session/resume", { sessionId: id });
      this.sessionId = id;
      // The selection the session recorded last, which its next request uses.
      this.effort = r.reasoning ?? this.efforts.get(id) ?? "";
      if (r.model) {
        this.modelName = r.model;
      }
      this.model.loadTranscript(r.transcript, r.recoveredOutput ?? [], r.runs ?? []);
      if (r.transcriptNextBefore) {
        this.model.addInfo("Older messages are in the session file (octet sessions show).");
      }
      this.model.sessionUsage = r.usage ?? {};
      if (r.activeRunId) {
        this.model.state = "running";
        this.model.runId = r.activeRunId;
      }
      if (r.children && r.children.length > 0) {
        this.model.addChildren(r.children);
      }
      if (r.plan) {
        // The transcript page may not reach back to the plan's call.
        this.model.setPlan(r.plan);
      }
      if (r.usage?.refusal) {
        this.model.addError(r.usage.refusal, ["newSession"]);
      }
      for (const p of this.pending.values()) {
        if (p.params.sessionId === id) {
          this.model.addApproval(p.params);
        }
      }
      this.setSession(id);
      try {
        const pol = await this.request<EffectiveToolPolicy>("octet/policy", { sessionId: id });
        this.policy = pol.effect_policy?.value;
        this.sandbox = sandboxLabel(pol);
      } catch {
        this.policy = undefined;
        this.sandbox = undefined;
      }
      this.refresh();
    } catch (e) {
      if (quiet) {
        this.output.warn(`could not restore session ${id}: ${message(e)}`);
        if (errorCode(e) === ErrorCodes.NoSession) {
          this.setSession(undefined);
        }
        return;
      }
      this.showError(`octet could not open session ${id}: ${message(e)}`, ["showLog"]);
    }
  }

  private async rename(n: SessionNode): Promise<void> {
    const title = await vscode.window.showInputBox({ prompt: "New title of the session", value: n.info.title ?? "" });
    if (title === undefined) {
      return;
    }
    try {
      await this.request("octet/session/rename", { sessionId: n.info.sessionId, title });
      this.tree.refresh();
    } catch (e) {
      this.showError(`octet could not rename the session: ${message(e)}`, []);
    }
  }

  private async fork(n: SessionNode): Promise<void> {
    try {
      const t = await this.request<{ entries: TranscriptEntry[] }>("octet/session/transcript", { sessionId: n.info.sessionId, limit: 1 });
      const head = t.entries[0]?.id;
      if (!head) {
        void vscode.window.showInformationMessage("octet: the session is empty; there is nothing to fork.");
        return;
      }
      const r = await this.request<{ sessionId: string }>("octet/session/fork", { sessionId: n.info.sessionId, entryId: head });
      await this.resume(r.sessionId);
    } catch (e) {
      this.showError(`octet could not fork the session: ${message(e)}`, []);
    }
  }

  private async deleteSession(n: SessionNode): Promise<void> {
    const ok = await vscode.window.showWarningMessage(
      `Delete the octet session "${displayText(n.info.title || n.info.sessionId, "line", 200)}"? Its file is removed.`,
      { modal: true },
      "Delete",
    );
    if (ok !== "Delete") {
      return;
    }
    try {
      await this.request("octet/session/delete", { sessionId: n.info.sessionId });
      if (n.info.sessionId === this.sessionId) {
        this.model.clear();
        this.setSession(undefined);
        this.refresh();
      }
      this.tree.refresh();
    } catch (e) {
      const busy = errorCode(e) === ErrorCodes.SessionBusy ? " Cancel its run first." : "";
      this.showError(`octet could not delete the session: ${message(e)}${busy}`, []);
    }
  }

  // --- runs -----------------------------------------------------------------

  /** send sends the chat input: a prompt, or input for the running run. */
  async send(text: string, mode: "prompt" | "steer" | "followUp"): Promise<void> {
    const runId = this.model.runId;
    if (mode !== "prompt" && runId) {
      try {
        await this.request(mode === "steer" ? "octet/steer" : "octet/followUp", { runId, text });
        this.model.addUser(text);
        this.model.addInfo(mode === "steer" ? "Sent to the running model at its next step." : "Queued as a follow-up.");
      } catch (e) {
        if (errorCode(e) !== ErrorCodes.RunEnded) {
          this.showError(`octet: ${message(e)}`, []);
          return;
        }
        await this.prompt(text); // the run ended meanwhile
        return;
      }
      this.refresh();
      return;
    }
    await this.prompt(text);
  }

  /**
   * prompt runs text with what waits in the composer (attached: this
   * instead, when the prompt is sent again).
   */
  private async prompt(text: string, attached?: Attachments): Promise<void> {
    const id = this.sessionId ?? (await this.newSession());
    if (!id) {
      return;
    }
    attached ??= this.composer.take();
    this.lastPrompt = text;
    this.lastAttached = attached;
    this.model.addUser(text, attached.chips());
    this.model.state = "running";
    this.refresh();
    try {
      const params: Record<string, unknown> = { sessionId: id, text };
      if (!attached.empty()) {
        params.context = attached.context();
      }
      const r = await this.request<PromptResult>("octet/prompt", params);
      if (r.outcome === "failed" && !this.model.items.some((i) => i.kind === "error")) {
        this.model.addError(r.error ?? "The run failed.", ["retry", "showLog"]);
      }
    } catch (e) {
      this.model.state = "idle";
      const code = errorCode(e);
      if (code === ErrorCodes.SessionBusy) {
        this.model.addError(`${message(e)} Use Steer or Queue follow-up while a run is active, or Cancel it.`, []);
      } else if (code === ErrorCodes.NoSession) {
        this.setSession(undefined);
        this.model.addError(`${message(e)}`, ["newSession"]);
      } else {
        this.model.addError(`octet could not run the prompt: ${message(e)}`, ["retry", "showLog"]);
      }
    }
    this.tree.refresh();
    this.refresh();
  }

  private async cancel(): Promise<void> {
    const runId = this.model.runId;
    if (!runId) {
      void vscode.window.showInformationMessage("octet: no run is active.");
      return;
    }
    try {
      await this.request("octet/cancel", { runId });
    } catch (e) {
      this.showError(`octet could not cancel: ${message(e)}`, []);
    }
  }

  /** cancelAgent cancels a delegated child's run (the parent's goes on). */
  private async cancelAgent(runId: string): Promise<void> {
    const a = this.model.agentRun(runId);
    if (!a) {
      return; // not a run of a child the chat shows
    }
    try {
      await this.request("octet/cancel", { runId });
    } catch (e) {
      if (errorCode(e) !== ErrorCodes.RunEnded && errorCode(e) !== ErrorCodes.NoRun) {
        this.showError(`octet could not stop ${a.agentPath || "the sub-agent"}: ${message(e)}`, []);
      }
    }
  }

  private async finishNow(): Promise<void> {
    const runId = this.model.runId;
    if (!runId) {
      void vscode.window.showInformationMessage("octet: no run is active.");
      return;
    }
    try {
      await this.request("octet/finishNow", { runId });
      this.model.addInfo("Finishing now: the rest of the run uses no tools.");
      this.refresh();
    } catch (e) {
      this.showError(`octet: ${message(e)}`, []);
    }
  }

  // --- approvals --------------------------------------------------------

  private confirm(p: ConfirmEffectParams, token: CancellationToken): Promise<ConfirmEffectResult> {
    const key = p.digest.toLowerCase();
    const existing = this.pending.get(key);
    if (existing) {
      // A copy re-sent after a resume: the first answer decides both.
      return new Promise((resolve) => {
        const prev = existing.resolve;
        existing.resolve = (r) => {
          prev(r);
          resolve(r);
        };
      });
    }
    return new Promise((resolve) => {
      this.pending.set(key, { params: p, resolve });
      token.onCancellationRequested(() => this.settle(key, { decision: "deny", digest: p.digest }, "withdrawn"));
      if (p.sessionId === this.sessionId) {
        this.model.addApproval(p);
        this.model.setWaiting(p);
        this.refresh();
        void this.view.reveal();
      }
      void this.notify(p);
    });
  }

  private settle(key: string, r: ConfirmEffectResult, state: Settled): void {
    const p = this.pending.get(key);
    if (!p) {
      return;
    }
    this.pending.delete(key);
    this.settled.delete(key);
    this.settled.set(key, state);
    if (this.settled.size > maxSettled) {
      this.settled.delete(this.settled.keys().next().value as string);
    }
    p.resolve(r);
    this.closeDiffs(key);
    this.model.settleApproval(key, state);
    if (this.model.state === "waiting_for_approval" && this.model.pendingApprovals().length === 0) {
      this.model.state = "running";
    }
    this.refresh();
  }

  /**
   * notify shows an approval's notification. It cannot show the whole
   * effect, so its one action, Review…, opens the chat's card, which does
   * and is where the approval is decided (approvals.ts).
   */
  private async notify(p: ConfirmEffectParams): Promise<void> {
    const n = approvalNotice(p);
    const pick = await vscode.window.showWarningMessage(n.text, ...n.actions);
    if (pick !== reviewAction) {
      return;
    }
    const key = p.digest.toLowerCase();
    if (!this.pending.has(key)) {
      // Decided in the chat (or withdrawn) while the notification stayed up.
      void vscode.window.showInformationMessage(decidedText(p, this.settled.get(key)));
      return;
    }
    await this.review(key);
  }

  /** review shows a pending approval's card in the chat (its session's, resumed if the chat shows another). */
  private async review(key: string): Promise<void> {
    const p = this.pending.get(key)?.params;
    if (!p) {
      return; // decided meanwhile
    }
    if (p.sessionId !== this.sessionId) {
      await this.resume(p.sessionId); // shows the session's pending approvals
    }
    if (p.sessionId !== this.sessionId || !this.pending.has(key)) {
      return;
    }
    this.model.addApproval(p);
    const id = this.model.approvalId(p.digest);
    this.refresh();
    if (id !== undefined) {
      await this.view.revealItem(id);
    }
  }

  /** decide acts on a decision from the notification or the chat; true when it answered. */
  private async decide(key: string, decision: string): Promise<boolean> {
    const p = this.pending.get(key)?.params;
    if (!p) {
      return true;
    }
    switch (decision) {
      case "view_diff":
        await this.viewApprovalDiff(p);
        return false;
      case "approve":
      case "approve_for_session":
        this.settle(key, { decision, digest: p.digest }, "approved");
        return true;
      case "deny":
        this.settle(key, { decision: "deny", digest: p.digest }, "denied");
        return true;
      case "deny_reason": {
        const reason = await vscode.window.showInputBox({
          title: `Deny "${displayText(p.title, "line", 120)}"`,
          prompt: "Why? octet tells the model. Enter without a reason just denies; Escape goes back.",
          placeHolder: "reason (optional)",
        });
        if (reason === undefined) {
          return false;
        }
        const r: ConfirmEffectResult = { decision: "deny", digest: p.digest };
        if (reason.trim() !== "") {
          r.reason = reason.trim();
        }
        this.settle(key, r, "denied");
        return true;
      }
      default:
        return false;
    }
  }

  private fileUri(rel: string): vscode.Uri | undefined {
    if (path.isAbsolute(rel)) {
      return vscode.Uri.file(rel);
    }
    const root = this.workspaceRoot();
    if (!root) {
      return undefined;
    }
    const abs = path.resolve(root, rel);
    if (abs !== root && !abs.startsWith(root + path.sep)) {
      return undefined;
    }
    return vscode.Uri.file(abs);
  }

  private async viewApprovalDiff(p: ConfirmEffectParams): Promise<void> {
    const rel = p.ruleScope?.path ?? (p.diff ? diffPath(p.diff) : undefined);
    const uri = rel ? this.fileUri(rel) : undefined;
    if (!p.diff || !rel || !uri) {
      return;
    }
    const shown = await showProposed(this.docs, uri, rel, p.diff, p.title);
    if (shown) {
      this.approvalDiffs.set(p.digest.toLowerCase(), shown.toString());
    }
  }

  /**
   * decideInDiff decides the approval whose proposed content uri shows
   * (the diff editor's title actions; without uri, the active editor's).
   */
  private async decideInDiff(uri: vscode.Uri | undefined, decision: "approve" | "deny"): Promise<void> {
    const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    const shown = uri ?? (input instanceof vscode.TabInputTextDiff ? input.modified : undefined);
    const key = [...this.approvalDiffs].find(([, u]) => u === shown?.toString())?.[0];
    if (key === undefined || !this.pending.has(key)) {
      void vscode.window.showInformationMessage("octet: this diff's approval was already decided.");
      return;
    }
    await this.decide(key, decision);
  }

  /** closeDiffs closes the diff editor of a decided approval. */
  private closeDiffs(key: string): void {
    const uri = this.approvalDiffs.get(key);
    this.approvalDiffs.delete(key);
    if (!uri) {
      return;
    }
    const tabs = vscode.window.tabGroups.all
      .flatMap((g) => g.tabs)
      .filter((t) => t.input instanceof vscode.TabInputTextDiff && t.input.modified.toString() === uri);
    if (tabs.length > 0) {
      void vscode.window.tabGroups.close(tabs);
    }
  }

  // --- diffs, rewind, model, policy --------------------------------------

  private async runDiff(runId?: string): Promise<FileChange[] | undefined> {
    if (!this.sessionId) {
      void vscode.window.showInformationMessage("octet: no session.");
      return undefined;
    }
    try {
      const r = await this.request<{ changes: FileChange[] }>("octet/session/diff", runId ? { sessionId: this.sessionId, runId } : { sessionId: this.sessionId });
      return r.changes;
    } catch (e) {
      this.showError(`octet could not compute the run's diff: ${message(e)}`, []);
      return undefined;
    }
  }

  private async openChange(c: FileChange): Promise<void> {
    const uri = this.fileUri(c.path);
    if (uri) {
      await showChange(this.docs, uri, c);
    }
  }

  private async showRunDiff(): Promise<void> {
    const changes = await this.runDiff();
    if (!changes) {
      return;
    }
    if (changes.length === 0) {
      void vscode.window.showInformationMessage("octet: the last run changed no files.");
      return;
    }
    const pick =
      changes.length === 1
        ? changes[0]
        : (await vscode.window.showQuickPick(changePicks(changes), { title: "Files the last run changed" }))?.value;
    if (pick) {
      await this.openChange(pick);
    }
  }

  private async rewind(): Promise<void> {
    const id = this.sessionId;
    if (!id) {
      void vscode.window.showInformationMessage("octet: no session to rewind.");
      return;
    }
    try {
      const targets = (await this.prompts(id)).filter((e) => e.parent);
      if (targets.length === 0) {
        void vscode.window.showInformationMessage("octet: nothing to rewind: the session has no earlier prompt to go back before.");
        return;
      }
      const entry = (await vscode.window.showQuickPick(rewindPicks(targets), { title: "Rewind to before which prompt?" }))?.value;
      if (!entry) {
        return;
      }
      const what = await vscode.window.showQuickPick(
        [
          { label: "Files and conversation", files: true, conversation: true },
          { label: "Files only", files: true, conversation: false },
          { label: "Conversation only", files: false, conversation: true },
        ],
        { title: "What to take back" },
      );
      if (!what) {
        return;
      }
      const params = { sessionId: id, entryId: entry.parent!, files: what.files, conversation: what.conversation };
      const dry = await this.request<{ changes: FileChange[] }>("octet/session/rewind", { ...params, dryRun: true });
      const lines = dry.changes.map((c) => `${c.kind} ${displayText(c.path, "line")}${c.conflict ? ` — left as it is: ${displayText(c.conflict, "line", 300)}` : ""}`);
      const ok = await vscode.window.showWarningMessage(
        `Rewind to before "${displayText(entry.text ?? "", "line", 120)}"?`,
        { modal: true, detail: lines.length > 0 ? lines.join("\n") : "No file changes." },
        "Rewind",
      );
      if (ok !== "Rewind") {
        return;
      }
      const r = await this.request<{ applied: boolean; changes: FileChange[] }>("octet/session/rewind", params);
      const conflicts = r.changes.filter((c) => c.conflict);
      if (!r.applied || conflicts.length > 0) {
        const which = conflicts.map((c) => `${c.path} (${c.conflict})`).join("; ");
        void vscode.window.showWarningMessage(displayText(`octet: rewind left ${conflicts.length} file(s) as they are: ${which}`, "message", 800));
      }
      await this.resume(id);
    } catch (e) {
      this.showError(`octet could not rewind: ${message(e)}`, []);
    }
  }

  /**
   * prompts are the session's prompts on its active branch, newest first:
   * every page of its transcript (a long session's first prompt is many
   * pages back).
   */
  private async prompts(sessionId: string): Promise<TranscriptEntry[]> {
    const out: TranscriptEntry[] = [];
    let before: string | undefined;
    for (let page = 0; page < 100; page++) {
      const t = await this.request<TranscriptPage>("octet/session/transcript", { sessionId, limit: 500, ...(before ? { beforeEntryId: before } : {}) });
      out.push(...t.entries.filter((e) => e.type === "user"));
      before = t.nextBefore;
      if (!before) {
        break;
      }
    }
    return out;
  }

  private async selectModel(): Promise<void> {
    const models = await this.loadModels();
    if (models.length === 0) {
      return;
    }
    const pick = (await vscode.window.showQuickPick(modelPicks(models, this.modelName), { title: "octet model" }))?.value;
    if (pick !== undefined) {
      await this.setModel(pick);
    }
  }

  /**
   * sessionSetting sets one of the session's settings with method (params
   * plus the session), or without a session the setting key of new
   * sessions, to value; it returns the value in effect, or undefined when
   * it could not (what: what it was doing, for the error).
   */
  private async sessionSetting(key: string, method: string, params: object, value: string, what: string): Promise<string | undefined> {
    try {
      if (!this.sessionId) {
        await vscode.workspace.getConfiguration("octet").update(key, value, vscode.ConfigurationTarget.Workspace);
        return value;
      }
      return (await this.request<{ effective: string }>(method, { sessionId: this.sessionId, ...params })).effective;
    } catch (e) {
      this.showError(`octet could not ${what}: ${message(e)}`, []);
      return undefined;
    }
  }

  /** setModel selects the session's model (without a session, new sessions' model). */
  private async setModel(model: string): Promise<void> {
    this.modelName = (await this.sessionSetting("model", "octet/setModel", { model }, model, "select the model")) ?? this.modelName;
    this.refresh();
  }

  /** setEffort selects the session's reasoning effort (without a session, new sessions'). */
  private async setEffort(effort: string): Promise<void> {
    this.effort = (await this.sessionSetting("reasoningEffort", "octet/setReasoning", { effort }, effort, "set the reasoning effort")) ?? this.effort;
    if (this.sessionId) {
      this.efforts.set(this.sessionId, this.effort);
    }
    this.refresh();
  }

  private async pickPolicy(): Promise<void> {
    const cur = modeOf(this.policy)?.mode ?? vscode.workspace.getConfiguration("octet").get<string>("policyMode", "ask");
    const pick = await vscode.window.showQuickPick(
      modes.map((m) => ({ label: m.label, description: m.mode === cur ? "current" : "", detail: m.description, mode: m })),
      { title: "octet policy mode" },
    );
    if (pick) {
      await this.setMode(pick.mode);
    }
  }

  /** setMode switches the session's policy mode (without a session, new sessions'). */
  private async setMode(mode: (typeof modes)[number]): Promise<void> {
    try {
      if (!this.sessionId) {
        // Machine-scoped: a user setting (a workspace cannot hold it).
        await vscode.workspace.getConfiguration("octet").update("policyMode", mode.mode, vscode.ConfigurationTarget.Global);
        this.policy = mode.policy;
      } else {
        const r = await this.request<EffectiveToolPolicy>("octet/session/setPolicy", { sessionId: this.sessionId, effectPolicy: mode.policy });
        this.policy = r.effect_policy?.value;
        this.sandbox = sandboxLabel(r);
      }
    } catch (e) {
      this.showError(
        `octet could not switch to ${mode.label}: ${message(e)}. A session can only be as loose as octet lsp's launch policy (see octet.args).`,
        ["openSettings"],
      );
    }
    this.refresh();
  }

  /** pick acts on a picker under the chat's prompt. */
  private async pick(what: "model" | "effort" | "mode", value: string): Promise<void> {
    if (what === "model") {
      await this.setModel(value);
    } else if (what === "effort") {
      await this.setEffort(value);
    } else {
      const mode = modeOf(value);
      if (mode) {
        await this.setMode(mode);
      }
    }
  }

  // --- the server's own messages ------------------------------------------

  /** serverMessage shows a window/showMessage: whole in the log, on one line and bounded in a notification. */
  private serverMessage(p: ShowMessageParams): void {
    const log = p.type === 1 ? this.output.error : p.type === 2 ? this.output.warn : this.output.info;
    log.call(this.output, p.message);
    const show = p.type === 1 ? vscode.window.showErrorMessage : p.type === 2 ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
    this.notifyWithLog(show, displayText(p.message, "message", 600));
  }

  /**
   * serverMessageRequest answers window/showMessageRequest, which octet
   * sends only to put an approval to a client without octet/confirmEffect:
   * a notification cannot show it whole, so it is denied (null), never
   * approved, and the person is told.
   */
  private serverMessageRequest(p: ShowMessageParams): null {
    this.output.warn(`denied a window/showMessageRequest (a notification cannot show an approval whole):\n${p.message}`);
    this.notifyWithLog(
      vscode.window.showWarningMessage,
      "octet asked for an approval through a notification, which cannot show it whole: it was denied (the log has its text). If approvals stop reaching the chat, run octet: Restart Server.",
    );
    return null;
  }

  /** notifyWithLog shows a notification whose one action opens the octet log. */
  private notifyWithLog(show: (text: string, ...items: string[]) => Thenable<string | undefined>, text: string): void {
    void show(text, "Show Log").then((a) => {
      if (a) {
        this.output.show();
      }
    });
  }

  // --- the view ---------------------------------------------------------

  private showError(text: string, actions: ErrorAction[]): void {
    this.output.error(text);
    this.model.addError(text, actions);
    this.refresh();
  }

  private async onAction(a: string): Promise<void> {
    switch (a) {
      case "retry":
        if (this.lastPrompt) {
          await this.prompt(this.lastPrompt, this.lastAttached);
        }
        break;
      case "newSession":
        await this.newSession();
        break;
      case "showLog":
        this.output.show();
        break;
      case "selectModel":
        await this.selectModel();
        break;
      case "openSettings":
        await vscode.commands.executeCommand("workbench.action.openSettings", "octet.");
        break;
      case "restart":
        await this.restart();
        break;
    }
  }

  private async onView(m: ViewMessage): Promise<void> {
    switch (m.type) {
      case "send":
        await this.send(m.text, m.mode);
        break;
      case "approval":
        await this.decide(m.digest.toLowerCase(), m.decision);
        break;
      case "action":
        await this.onAction(m.action);
        break;
      case "cancel":
        await this.cancel();
        break;
      case "cancelAgent":
        await this.cancelAgent(m.runId);
        break;
      case "attachImage":
        this.composer.addImage(m.name, Buffer.from(m.data, "base64"));
        break;
      case "attachUri":
        await this.composer.addImageUri(m.uri);
        break;
      case "removeAttachment":
        this.composer.remove(m.index);
        break;
      case "mention":
        await this.composer.mentions(m.id, m.query);
        break;
      case "pickMention":
        await this.composer.pickMention(m.key);
        break;
      case "pick":
        await this.pick(m.what, m.value);
        break;
      case "openFile": {
        const uri = this.fileUri(m.path);
        if (uri) {
          const line = m.line ? Math.max(0, m.line - 1) : 0;
          await vscode.window.showTextDocument(uri, { ...octetEditor, selection: new vscode.Range(line, 0, line, 0) });
        }
        break;
      }
      case "code":
        await this.codeAction(m.action, m.text);
        break;
      case "openHref":
        if (/^https?:\/\//i.test(m.href)) {
          await vscode.env.openExternal(vscode.Uri.parse(m.href));
        }
        break;
      case "openDiff": {
        const c = (await this.runDiff(m.runId))?.find((x) => x.path === m.path) ?? this.model.runChanges(m.runId).find((x) => x.path === m.path);
        if (c) {
          await this.openChange(c);
        }
        break;
      }
      default:
        break;
    }
  }

  /** codeAction copies a code block of the chat, or inserts it at the editor's cursor. */
  private async codeAction(action: "copy" | "insert", text: string): Promise<void> {
    if (action === "copy") {
      await vscode.env.clipboard.writeText(text);
      return;
    }
    const ed = vscode.window.activeTextEditor ?? vscode.window.visibleTextEditors.find((e) => e.document.uri.scheme === "file");
    if (!ed) {
      void vscode.window.showInformationMessage("octet: open a file to insert the code into (Copy puts it on the clipboard).");
      return;
    }
    await ed.edit((b) => {
      for (const sel of ed.selections) {
        b.replace(sel, text);
      }
    });
    await vscode.window.showTextDocument(ed.document, { viewColumn: ed.viewColumn, preserveFocus: false });
  }

  async dispose(): Promise<void> {
    for (const d of this.disposables) {
      d.dispose();
    }
    await this.client?.stop().catch(() => undefined);
  }
}
