// A client of `octet lsp` on vscode-jsonrpc, driven by
// server/vscode_approvals_test.go: it approves an edit for the session
// ("approve_for_session"), sees the next edit of the same file admitted by
// the standing rule without being asked, denies a bash call with a reason,
// lists and revokes the rule, is asked again, and tries the session
// policy methods. It prints one JSON line with what it saw.
const cp = require('child_process');
const rpc = require('vscode-jsonrpc/node');

(async () => {
  const ws = process.env.OCTET_TEST_WORKSPACE;
  const srv = cp.spawn(process.env.OCTET_BIN, ['lsp'], { cwd: '/', stdio: ['pipe', 'pipe', 'inherit'] });
  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(srv.stdout), new rpc.StreamMessageWriter(srv.stdin));
  const out = { confirms: [], decisions: [], errors: [] };
  conn.onRequest('octet/confirmEffect', (p) => {
    out.confirms.push({ callId: p.callId, tool: p.tool, ruleScope: p.ruleScope || null });
    if (p.callId === 'call_1') return { decision: 'approve_for_session', digest: p.digest };
    if (p.tool === 'bash') return { decision: 'deny', digest: p.digest, reason: 'use make instead' };
    return { decision: 'approve', digest: p.digest };
  });
  conn.onRequest('window/workDoneProgress/create', () => null);
  conn.onNotification('octet/event', (p) => {
    const e = p.event;
    if (e.kind === 'tool_policy_decision') out.decisions.push({ callId: e.callId, decision: e.decision, reason: e.reason, ruleId: e.ruleId || null });
  });
  conn.onError((e) => out.errors.push(String(e)));
  conn.listen();

  await conn.sendRequest('initialize', {
    processId: process.pid,
    rootUri: 'file://' + ws,
    workspaceFolders: [{ uri: 'file://' + ws, name: 'ws' }],
    capabilities: { window: { workDoneProgress: true }, experimental: { octet: { confirmEffect: true, events: true } } },
  });
  await conn.sendNotification('initialized', {});
  const s = await conn.sendRequest('octet/session/new', {});
  out.first = await conn.sendRequest('octet/prompt', { sessionId: s.sessionId, text: 'edit twice, then run' });
  out.listed = await conn.sendRequest('octet/approvals/list', { sessionId: s.sessionId });
  const ruleId = out.listed.rules.length ? out.listed.rules[0].ruleId : 'none';
  out.revoked = await conn.sendRequest('octet/approvals/revoke', { sessionId: s.sessionId, ruleId });
  out.afterRevoke = await conn.sendRequest('octet/approvals/list', { sessionId: s.sessionId });
  out.second = await conn.sendRequest('octet/prompt', { sessionId: s.sessionId, text: 'edit again' });
  try {
    await conn.sendRequest('octet/session/setPolicy', { sessionId: s.sessionId, effectPolicy: 'unsafe_host' });
    out.looser = { code: 0 };
  } catch (e) {
    out.looser = { code: e.code, message: e.message };
  }
  out.stricter = await conn.sendRequest('octet/session/setPolicy', { sessionId: s.sessionId, effectPolicy: 'controlled_bash_approval' });
  const res = await conn.sendRequest('octet/session/resume', { sessionId: s.sessionId });
  out.results = res.transcript.filter((e) => e.result).map((e) => ({ callId: e.result.callId, text: e.result.text }));
  await conn.sendRequest('shutdown');
  await conn.sendNotification('exit');
  out.exitCode = await new Promise((r) => srv.on('exit', (c) => r(c)));
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  console.log(JSON.stringify({ failed: String(e && e.stack || e) }));
  process.exit(1);
});
