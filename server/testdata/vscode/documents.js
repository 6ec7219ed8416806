// A client of `octet lsp` on vscode-jsonrpc for buffer coherence, driven
// by server/vscode_test.go. It keeps a document model as VS Code does
// (UTF-16 positions, versions, incremental didChange, an undo stack),
// opens a.txt, types an unsaved line, prompts (the scripted model edits
// line 1), applies the server's workspace/applyEdit only at the matching
// version, then undoes, redoes and saves. It prints one JSON line.
const cp = require('child_process');
const fs = require('fs');
const rpc = require('vscode-jsonrpc/node');

// offsetOf converts an LSP position (UTF-16, the JS string unit) to an index.
function offsetOf(text, pos) {
  let off = 0;
  for (let l = 0; l < pos.line; l++) {
    const i = text.indexOf('\n', off);
    if (i < 0) return text.length;
    off = i + 1;
  }
  let end = text.indexOf('\n', off);
  if (end < 0) end = text.length;
  return Math.min(off + pos.character, end);
}

(async () => {
  const ws = process.env.OCTET_TEST_WORKSPACE;
  const file = ws + '/a.txt';
  const uri = 'file://' + file;
  const srv = cp.spawn(process.env.OCTET_BIN, ['lsp'], { cwd: '/', stdio: ['pipe', 'pipe', 'inherit'] });
  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(srv.stdout), new rpc.StreamMessageWriter(srv.stdin));
  const doc = { text: fs.readFileSync(file, 'utf8'), version: 1, undo: [], redo: [] };
  const out = { confirms: [], applyEdits: [], errors: [] };

  const change = (changes) => {
    doc.version++;
    conn.sendNotification('textDocument/didChange', { textDocument: { uri, version: doc.version }, contentChanges: changes });
  };
  const setText = (text) => {
    doc.text = text;
    change([{ text }]);
  };
  conn.onRequest('octet/confirmEffect', (p) => {
    out.confirms.push({ tool: p.tool, detail: p.detail });
    return { decision: 'approve', digest: p.digest };
  });
  conn.onRequest('window/workDoneProgress/create', () => null);
  conn.onRequest('workspace/applyEdit', (p) => {
    const dc = p.edit.documentChanges || [];
    out.applyEdits.push({ version: dc[0] && dc[0].textDocument.version, edits: dc[0] && dc[0].edits.length });
    if (dc.length !== 1 || dc[0].textDocument.uri !== uri || dc[0].textDocument.version !== doc.version) {
      return { applied: false, failureReason: 'version mismatch' };
    }
    // Apply from the end so earlier ranges stay valid; report each change.
    const edits = dc[0].edits
      .map((e) => ({ e, start: offsetOf(doc.text, e.range.start), end: offsetOf(doc.text, e.range.end) }))
      .sort((a, b) => b.start - a.start);
    doc.undo.push(doc.text);
    let text = doc.text;
    for (const x of edits) text = text.slice(0, x.start) + x.e.newText + text.slice(x.end);
    doc.text = text;
    change(edits.map((x) => ({ range: x.e.range, text: x.e.newText })));
    return { applied: true };
  });
  conn.onNotification(() => {});
  conn.onError((e) => out.errors.push(String(e)));
  conn.listen();

  await conn.sendRequest('initialize', {
    processId: process.pid,
    rootUri: 'file://' + ws,
    workspaceFolders: [{ uri: 'file://' + ws, name: 'ws' }],
    capabilities: {
      general: { positionEncodings: ['utf-16'] },
      workspace: { applyEdit: true, workspaceEdit: { documentChanges: true } },
      window: { workDoneProgress: true },
      experimental: { octet: { confirmEffect: true, events: true } },
    },
  });
  await conn.sendNotification('initialized', {});
  await conn.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'plaintext', version: 1, text: doc.text } });
  // Type an unsaved line (with an astral character) at the start of line 2.
  const typed = 'typed \u{1F600} here\n';
  doc.undo.push(doc.text);
  const at = { line: 1, character: 0 };
  doc.text = doc.text.slice(0, offsetOf(doc.text, at)) + typed + doc.text.slice(offsetOf(doc.text, at));
  change([{ range: { start: at, end: at }, text: typed }]);

  const s = await conn.sendRequest('octet/session/new', {});
  out.prompt = await conn.sendRequest('octet/prompt', { sessionId: s.sessionId, text: 'edit a.txt' });
  out.afterEdit = doc.text;
  out.diskAfterEdit = fs.readFileSync(file, 'utf8');
  // Undo the agent's edit, then redo it, then save.
  doc.redo.push(doc.text);
  setText(doc.undo.pop());
  out.afterUndo = doc.text;
  setText(doc.redo.pop());
  fs.writeFileSync(file, doc.text);
  await conn.sendNotification('textDocument/didSave', { textDocument: { uri } });
  out.saved = fs.readFileSync(file, 'utf8');
  await conn.sendRequest('shutdown');
  await conn.sendNotification('exit');
  out.exitCode = await new Promise((r) => srv.on('exit', (c) => r(c)));
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  console.log(JSON.stringify({ failed: String((e && e.stack) || e) }));
  process.exit(1);
});
