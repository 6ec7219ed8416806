// The composer's attachments and how they get there: images pasted or
// dropped into the chat, @-mentions of workspace files and symbols
// (completed from the workspace and its language servers), and the
// editor's selection (octet: Add Selection to Chat). Chips show what waits
// for the next prompt, which takes it (attachments.ts).

import * as path from "node:path";
import * as vscode from "vscode";
import { Attachments, lines, type PromptRef, rankFiles, refLabel } from "./attachments";
import type { ChatView, MentionItem } from "./chatView";
import { displayText } from "./text";

/** How many files and symbols an @-mention offers. */
const mentionFiles = 30;
const mentionSymbols = 20;
/** How long the workspace's file list is reused between mentions. */
const filesFresh = 10_000;

/** Composer holds what waits for the next prompt. */
export class Composer {
  private pending = new Attachments();
  /** candidates are the last mention completions, by key. */
  private candidates = new Map<string, { ref: PromptRef; rel: string; symbol?: string }>();
  private files: { at: number; paths: string[] } | undefined;

  constructor(
    private readonly view: ChatView,
    private readonly root: () => string | undefined,
  ) {}

  private show(): void {
    this.view.setAttachments(this.pending.chips());
  }

  private warn(text: string): void {
    if (text !== "") {
      void vscode.window.showWarningMessage(`octet: ${text}`);
    }
  }

  /** take returns what waits for the prompt being sent, and empties the composer. */
  take(): Attachments {
    const a = this.pending.take();
    this.show();
    return a;
  }

  /** remove removes the i-th chip. */
  remove(i: number): void {
    this.pending.remove(i);
    this.show();
  }

  /** addImage attaches an image pasted or dropped into the chat. */
  addImage(name: string, bytes: Uint8Array): void {
    this.warn(this.pending.addImage(name, bytes));
    this.show();
  }

