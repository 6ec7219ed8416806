// What octet needs of the editor besides LSP's document sync: the
// diagnostics of the workspace's documents (octet/diagnostics, so the
// model's diagnostics tool sees what the editor shows), and saving
// octet's own edits before a command reads the disk
// (octet/saveDocuments), asking first when the user edited a document
// after octet did.

import * as path from "node:path";
import * as vscode from "vscode";
import type { LanguageClient, Middleware } from "vscode-languageclient/node";
import { Debouncer, toLsp } from "./diagnostics";
import type { SaveDocumentsParams, SaveDocumentsResult } from "./protocol";
import { displayText } from "./text";

type ApplyEdit = NonNullable<NonNullable<Middleware["workspace"]>["handleApplyEdit"]>;

/** EditorSync forwards diagnostics and answers octet/saveDocuments. */
export class EditorSync implements vscode.Disposable {
  private client: LanguageClient | undefined;
  /**
   * agentVersions are the documents octet edited (workspace/applyEdit),
   * each at the version its last edit left: a document still at that
   * version has no change of the user's since.
   */
  private readonly agentVersions = new Map<string, number>();
  private readonly debouncer = new Debouncer((uri) => this.sendDiagnostics(uri));
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly root: () => string | undefined) {
    this.disposables.push(
      vscode.languages.onDidChangeDiagnostics((e) => {
        for (const uri of e.uris) {
          this.schedule(uri);
        }
      }),
      vscode.workspace.onDidCloseTextDocument((d) => this.agentVersions.delete(d.uri.toString())),
    );
  }

  /** attach sends to client from now on, starting with what the editor already has. */
  attach(client: LanguageClient): void {
    this.client = client;
    for (const d of vscode.workspace.textDocuments) {
      if (vscode.languages.getDiagnostics(d.uri).length > 0) {
        this.schedule(d.uri);
      }
    }
  }

  private inWorkspace(uri: vscode.Uri): boolean {
    const root = this.root();
    if (!root || uri.scheme !== "file") {
      return false;
    }
    const r = path.relative(root, uri.fsPath);
    return r !== "" && !r.startsWith("..") && !path.isAbsolute(r);
  }

  private schedule(uri: vscode.Uri): void {
    if (this.inWorkspace(uri)) {
      this.debouncer.schedule(uri.toString());
    }
  }

  /** sendDiagnostics sends a document's whole current list ([] clears it). */
  private sendDiagnostics(key: string): void {
    const c = this.client;
    if (!c) {
      return;
    }
    const uri = vscode.Uri.parse(key);
    const diagnostics = vscode.languages.getDiagnostics(uri).map((d) =>
      toLsp({ range: d.range, severity: d.severity, code: d.code as string | number | { value: string | number } | undefined, source: d.source, message: d.message }),
    );
    void c.sendNotification("octet/diagnostics", { uri: c.code2ProtocolConverter.asUri(uri), diagnostics }).catch(() => undefined);
  }

  /**
   * applyEdit is the client's workspace/applyEdit middleware: it notes the
   * version each document octet edits is left at.
   */
  readonly applyEdit: ApplyEdit = async (params, next) => {
    const r = await next(params, new vscode.CancellationTokenSource().token);
    if (r && !(r instanceof Error) && "applied" in r && r.applied) {
      const uris = [
        ...(params.edit.documentChanges ?? []).flatMap((c) => ("textDocument" in c ? [c.textDocument.uri] : [])),
        ...Object.keys(params.edit.changes ?? {}),
      ];
      for (const raw of uris) {
        const doc = this.document(raw);
        if (doc) {
          this.agentVersions.set(doc.uri.toString(), doc.version);
        }
      }
    }
    return r;
  };

  private document(raw: string): vscode.TextDocument | undefined {
    const key = vscode.Uri.parse(raw).toString();
    return vscode.workspace.textDocuments.find((d) => d.uri.toString() === key);
  }

  /**
   * saveDocuments answers octet/saveDocuments: it saves the documents
   * octet changed that no one changed since, asks the user before saving
   * ones the user also changed (declining keeps them unsaved), and counts
   * a document with nothing unsaved as saved.
   */
  async saveDocuments(p: SaveDocumentsParams): Promise<SaveDocumentsResult> {
    const res: SaveDocumentsResult = { saved: [], declined: [] };
    const ask: { raw: string; doc: vscode.TextDocument }[] = [];
    const save = async (raw: string, doc: vscode.TextDocument) => (doc.isDirty && !(await doc.save()) ? res.declined : res.saved).push(raw);
    for (const raw of p.uris ?? []) {
      const doc = this.document(raw);
      if (!doc || !doc.isDirty) {
        res.saved.push(raw);
      } else if (this.agentVersions.get(doc.uri.toString()) === doc.version) {
        await save(raw, doc);
      } else {
        ask.push({ raw, doc });
      }
    }
    if (ask.length > 0) {
      const names = ask.map((a) => displayText(vscode.workspace.asRelativePath(a.doc.uri), "line", 200)).join(", ");
      const one = ask.length === 1;
      const pick = await vscode.window.showWarningMessage(
        `${displayText(p.reason ?? "octet is about to run a command that reads the files on disk", "line", 300)}. Save ${names}? ${one ? "It has" : "They have"} changes of yours besides octet's.`,
        { modal: true, detail: "Don't Save keeps them unsaved; the command's approval and result then say it reads what is on disk." },
        "Save",
        "Don't Save",
      );
      for (const a of ask) {
        if (pick === "Save") {
          await save(a.raw, a.doc);
        } else {
          res.declined.push(a.raw);
        }
      }
    }
    return res;
  }

  dispose(): void {
    this.debouncer.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
