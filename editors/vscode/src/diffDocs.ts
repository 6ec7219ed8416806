// Virtual documents for VS Code's diff editor: the current and the proposed
// content of an approval, and the before side of a run's change.

import * as vscode from "vscode";
import { applyDiff, reverseDiff } from "./diff";
import type { FileChange } from "./protocol";
import { displayText } from "./text";

/** The URI scheme of octet's virtual documents. */
export const scheme = "octet-diff";

/**
 * The URI scheme of an approval's proposed content, the right side of its
 * diff editor: the editor's title offers Approve and Deny for it
 * (package.json's editor/title menu).
 */
export const proposedScheme = "octet-proposed";

/**
 * octetEditor is how octet opens its editors: pinned, never in the preview
 * tab. A preview editor replaces the group's preview tab, closing its
 * document (textDocument/didClose), and an approval shown against that
 * open buffer is then refused when approved ("file changed after the
 * change was shown for approval").
 */
export const octetEditor = { preview: false } as const;

/** DiffDocuments keeps the contents of the virtual documents it opened. */
export class DiffDocuments implements vscode.TextDocumentContentProvider {
  private docs = new Map<string, string>();
  private n = 0;
  private changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.docs.get(uri.query) ?? "";
  }

  /**
   * add stores content under a new URI whose path ends like path (for
   * highlighting), of scheme (octet-diff, or octet-proposed for an
   * approval's proposed content).
   */
  add(path: string, side: string, content: string, uriScheme: string = scheme): vscode.Uri {
    const key = `${side}-${++this.n}`;
    this.docs.set(key, content);
    if (this.docs.size > 200) {
      const first = this.docs.keys().next().value;
      if (first !== undefined) {
        this.docs.delete(first);
      }
    }
    return vscode.Uri.from({ scheme: uriScheme, path: "/" + path.replace(/^\/+/, ""), query: key });
  }

  dispose(): void {
    this.changed.dispose();
  }
}

/** currentContent is a file's text: its open document's, else the disk's ("" when absent). */
export async function currentContent(uri: vscode.Uri): Promise<{ text: string; exists: boolean }> {
  const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
  if (doc) {
    return { text: doc.getText(), exists: true };
  }
  try {
    const bytes = await vscode.workspace.fs.readFile(uri);
    return { text: new TextDecoder().decode(bytes), exists: true };
  } catch {
    return { text: "", exists: false };
  }
}

/** showUnifiedDiff opens a unified diff as a read-only diff-language document. */
export async function showUnifiedDiff(diff: string): Promise<void> {
  const doc = await vscode.workspace.openTextDocument({ content: diff, language: "diff" });
  await vscode.window.showTextDocument(doc, octetEditor);
}

/**
 * showProposed opens vscode.diff between a file's current content and the
 * content a diff would make of it; when the diff does not apply (the file
 * changed), the unified diff itself.
 */
export async function showProposed(
  docs: DiffDocuments,
  file: vscode.Uri,
  relPath: string,
  diff: string,
  title: string,
): Promise<vscode.Uri | undefined> {
  const cur = await currentContent(file);
  const proposed = applyDiff(cur.text, diff);
  if (proposed === undefined) {
    await showUnifiedDiff(diff);
    return undefined;
  }
  const left = docs.add(relPath, "current", cur.text);
  const right = docs.add(relPath, "proposed", proposed, proposedScheme);
  const label = `${displayText(relPath, "line", 200)}: current ↔ proposed (${displayText(title, "line", 120)})`;
  await vscode.commands.executeCommand("vscode.diff", left, right, label, octetEditor);
  return right;
}

/**
 * showChange opens vscode.diff for a change octet made: its before side
 * (the diff taken back from the file as it is now) against the file.
 */
export async function showChange(docs: DiffDocuments, file: vscode.Uri, change: FileChange): Promise<void> {
  if (change.diffOmitted) {
    void vscode.window.showInformationMessage(displayText(`octet: ${change.path}: ${change.diff}`, "message", 600));
    return;
  }
  const cur = await currentContent(file);
  const before = applyDiff(cur.text, reverseDiff(change.diff));
  if (before === undefined) {
    await showUnifiedDiff(change.diff);
    return;
  }
  const left = docs.add(change.path, "before", before);
  const right = cur.exists ? file : docs.add(change.path, "after", "");
  await vscode.commands.executeCommand("vscode.diff", left, right, `${displayText(change.path, "line", 200)}: octet's change`, octetEditor);
}
