// A client of `octet acp` on the Agent Client Protocol's TypeScript SDK
// (@agentclientprotocol/sdk), driven by acp/realclient_test.go. The
// scenario is the first argument; the script prints one JSON line with
// what it saw ({"failed": ...} when something went wrong).
import { spawn } from 'node:child_process';
import { Readable, Transform, Writable } from 'node:stream';
// A client that advertises subagents (second argument "subagents") uses
// the SDK's unstable v1 surface, which has them.
const acp = process.argv[3] === 'subagents'
  ? await import('@agentclientprotocol/sdk/unstable')
  : await import('@agentclientprotocol/sdk');

const ws = process.env.OCTET_TEST_WORKSPACE;
const scenario = process.argv[2];
// Updates on another session than out.session (a child's) carry
// onSession.

// wires are every connection's lines, both ways, in order
// ({dir: "client"|"octet", line}); acp/realclient_test.go validates what
// octet sent against the ACP schema.
const wires = [];

// tap passes a byte stream through, recording each line in wire.
function tap(wire, dir) {
  let rest = '';
  return new Transform({
    transform(chunk, _enc, cb) {
      const lines = (rest + chunk.toString('utf8')).split('\n');
      rest = lines.pop();
      for (const line of lines) if (line.trim()) wire.push({ dir, line });
      cb(null, chunk);
    },
  });
}

// run starts `octet acp`, connects a client with the given file-system
// capabilities and calls op(ctx, out); it returns out with octet's exit.
// handlers.env is added to octet's environment.
async function run(fs, handlers, op) {
  const srv = spawn(process.env.OCTET_BIN, ['acp'], { cwd: '/', stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ...(handlers.env || {}) } });
  const exited = new Promise((r) => srv.on('exit', (c) => r(c)));
  const wire = [];
  wires.push(wire);
  const toOctet = tap(wire, 'client');
  toOctet.pipe(srv.stdin);
  const stream = acp.ndJsonStream(Writable.toWeb(toOctet), Readable.toWeb(srv.stdout.pipe(tap(wire, 'octet'))));
  const out = { updates: [], ext: [], permissions: [], reads: [], writes: [] };
  const app = acp.client({ name: 'octet-test' });
  app.onNotification(acp.methods.client.session.update, ({ params }) => {
    if (params.update.sessionUpdate === 'available_commands_update') commandsSeen.set(params.sessionId, (commandsSeen.get(params.sessionId) || 0) + 1);
    out.updates.push(params.sessionId === out.session?.sessionId || !out.session ? params.update : { ...params.update, onSession: params.sessionId });
    handlers.update?.(params.update, out);
  });
  for (const m of ['_octet/usage', '_octet/recoveredOutput', '_octet/providerRetry', '_octet/runFinished']) {
    app.onNotification(m, (p) => p, ({ params }) => { out.ext.push({ method: m, params }); });
  }
  app.onRequest(acp.methods.client.session.requestPermission, (cx) => {
    const p = cx.params;
    out.permissions.push({ toolCallId: p.toolCall.toolCallId, title: p.toolCall.title, kind: p.toolCall.kind, content: p.toolCall.content || [], options: p.options.map((o) => o.kind) });
    return handlers.permission(p, out, cx);
  });
  app.onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
    out.reads.push(params.path);
    if (!(params.path in handlers.buffers)) throw acp.RequestError.resourceNotFound(params.path);
    return { content: handlers.buffers[params.path] };
  });
  app.onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
    out.writes.push({ path: params.path, content: params.content });
    handlers.buffers[params.path] = params.content;
    return {};
  });
  await app.connectWith(stream, async (ctx) => {
    out.init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: fs, writeTextFile: fs }, ...(handlers.caps || {}) },
    });
    await op(ctx, out);
  });
  toOctet.end();
  out.exitCode = await exited;
  return out;
}

