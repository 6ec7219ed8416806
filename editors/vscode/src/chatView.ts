// The chat view: a webview view that shows a ChatModel and sends what the
// user does back to the controller.

import * as crypto from "node:crypto";
import * as vscode from "vscode";
import type { ChatModel } from "./chatModel";
import type { Chip } from "./attachments";
import type { Pickers } from "./pickers";
import { modes } from "./policy";
import { attachmentsHtml, renderItem, welcomeHtml } from "./render";

/** A message from the webview's script. */
export type ViewMessage =
  | { type: "ready" }
  | { type: "send"; text: string; mode: "prompt" | "steer" | "followUp" }
  | { type: "approval"; digest: string; decision: string }
  | { type: "action"; action: string }
  | { type: "openFile"; path: string; line?: number }
  | { type: "openHref"; href: string }
  | { type: "openDiff"; runId: string; path: string }
  | { type: "cancel" }
  | { type: "cancelAgent"; runId: string }
  | { type: "attachImage"; name: string; data: string }
  | { type: "attachUri"; uri: string }
  | { type: "removeAttachment"; index: number }
  | { type: "mention"; id: number; query: string }
  | { type: "pickMention"; key: string }
  | { type: "pick"; what: "model" | "effort" | "mode"; value: string }
  | { type: "code"; action: "copy" | "insert"; text: string };

/** A completion of an @-mention: a file or a symbol (key names it to the extension). */
export interface MentionItem {
  key: string;
  label: string;
  detail: string;
  kind: "file" | "symbol";
}

/** ChatView draws the model in the octet.chat webview view. */
export class ChatView implements vscode.WebviewViewProvider {
  static readonly viewId = "octet.chat";
  private view: vscode.WebviewView | undefined;
  private ready = false;
  /** attachments and pickers are drawn again when the webview is. */
  private attachments: Chip[] = [];
  private pickers: Pickers | undefined;
  /** revealId is an item to bring into view once the webview is ready. */
  private revealId: string | undefined;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly model: ChatModel,
    private readonly onMessage: (m: ViewMessage) => void,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    this.ready = false;
    const media = vscode.Uri.joinPath(this.extensionUri, "media");
    view.webview.options = { enableScripts: true, localResourceRoots: [media] };
    view.webview.html = this.html(view.webview, media);
    view.webview.onDidReceiveMessage((m: ViewMessage) => {
      if (m.type === "ready") {
        this.ready = true;
        this.redraw();
        return;
      }
      this.onMessage(m);
    });
    view.onDidDispose(() => {
      this.view = undefined;
      this.ready = false;
    });
  }

  /** reveal shows the view. */
  async reveal(): Promise<void> {
    if (this.view) {
      this.view.show(true);
    } else {
      await vscode.commands.executeCommand(`${ChatView.viewId}.focus`);
    }
  }

  /** revealItem shows the view with the item id in view (drawn first if it is not yet). */
  async revealItem(id: string): Promise<void> {
    this.revealId = id;
    await this.reveal();
    if (this.view && this.ready) {
      this.update();
      this.postReveal();
    }
  }

  private postReveal(): void {
    if (this.revealId !== undefined) {
      this.post({ type: "reveal", id: this.revealId });
      this.revealId = undefined;
    }
  }

  /** redraw draws every item again. */
  redraw(): void {
    this.model.takeChanges();
    this.postReset();
    this.setAttachments(this.attachments);
    if (this.pickers) {
      this.setPickers(this.pickers, true);
    }
    this.postReveal();
  }

  /** update draws what changed in the model since the last update. */
  update(): void {
    if (!this.view || !this.ready) {
      return;
    }
    const c = this.model.takeChanges();
    if (c.reset) {
      this.postReset();
      return;
    }
    const byId = new Map(this.model.items.map((i) => [i.id, i]));
    for (const id of c.ids) {
      const item = byId.get(id);
      this.post(item ? { type: "upsert", id, html: renderItem(item) } : { type: "remove", id });
    }
    this.post({ type: "state", state: this.model.state });
  }

  /** setAttachments shows what waits for the next prompt. */
  setAttachments(chips: Chip[]): void {
    this.attachments = chips;
    this.post({ type: "attachments", html: attachmentsHtml(chips), count: chips.length });
  }

  /**
   * setPickers shows the model, effort and mode pickers' choices and
   * values when they changed (drawing them again closes a picker the user
   * has open) or when the webview is drawn afresh (redraw).
   */
  setPickers(p: Pickers, redraw = false): void {
    if (!redraw && JSON.stringify(p) === JSON.stringify(this.pickers)) {
      return;
    }
    const modeChanged = p.mode !== this.pickers?.mode;
    this.pickers = p;
    this.post({ type: "pickers", ...p });
    if (modeChanged && this.model.items.length === 0) {
      this.postReset(); // the welcome names the mode
    }
  }

  /** showMentions answers the webview's @-mention query id. */
  showMentions(id: number, items: MentionItem[]): void {
    this.post({ type: "mentions", id, items });
  }

  /** focusPrompt shows the chat with the focus in its prompt. */
  async focusPrompt(): Promise<void> {
    await this.reveal();
    this.view?.show(false);
    this.post({ type: "focus" });
  }

  /** postReset draws every item again, and the welcome an empty chat shows. */
  private postReset(): void {
    const mode = this.pickers?.modes.find((m) => m.value === this.pickers?.mode) ?? { label: "Ask", title: modes[0].description };
    this.post({ type: "reset", items: this.model.items.map(renderItem), state: this.model.state, welcome: welcomeHtml(mode.label, mode.title ?? "") });
  }

  private post(m: unknown): void {
    void this.view?.webview.postMessage(m);
  }

  private html(webview: vscode.Webview, media: vscode.Uri): string {
    const nonce = crypto.randomBytes(16).toString("base64");
    const css = webview.asWebviewUri(vscode.Uri.joinPath(media, "chat.css"));
    const js = webview.asWebviewUri(vscode.Uri.joinPath(media, "chat.js"));
    return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${webview.cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="${css}"><title>octet</title></head>
<body>
<div id="welcome"></div>
<div id="log" role="log" aria-live="polite"></div>
<form id="composer">
  <div id="mentions" role="listbox" aria-label="Files and symbols to mention" hidden></div>
  <div id="attachments" aria-label="Attached to the next prompt"></div>
  <textarea id="prompt" rows="3" placeholder="Ask octet… (@ mentions a file or symbol; Enter sends, Shift+Enter starts a new line)" aria-label="Prompt"></textarea>
  <div class="row">
    <span class="pickers">
      <select id="model" title="Model" aria-label="Model"></select>
      <select id="effort" title="Reasoning effort" aria-label="Reasoning effort"></select>
      <select id="mode" title="Policy mode" aria-label="Policy mode"></select>
    </span>
    <span id="state"></span>
    <button type="button" id="cancel" class="secondary" hidden>Cancel</button>
    <button type="button" id="followUp" class="secondary" hidden title="Deliver when the run would end">Queue follow-up</button>
    <button type="submit" id="send">Send</button>
  </div>
</form>
<script nonce="${nonce}" src="${js}"></script>
</body></html>`;
  }
}
