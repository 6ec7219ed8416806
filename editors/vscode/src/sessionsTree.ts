// The Sessions tree view: the workspace's sessions, newest first.

import * as vscode from "vscode";
import { relativeTime } from "./format";
import type { SessionInfo } from "./protocol";
import { displayText } from "./text";

/** sessionLabel is a session's title on one line ("(untitled)" without one). */
function sessionLabel(info: SessionInfo): string {
  return info.title ? displayText(info.title, "line", 200) : "(untitled)";
}

/** A session in the tree. */
export class SessionNode extends vscode.TreeItem {
  constructor(
    readonly info: SessionInfo,
    current: boolean,
  ) {
    super(sessionLabel(info), vscode.TreeItemCollapsibleState.None);
    this.id = info.sessionId;
    this.contextValue = "session";
    this.description = (current ? "● " : "") + relativeTime(info.updatedAt);
    const tip = `${info.title ?? ""}\n${info.sessionId}\n${info.cwd ?? ""}${info.usageUncertain ? "\nusage partly unknown" : ""}`;
    this.tooltip = displayText(tip, "block", 2000);
    this.iconPath = new vscode.ThemeIcon(current ? "comment-discussion" : "comment");
    this.command = { command: "octet.resumeSession", title: "Resume Session", arguments: [this] };
  }
}

/** SessionsTree lists sessions through a loader (octet/session/list). */
export class SessionsTree implements vscode.TreeDataProvider<SessionNode> {
  private changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;

  constructor(
    private readonly load: () => Promise<SessionInfo[]>,
    private readonly current: () => string | undefined,
  ) {}

  refresh(): void {
    this.changed.fire();
  }

  getTreeItem(n: SessionNode): vscode.TreeItem {
    return n;
  }

  async getChildren(): Promise<SessionNode[]> {
    try {
      const cur = this.current();
      return (await this.load()).map((s) => new SessionNode(s, s.sessionId === cur));
    } catch {
      return [];
    }
  }
}