const select = (kind) => (p) => ({ outcome: { outcome: 'selected', optionId: p.options.find((o) => o.kind === kind).optionId } });
// Octet sends a session's available_commands_update once session/new,
// load or resume has answered (a client knows a new session only from
// that answer): commandsSeen counts them by session, and waitCommands
// waits for the n-th of sessionId.
const commandsSeen = new Map();
const waitCommands = async (sessionId, n) => {
  for (let i = 0; i < 2000 && (commandsSeen.get(sessionId) || 0) < n; i++) await new Promise((r) => setTimeout(r, 5));
};
const newSession = async (ctx) => {
  const s = await ctx.request(acp.methods.agent.session.new, { cwd: ws, mcpServers: [] });
  await waitCommands(s.sessionId, 1);
  return s;
};
const prompt = (ctx, sessionId, text, extra = []) =>
  ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text }, ...extra] });

// call sends a request and returns its result, or {error: {code,
// message}} when octet answered an error.
const call = async (ctx, method, params) => {
  try {
    return await ctx.request(method, params);
  } catch (e) {
    return { error: { code: e.code, message: e.message } };
  }
};
// mark returns the number of updates so far (updates after it are
// since(out, mark)).
const since = (out, mark) => out.updates.slice(mark).map((u) => u.sessionUpdate);