  /** addImageUri attaches an image file dropped from VS Code's explorer. */
  async addImageUri(raw: string): Promise<void> {
    try {
      const uri = vscode.Uri.parse(raw, true);
      const stat = await vscode.workspace.fs.stat(uri);
      if (stat.size > 20 * 1024 * 1024) {
        this.warn(`${path.basename(uri.path)} is over 20 MiB; attach a smaller image.`);
        return;
      }
      this.addImage(path.basename(uri.path), await vscode.workspace.fs.readFile(uri));
    } catch (e) {
      this.warn(`cannot attach ${displayText(raw, "line", 200)}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** rel is a file's workspace-relative path ("/"-separated), or undefined outside it. */
  private rel(uri: vscode.Uri): string | undefined {
    const root = this.root();
    if (!root || uri.scheme !== "file") {
      return undefined;
    }
    const r = path.relative(root, uri.fsPath);
    return r === "" || r.startsWith("..") || path.isAbsolute(r) ? undefined : r.split(path.sep).join("/");
  }

  private add(ref: PromptRef): void {
    this.warn(this.pending.addRef(ref));
    this.show();
  }

  /**
   * addSelection attaches the editor's selections (its whole file when
   * nothing is selected) and shows the chat.
   */
  async addSelection(editor = vscode.window.activeTextEditor): Promise<void> {
    if (!editor) {
      this.warn("open a file and select what octet should see.");
      return;
    }
    const doc = editor.document;
    const rel = this.rel(doc.uri);
    if (rel === undefined) {
      this.warn(`${displayText(doc.uri.fsPath, "line", 200)} is not a file of the workspace; octet only reads the workspace.`);
      return;
    }
    for (const sel of editor.selections) {
      if (sel.isEmpty) {
        this.add({ uri: doc.uri.toString(), label: rel });
        continue;
      }
      const range = lines(
        { start: { line: sel.start.line, character: sel.start.character }, end: { line: sel.end.line, character: sel.end.character } },
        (l) => doc.lineAt(l).text.length,
      );
      this.add({ uri: doc.uri.toString(), range, label: refLabel(rel, range) });
    }
    await this.view.focusPrompt();
  }

  /** workspaceFiles lists the workspace's files (relative), reused for a few seconds. */
  private async workspaceFiles(): Promise<string[]> {
    if (this.files && Date.now() - this.files.at < filesFresh) {
      return this.files.paths;
    }
    const uris = await vscode.workspace.findFiles("**/*", undefined, 20_000);
    const paths = uris.flatMap((u) => this.rel(u) ?? []);
    this.files = { at: Date.now(), paths };
    return paths;
  }

  /**
   * mentions answers the webview's @-mention query id: the files the
   * query names, then the workspace symbols the language servers find
   * for it.
   */
  async mentions(id: number, query: string): Promise<void> {
    this.candidates.clear();
    const items: MentionItem[] = [];
    const root = this.root();
    if (root) {
      for (const rel of rankFiles(await this.workspaceFiles(), query, mentionFiles)) {
        const key = `f${this.candidates.size}`;
        this.candidates.set(key, { ref: { uri: vscode.Uri.file(path.join(root, rel)).toString(), label: rel }, rel });
        items.push({ key, label: path.posix.basename(rel), detail: rel, kind: "file" });
      }
    }
    if (query.length >= 2) {
      const syms = (await vscode.commands.executeCommand<vscode.SymbolInformation[] | undefined>("vscode.executeWorkspaceSymbolProvider", query)) ?? [];
      for (const s of syms) {
        const rel = this.rel(s.location.uri);
        if (rel === undefined) {
          continue;
        }
        const key = `s${this.candidates.size}`;
        const r = s.location.range;
        const range = { start: { line: r.start.line, character: r.start.character }, end: { line: r.end.line, character: r.end.character } };
        this.candidates.set(key, { ref: { uri: s.location.uri.toString(), range, label: refLabel(rel, range, s.name) }, rel, symbol: s.name });
        items.push({ key, label: s.name, detail: `${vscode.SymbolKind[s.kind].toLowerCase()} · ${rel}:${r.start.line + 1}`, kind: "symbol" });
        if (items.length >= mentionFiles + mentionSymbols) {
          break;
        }
      }
    }
    this.view.showMentions(
      id,
      items.map((i) => ({ ...i, label: displayText(i.label, "line", 120), detail: displayText(i.detail, "line", 200) })),
    );
  }

  /** pickMention attaches the mention completion key names (a symbol: its whole declaration). */
  async pickMention(key: string): Promise<void> {
    const c = this.candidates.get(key);
    if (c?.symbol !== undefined && c.ref.range) {
      const range = await declarationRange(vscode.Uri.parse(c.ref.uri), c.ref.range);
      this.add({ uri: c.ref.uri, range, label: refLabel(c.rel, range, c.symbol) });
    } else if (c) {
      this.add(c.ref);
    }
  }
}

type LspRange = NonNullable<PromptRef["range"]>;

/**
 * declarationRange widens a workspace symbol's location (often its name
 * only) to its whole declaration: the range of the innermost document
 * symbol whose name range holds it.
 */
async function declarationRange(uri: vscode.Uri, r: LspRange): Promise<LspRange> {
  const at = new vscode.Position(r.start.line, r.start.character);
  let best: vscode.Range | undefined;
  const visit = (syms: vscode.DocumentSymbol[]) => {
    for (const s of syms) {
      if (s.range.contains(at)) {
        if (s.selectionRange.contains(at) || s.range.start.isEqual(at)) {
          best = s.range;
        }
        visit(s.children);
      }
    }
  };
  try {
    const syms = await vscode.commands.executeCommand<(vscode.DocumentSymbol | vscode.SymbolInformation)[] | undefined>("vscode.executeDocumentSymbolProvider", uri);
    visit((syms ?? []).filter((s): s is vscode.DocumentSymbol => "children" in s));
  } catch {
    // No document symbols: the location is what there is.
  }
  return best
    ? { start: { line: best.start.line, character: best.start.character }, end: { line: best.end.line, character: best.end.character } }
    : r;
}
