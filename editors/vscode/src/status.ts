// Status bar items: the session's state, model, cost and context fill,
// and the policy mode (always visible).

import * as vscode from "vscode";
import type { ChatModel } from "./chatModel";
import { statusText, statusTooltip } from "./format";
import { modeOf } from "./policy";
import { displayText } from "./text";

/** Status owns octet's two status bar items. */
export class Status implements vscode.Disposable {
  private main = vscode.window.createStatusBarItem("octet.status", vscode.StatusBarAlignment.Left, 50);
  private policy = vscode.window.createStatusBarItem("octet.policy", vscode.StatusBarAlignment.Left, 49);

  constructor() {
    this.main.name = "octet";
    this.main.command = "octet.chat.focus";
    this.policy.name = "octet policy mode";
    this.policy.command = "octet.policyMode";
    this.main.show();
    this.policy.show();
  }

  /**
   * update shows the model's state; policy is the session's effect policy
   * and sandbox the OS sandbox its commands run in (sandboxLabel), shown
   * next to the mode.
   */
  update(model: ChatModel, modelName: string, policy: string | undefined, sandbox?: string): void {
    const u = model.usage();
    this.main.text = statusText(model.state, modelName, u);
    this.main.tooltip = statusTooltip(model.state, modelName, u);
    const mode = modeOf(policy);
    const box = sandbox ? ` · ${sandbox}` : "";
    this.policy.text = mode ? `$(${mode.mode === "full-access" ? "warning" : "shield"}) ${mode.label}${box}` : "$(shield) policy: ?";
    this.policy.tooltip = mode
      ? `octet policy: ${mode.label} — ${mode.description}${sandbox ? `; commands run with ${sandbox}` : ""}. Click to change.`
      : "octet policy";
    this.policy.backgroundColor = mode?.mode === "full-access" ? new vscode.ThemeColor("statusBarItem.warningBackground") : undefined;
  }

  /** problem shows that octet is not running. */
  problem(text: string): void {
    this.main.text = "$(error) octet: not running";
    this.main.tooltip = displayText(text, "block", 2000);
  }

  dispose(): void {
    this.main.dispose();
    this.policy.dispose();
  }
}