const scenarios = {
  // A prompt with a resource link and an embedded resource; the answer
  // streams as agent_message_chunk / agent_thought_chunk.
  async stream() {
    return run(false, { permission: select('reject_once') }, async (ctx, out) => {
      const s = await newSession(ctx);
      out.session = s;
      out.answer = await prompt(ctx, s.sessionId, 'hello', [
        { type: 'resource_link', uri: 'file://' + ws + '/notes.txt', name: 'notes.txt' },
        { type: 'resource', resource: { uri: 'file:///elsewhere/spec.md', text: 'EMBEDDED SPEC', mimeType: 'text/markdown' } },
      ]);
      try {
        await ctx.request('session/prompt', { sessionId: 'nope', prompt: [{ type: 'text', text: 'x' }] });
      } catch (e) {
        out.unknownSession = { code: e.code, message: e.message };
      }
    });
  },
  // allow_always for the first edit of a.txt; the second edit of a.txt is
  // admitted by the standing rule; an edit of b.txt is asked and
  // rejected once.
  async approvals() {
    const permission = (p) => select(p.toolCall.toolCallId === 'call_1' ? 'allow_always' : 'reject_once')(p);
    return run(false, { permission }, async (ctx, out) => {
      const s = await newSession(ctx);
      out.answer = await prompt(ctx, s.sessionId, 'edit things');
    });
  },
  // session/cancel mid-stream (after the first chunk), and while a
  // permission request is pending.
  async cancel() {
    let sessionId;
    let sawChunk;
    const chunk = new Promise((r) => (sawChunk = r));
    const handlers = {
      update: (u) => { if (u.sessionUpdate === 'agent_message_chunk') sawChunk(); },
      permission: async (p, out, cx) => {
        await cx.agent.notify(acp.methods.agent.session.cancel, { sessionId });
        // The client answers a cancelled prompt's request as cancelled
        // only after the prompt's answer: octet must not wait for it.
        await out.secondAnswered;
        return { outcome: { outcome: 'cancelled' } };
      },
    };
    return run(false, handlers, async (ctx, out) => {
      sessionId = (await newSession(ctx)).sessionId;
      const first = prompt(ctx, sessionId, 'talk for a long time');
      await chunk;
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      out.first = await first;
      let answered;
      out.secondAnswered = new Promise((r) => (answered = r));
      out.second = await prompt(ctx, sessionId, 'run a command');
      answered();
      delete out.secondAnswered;
    });
  },
  // A session answered in one process, loaded in another.
  async load() {
    const first = await run(false, { permission: select('reject_once') }, async (ctx, out) => {
      const s = await newSession(ctx);
      out.sessionId = s.sessionId;
      out.answer = await prompt(ctx, s.sessionId, 'remember this');
    });
    const second = await run(false, { permission: select('reject_once') }, async (ctx, out) => {
      out.loaded = await ctx.request(acp.methods.agent.session.load, { sessionId: first.sessionId, cwd: ws, mcpServers: [] });
      out.replayed = out.updates.length;
      out.answer = await prompt(ctx, first.sessionId, 'and now?');
      out.mode = await ctx.request(acp.methods.agent.session.setMode, { sessionId: first.sessionId, modeId: 'controlled_bash_approval' });
      try {
        await ctx.request(acp.methods.agent.session.setMode, { sessionId: first.sessionId, modeId: 'unsafe_host' });
        out.looser = { code: 0 };
      } catch (e) {
        out.looser = { code: e.code, message: e.message };
      }
    });
    return { first, second };
  },
  // The client owns the files: a.txt's buffer (unsaved text) is read
  // through fs/read_text_file and the approved edit is written through
  // fs/write_text_file, never to disk.
  async fswrite() {
    const buffers = { [ws + '/a.txt']: 'hello unsaved\n' };
    return run(true, { permission: select('allow_once'), buffers }, async (ctx, out) => {
      const s = await newSession(ctx);
      out.answer = await prompt(ctx, s.sessionId, 'fix a.txt');
      out.buffers = buffers;
    });
  },
  // Calls whose permission requests must show their whole effect:
  // call_1 is allowed once, every other call rejected once.
  async shown() {
    const permission = (p) => select(p.toolCall.toolCallId === 'call_1' ? 'allow_once' : 'reject_once')(p);
    return run(false, { permission }, async (ctx, out) => {
      const s = await newSession(ctx);
      out.answer = await prompt(ctx, s.sessionId, 'show me');
    });
  },
  // Every stable session method: new (configOptions), set_config_option,
  // set_mode, prompt (title, usage), list (cwd filter), close, resume
  // (no replay), load of a session open here (replay), delete.
  async lifecycle() {
    const other = process.env.OCTET_TEST_OTHER_WORKSPACE;
    return run(false, { permission: select('reject_once') }, async (ctx, out) => {
      const m = out.updates.length;
      out.a = await newSession(ctx);
      out.session = out.a;
      out.afterNew = since(out, m);
      const a = out.a.sessionId;
      out.setMode = await call(ctx, acp.methods.agent.session.setConfigOption, { sessionId: a, configId: 'mode', value: 'controlled_bash_approval' });
      out.setThought = await call(ctx, acp.methods.agent.session.setConfigOption, { sessionId: a, configId: 'thought_level', value: 'high' });
      out.setModel = await call(ctx, acp.methods.agent.session.setConfigOption, { sessionId: a, configId: 'model', value: 'gpt-5.1-codex-mini' });
      out.badModel = await call(ctx, acp.methods.agent.session.setConfigOption, { sessionId: a, configId: 'model', value: 'no-such-model' });
      const m2 = out.updates.length;
      out.legacyMode = await call(ctx, acp.methods.agent.session.setMode, { sessionId: a, modeId: 'controlled' });
      out.afterSetMode = out.updates.slice(m2);
      const m3 = out.updates.length;
      out.answer = await prompt(ctx, a, 'First prompt of A\nwith a second line');
      out.afterPrompt = out.updates.slice(m3).filter((u) => u.sessionUpdate !== 'agent_message_chunk');
      out.b = await ctx.request(acp.methods.agent.session.new, { cwd: other, mcpServers: [] });
      out.listAll = await call(ctx, acp.methods.agent.session.list, {});
      out.listWs = await call(ctx, acp.methods.agent.session.list, { cwd: ws });
      out.close = await call(ctx, acp.methods.agent.session.close, { sessionId: a });
      out.promptClosed = await call(ctx, acp.methods.agent.session.prompt, { sessionId: a, prompt: [{ type: 'text', text: 'x' }] });
      const m4 = out.updates.length;
      const seen = commandsSeen.get(a) || 0;
      out.resume = await call(ctx, acp.methods.agent.session.resume, { sessionId: a, cwd: ws, mcpServers: [] });
      await waitCommands(a, seen + 1);
      out.afterResume = since(out, m4);
      out.again = await prompt(ctx, a, 'after resume');
      const m5 = out.updates.length;
      out.load = await call(ctx, acp.methods.agent.session.load, { sessionId: a, cwd: ws, mcpServers: [] });
      out.afterLoad = out.updates.slice(m5).filter((u) => u.sessionUpdate.endsWith('_chunk')).map((u) => u.sessionUpdate + ':' + u.content.text);
      out.delete = await call(ctx, acp.methods.agent.session.delete, { sessionId: out.b.sessionId });
      out.listAfterDelete = await call(ctx, acp.methods.agent.session.list, {});
      out.deleteAgain = await call(ctx, acp.methods.agent.session.delete, { sessionId: out.b.sessionId });
    });
  },
  // The slash commands: /diff after an edit, /rewind of it, /compact,
  // /review (a prompt of octet's).
  async commands() {
    return run(false, { permission: select('allow_once'), caps: { session: { compaction: {} } } }, async (ctx, out) => {
      out.session = await newSession(ctx);
      const s = out.session.sessionId;
      out.commands = out.updates.find((u) => u.sessionUpdate === 'available_commands_update')?.availableCommands;
      out.edit = await prompt(ctx, s, 'edit a.txt');
      const text = async (cmd) => {
        const m = out.updates.length;
        const answer = await prompt(ctx, s, cmd);
        const said = out.updates.slice(m).filter((u) => u.sessionUpdate === 'agent_message_chunk').map((u) => u.content.text).join('');
        return { answer, said };
      };
      out.diff = await text('/diff');
      out.rewind = await text('/rewind');
      out.diffAfter = await text('/diff');
      out.review = await text('/review look at the tests');
      const m = out.updates.length;
      out.compact = await text('/compact');
      out.compaction = out.updates.slice(m).filter((u) => u.sessionUpdate === 'compaction_update');
    });
  },
  // Authentication: no key until the client runs the terminal method
  // (octet login, here with the key on stdin) and authenticates.
  async auth() {
    const env = { OPENAI_API_KEY: '' };
    return run(false, { permission: select('reject_once'), caps: { auth: { terminal: true } }, env }, async (ctx, out) => {
      out.before = await call(ctx, acp.methods.agent.session.new, { cwd: ws, mcpServers: [] });
      const method = out.init.authMethods.find((m) => m.type === 'terminal');
      out.login = await new Promise((resolve) => {
        const p = spawn(process.env.OCTET_BIN, method.args, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env, ...(method.env || {}) } });
        let output = '';
        p.stdout.on('data', (d) => (output += d));
        p.stderr.on('data', (d) => (output += d));
        p.on('exit', (code) => resolve({ code, output }));
        p.stdin.end('sk-test-from-login\n');
      });
      out.authenticate = await call(ctx, acp.methods.agent.authenticate, { methodId: out.init.authMethods.find((m) => m.type !== 'terminal').id });
      out.session = await newSession(ctx);
      out.answer = await prompt(ctx, out.session.sessionId, 'hello with a key');
    });
  },
  // A delegating prompt (octet under unsafe_host): with the subagents
  // capability when the second argument says so.
  async delegate() {
    const caps = process.argv[3] === 'subagents' ? { subagents: {} } : {};
    return run(false, { permission: select('allow_once'), caps }, async (ctx, out) => {
      out.session = await newSession(ctx);
      out.answer = await prompt(ctx, out.session.sessionId, 'ROOT-PROMPT delegate');
    });
  },
};

try {
  const out = await scenarios[scenario]();
  out.wires = wires;
  console.log(JSON.stringify(out));
  process.exit(0);
} catch (e) {
  console.log(JSON.stringify({ failed: String((e && e.stack) || e) }));
  process.exit(1);
}
