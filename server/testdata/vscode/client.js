// A client of `octet lsp` on vscode-jsonrpc (the JSON-RPC layer of VS
// Code's vscode-languageclient), driven by server/vscode_test.go. It
// initializes with VS Code-like capabilities, runs a prompt whose edit it
// approves, cancels a second prompt through a CancellationToken
// ($/cancelRequest), resumes, shuts down, and prints one JSON line with
// what it saw.
const cp = require('child_process');
const rpc = require('vscode-jsonrpc/node');

(async () => {
  const ws = process.env.OCTET_TEST_WORKSPACE;
  const srv = cp.spawn(process.env.OCTET_BIN, ['lsp'], { cwd: '/', stdio: ['pipe', 'pipe', 'inherit'] });
  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(srv.stdout), new rpc.StreamMessageWriter(srv.stdin));
  const out = { confirms: [], progress: [], events: [], unhandled: [], errors: [] };
  conn.onRequest('octet/confirmEffect', (p) => {
    out.confirms.push({ tool: p.tool, title: p.title, diff: p.diff, digestLen: p.digest.length });
    return { decision: 'approve', digest: p.digest };
  });
  conn.onRequest('window/workDoneProgress/create', () => null);
  conn.onNotification('octet/event', (p) => out.events.push({ seq: p.seq, runId: p.runId, kind: p.event.kind }));
  conn.onNotification('$/progress', (p) => out.progress.push(p.value.kind));
  conn.onUnhandledNotification((n) => out.unhandled.push(n.method));
  conn.onError((e) => out.errors.push(String(e)));
  conn.listen();

  const init = await conn.sendRequest('initialize', {
    processId: process.pid,
    clientInfo: { name: 'vscode-jsonrpc-test' },
    rootUri: 'file://' + ws,
    workspaceFolders: [{ uri: 'file://' + ws, name: 'ws' }],
    capabilities: {
      window: { workDoneProgress: true, showMessage: { messageActionItem: { additionalPropertiesSupport: true } } },
      workspace: { executeCommand: { dynamicRegistration: true } },
      experimental: { octet: { confirmEffect: true, events: true, recoveredOutput: true } },
    },
    trace: 'off',
  });
  out.version = init.capabilities.experimental.octet.version;
  out.commands = init.capabilities.executeCommandProvider.commands;
  await conn.sendNotification('initialized', {});
  const s = await conn.sendRequest('octet/session/new', {});
  out.first = await conn.sendRequest('octet/prompt', { sessionId: s.sessionId, text: 'change hello' });

  const cts = new rpc.CancellationTokenSource();
  const second = conn.sendRequest('octet/prompt', { sessionId: s.sessionId, text: 'go on' }, cts.token);
  const started = () => out.events.some((e) => e.kind === 'output_delta' && e.runId !== out.first.runId);
  while (!started()) await new Promise((r) => setTimeout(r, 10));
  cts.cancel();
  try {
    out.second = await second;
  } catch (e) {
    out.second = { rejected: e.message, code: e.code };
  }
  const res = await conn.sendRequest('octet/session/resume', { sessionId: s.sessionId, afterSeq: 0 });
  out.resume = { events: res.events.length, lastSeq: res.lastSeq, transcript: res.transcript.length };
  await conn.sendRequest('shutdown');
  await conn.sendNotification('exit');
  out.exitCode = await new Promise((r) => srv.on('exit', (c) => r(c)));
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  console.log(JSON.stringify({ failed: String(e && e.stack || e) }));
  process.exit(1);
});
