// Starting `octet lsp` with vscode-languageclient.

import * as vscode from "vscode";
import {
  LanguageClient,
  type ClientCapabilities,
  type FeatureState,
  type LanguageClientOptions,
  type Middleware,
  type ServerOptions,
  type StaticFeature,
} from "vscode-languageclient/node";
import { resolveBinary } from "./binary";
import { clientCapabilities } from "./protocol";

/** OctetFeature advertises octet's client capabilities (registered last, it has the last word). */
class OctetFeature implements StaticFeature {
  fillClientCapabilities(caps: ClientCapabilities): void {
    clientCapabilities(caps);
  }
  initialize(): void {}
  getState(): FeatureState {
    return { kind: "static" };
  }
  clear(): void {}
}

/**
 * createClient returns a client for `octet lsp` (with middleware), or the
 * reason it cannot start.
 */
export function createClient(output: vscode.LogOutputChannel, middleware: Middleware = {}): { client: LanguageClient } | { error: string } {
  const cfg = vscode.workspace.getConfiguration("octet");
  const bin = resolveBinary(cfg.get<string>("path", ""), process.env.PATH);
  if ("error" in bin) {
    return bin;
  }
  const args = ["lsp", ...cfg.get<string[]>("args", [])];
  output.info(`starting ${bin.path} ${args.join(" ")}`);
  const server: ServerOptions = { command: bin.path, args, options: { env: process.env } };
  const options: LanguageClientOptions = {
    // Every file of the workspace is synced, so octet reads unsaved
    // buffers and edits open documents through workspace/applyEdit.
    documentSelector: [{ scheme: "file" }],
    outputChannel: output,
    initializationOptions: { logLevel: cfg.get<string>("logLevel", "info") },
    // octet's approvals and failures are shown by the extension.
    connectionOptions: { maxRestartCount: 3 },
    middleware,
  };
  const client = new LanguageClient("octet", "octet", server, options);
  client.registerFeature(new OctetFeature());
  return { client };
}
