// Package entry point: activate starts octet and registers its commands.

import * as vscode from "vscode";
import { Octet } from "./controller";

let octet: Octet | undefined;

export async function activate(ctx: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("octet", { log: true });
  ctx.subscriptions.push(output);
  octet = new Octet(ctx, output);
  for (const [name, fn] of Object.entries(octet.commands())) {
    ctx.subscriptions.push(vscode.commands.registerCommand(name, fn as (...args: unknown[]) => unknown));
  }
  await octet.start();
}

export async function deactivate(): Promise<void> {
  await octet?.dispose();
  octet = undefined;
}
