-- octet.nvim: Neovim as a client of `octet lsp` (docs/protocol.md). One
-- server process per Neovim, for the workspace Neovim was opened in; a
-- chat buffer per session. See :help octet.
local M = {}

local api = vim.api
local config = require("octet.config")
local rpc = require("octet.rpc")
local chat = require("octet.chat")
local approval = require("octet.approval")
local documents = require("octet.documents")
local agents = require("octet.agents")
local text = require("octet.text")
local attach = require("octet.attach")

local state = {
  conn = nil,
  waiters = nil, -- callbacks waiting for initialize
  info = nil, -- initialize result
  sessions = {}, -- sessionId -> session
  current = nil, -- current sessionId
  last_file = nil, -- last file buffer entered (#buffer)
  config_error = nil,
}
M.state = state

local notify = text.notify

local function err_text(err)
  if type(err) == "table" then
    return tostring(err.message or vim.inspect(err))
  end
  return tostring(err)
end

-- What to do about an error answer, by code (docs/protocol.md).
local todo = {
  [-32010] = "the session is busy: steer with :OctetSteer or wait for the run to end",
  [-32011] = "the session is gone: :OctetSessions to pick another, or :OctetNew",
  [-32013] = "fix the configuration or credentials named above (:checkhealth octet), then try again",
  [-32099] = "octet lsp stopped: :checkhealth octet, then :Octet to start it again",
}

--- The workspace root.
function M.root()
  local r = config.options.root
  if type(r) == "function" then
    r = r()
  end
  local dir = vim.fn.fnamemodify(r or vim.fn.getcwd(), ":p"):gsub("(.)/$", "%1")
  return dir
end

-- Where the last session of each workspace is remembered.
local function last_path()
  return vim.fn.stdpath("data") .. "/octet/last-session.json"
end

local function read_last()
  local f = io.open(last_path())
  if not f then
    return {}
  end
  local ok, t = pcall(vim.json.decode, f:read("*a"))
  f:close()
  return ok and type(t) == "table" and t or {}
end

local function write_last(root, sid)
  local t = read_last()
  t[root] = sid
  vim.fn.mkdir(vim.fn.fnamemodify(last_path(), ":h"), "p")
  local f = io.open(last_path(), "w")
  if f then
    f:write(vim.json.encode(t))
    f:close()
  end
end

local function session(sid)
  return state.sessions[sid]
end

local function redraw()
  vim.cmd("redrawstatus!")
end

-- Fires the User autocmd pattern with data (an autocmd's data is 0.8+:
-- 0.7 refuses the key, so there it fires without).
local function user_event(pattern, data)
  local opts = { pattern = pattern, modeline = false }
  if vim.fn.has("nvim-0.8") == 1 then
    opts.data = data
  end
  pcall(api.nvim_exec_autocmds, "User", opts)
end

-- Optional progress UI: fidget.nvim's handle API when installed, and a
-- User OctetProgress autocmd (data: the $/progress value as sent) for
-- anything else.
local function progress(s, value)
  s.message = value.message or value.title
  local ok, fidget = pcall(require, "fidget.progress")
  if ok and fidget.handle then
    local message = value.message and text.line(value.message)
    if value.kind == "begin" then
      s.fidget = fidget.handle.create({ title = text.line(value.title or "octet"), message = message, lsp_client = { name = "octet" } })
    elseif s.fidget and value.kind == "report" then
      s.fidget:report({ message = message })
    elseif s.fidget and value.kind == "end" then
      s.fidget.message = message
      s.fidget:finish()
      s.fidget = nil
    end
  end
  user_event("OctetProgress", value)
  redraw()
end

local function policy_value(p)
  return type(p) == "table" and type(p.effect_policy) == "table" and p.effect_policy or {}
end

--- The OS sandbox an EffectiveToolPolicy p states, in a few words for the
--- statusline ("workspace-write sandbox", "no sandbox", "no OS sandbox"
--- when the host has none), or nil when p says nothing of it.
local function sandbox_label(p)
  local sb = type(p) == "table" and type(p.sandbox) == "table" and p.sandbox.value
  if type(sb) ~= "table" then
    return nil
  end
  if sb.mechanism == "unavailable" then
    return "no OS sandbox"
  elseif sb.profile == "none" or type(sb.profile) ~= "string" then
    return "no sandbox"
  end
  return sb.profile .. " sandbox"
end
M._sandbox_label = sandbox_label

-- A usage event: the session's totals when the server sends them
-- (usage.session, every run and child included), else the run's usage,
-- added to the totals when the run ends (add_usage).
local function usage_event(s, e)
  s.context = e
  if e.complete == false or rpc.nn(e.costMicros) == nil then
    s.uncertain = true -- a request not priced, or not known
  end
  if type(e.session) == "table" then
    s.totals, s.run_usage, s.server_totals = e.session, nil, true
  else
    s.run_usage = e
  end
end

-- Adds a run's usage (octet/prompt's, or its last usage event) to the
-- session's totals, unless the server's usage events carry them; the
-- run's own usage is then no longer shown apart.
local function add_usage(s, u)
  s.run_usage = nil
  if type(u) ~= "table" or s.server_totals then
    return
  end
  local t = s.totals or {}
  local cost = rpc.nn(u.costMicros)
  s.totals = {
    costMicros = cost and (rpc.nn(t.costMicros) or 0) + cost or rpc.nn(t.costMicros),
    complete = t.complete ~= false and u.complete ~= false and cost ~= nil,
  }
end

local function on_event(p)
  if type(p.parentSessionId) == "string" then
    -- A delegated child's own event: its block in the parent's chat.
    agents.event(p, state.sessions)
    return redraw()
  end
  local s = session(p.sessionId)
  if not s then
    return
  end
  local e, c = p.event or {}, s.chat
  local k = e.kind
  if k == "output_delta" or k == "tool_call_started" or k == "tool_started" or k == "run_finished" then
    s.retry = nil -- the answer goes on (or the run ended)
  end
  if k == "agent_updated" then
    agents.updated(p.sessionId, e, state.sessions)
  elseif k == "run_started" then
    s.run_id, s.state = p.runId, "running"
  elseif k == "output_delta" then
    c:delta(e.channel, e.text)
  elseif k == "tool_call_started" or k == "tool_call_delta" then
    c:call_delta(e.callId, e.name, e.delta)
  elseif k == "assistant_committed" then
    c:commit()
  elseif k == "provider_retry" then
    if rpc.nn(e.operation) == nil then
      c:discard()
    end
    -- The statusline says it in these words until the answer goes on
    -- (the server's progress message says it in its own).
    s.retry = text.retry(e)
    c:retry(e, config.options.keymaps.cancel)
  elseif k == "tool_policy_decision" then
    local reason = rpc.nn(e.reason)
    if s.cancelling and e.decision == "denied" then
      reason = "the run was cancelled" -- the server may report it as a denial
    end
    c:decision(e.callId, e.decision, reason)
    approval.decided(p.sessionId, e.callId, e.decision, reason)
    if type(e.effectiveToolPolicy) == "table" and type(e.effectiveToolPolicy.effect_policy) == "table" then
      s.policy = e.effectiveToolPolicy.effect_policy.value
      s.sandbox = sandbox_label(e.effectiveToolPolicy) or s.sandbox
    end
  elseif k == "tool_started" and e.tool == "update_plan" then
    -- Its plan event is what the chat shows of it.
    s.plan_calls = s.plan_calls or {}
    s.plan_calls[e.callId] = true
  elseif k == "tool_started" then
    c:tool_start(e.callId, e.tool)
  elseif k == "plan" then
    c:plan(e)
  elseif k == "tool_output" then
    c:tool_output(e.callId, e.text)
  elseif k == "tool_finished" and s.plan_calls and s.plan_calls[e.callId] then
    s.plan_calls[e.callId] = nil
    if e.isError then
      c:notice("The plan was not updated (update_plan failed).")
    end
  elseif k == "tool_finished" then
    c:tool_finish(e.callId, e.isError, rpc.nn(e.changes))
    local call = c:call(e.callId)
    if call.block and call.block.empty then
      -- No streamed output (edit, read, errors): show the durable result.
      M.request("octet/session/transcript", { sessionId = s.id, limit = 8 }, function(err, page)
        for _, en in ipairs(not err and page.entries or {}) do
          if type(en.result) == "table" and en.result.callId == e.callId and call.block.empty then
            c:write(call.block, type(en.result.text) == "string" and en.result.text or "")
          end
        end
      end)
    end
  elseif k == "usage" then
    usage_event(s, e)
  elseif k == "session_state" then
    s.state = e.state
    s.run_id = rpc.nn(e.activeRunId) or s.run_id
  elseif k == "compaction_started" then
    c:notice("Compacting context…")
  elseif k == "run_finished" then
    if not s.sending then
      -- A run this Neovim did not prompt: no octet/prompt answer brings
      -- its usage, the events did.
      add_usage(s, s.run_usage)
    end
    c:run_end(e.outcome, rpc.nn(e.error))
    if s.redraw_at_end then
      s.redraw_at_end = nil
      require("octet.review").rerender(s)
    end
    s.state, s.run_id, s.cancelling = "idle", nil, nil
    approval.clear(p.sessionId)
    s.message = nil
  end
  if k ~= "output_delta" and k ~= "tool_call_delta" and k ~= "tool_output" then
    redraw()
  end
end

local function on_notification(method, p)
  if method == "octet/event" then
    on_event(p)
  elseif method == "octet/recoveredOutput" then
    local s = session(p.sessionId)
    if s then
      s.chat:recovered(p.channel, p.text, rpc.nn(p.attempt))
    end
  elseif method == "$/progress" then
    -- Server tokens name the run: "octet/run/<runId>/<n>". Progress may
    -- begin before run_started: then it is the session sending a prompt.
    local run = tostring(p.token):match("^octet/run/([^/]+)/")
    local sid
    for id, s in pairs(state.sessions) do
      if s.run_id == run or (not sid and s.sending and not s.run_id) then
        sid = id
      end
    end
    if sid and session(sid) and type(p.value) == "table" then
      progress(session(sid), p.value)
    end
  elseif method == "window/showMessage" then
    if p.type == 1 then
      state.config_error = p.message
    end
    notify(p.message, p.type == 1 and vim.log.levels.ERROR or vim.log.levels.WARN)
  elseif method == "window/logMessage" then
    notify(p.message, ({ vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.DEBUG })[p.type])
  end
end

local function on_request(method, p, respond, id)
  if method == "octet/confirmEffect" then
    local s = session(p.sessionId)
    approval.request(s and s.chat, p, respond, id)
  elseif method == "workspace/applyEdit" then
    documents.apply_edit(p, respond)
  elseif method == "octet/saveDocuments" then
    documents.save_documents(p, respond)
  elseif method == "window/workDoneProgress/create" then
    respond(vim.NIL)
  elseif method == "window/showMessageRequest" then
    local actions = p.actions or {}
    vim.ui.select(actions, {
      prompt = text.lines(p.message),
      format_item = function(a)
        return text.line(a.title)
      end,
    }, function(choice)
      respond(choice or vim.NIL)
    end)
  else
    respond(nil, { code = -32601, message = "octet.nvim does not handle " .. method })
  end
end

local function on_exit(code, _, stderr)
  local was = state.conn
  state.conn, state.info = nil, nil
  documents.stop()
  approval.clear(nil)
  agents.disconnected()
  for _, s in pairs(state.sessions) do
    s.state, s.run_id = "stopped", nil
  end
  if was and not was.stopping then
    local last = vim.trim(stderr or ""):match("[^\n]*$") or ""
    notify(string.format("octet lsp exited (code %d)%s; :checkhealth octet says why, :Octet starts it again",
      code, last ~= "" and (": " .. last) or ""), vim.log.levels.ERROR)
  end
  redraw()
end

local function capabilities()
  return {
    general = { positionEncodings = { "utf-8", "utf-16" } },
    window = { workDoneProgress = true, showMessage = vim.empty_dict() },
    workspace = { applyEdit = true, workspaceEdit = { documentChanges = true }, workspaceFolders = true },
    textDocument = { synchronization = { didSave = true, dynamicRegistration = false } },
    experimental = {
      octet = { confirmEffect = true, events = true, recoveredOutput = true, saveDocuments = true, diagnostics = true },
    },
  }
end

--- Starts `octet lsp` (once) and calls cb(err) when it is initialized.
function M.connect(cb)
  cb = cb or function() end
  if state.info then
    return cb(nil)
  end
  if state.waiters then
    return table.insert(state.waiters, cb)
  end
  local cmd = config.options.cmd
  if vim.fn.executable(cmd[1]) ~= 1 then
    return cb("the octet binary " .. vim.inspect(cmd[1]) .. " was not found: install octet (go install "
      .. "github.com/octet-agent/octet/cmd/octet@latest) or set require('octet').setup{ cmd = { '/path/to/octet', 'lsp' } }")
  end
  local root = M.root()
  local conn, err = rpc.start(cmd, { cwd = root, env = config.options.env }, {
    notification = on_notification,
    request = on_request,
    cancel = approval.withdrawn,
    exit = on_exit,
  })
  if not conn then
    return cb(err)
  end
  state.conn, state.waiters, state.root = conn, { cb }, root
  local uri = vim.uri_from_fname(root)
  conn:request("initialize", {
    processId = vim.fn.getpid(),
    clientInfo = { name = "octet.nvim", version = tostring(vim.version()) },
    rootUri = uri,
    rootPath = root,
    workspaceFolders = { { uri = uri, name = vim.fn.fnamemodify(root, ":t") } },
    capabilities = capabilities(),
    initializationOptions = config.options.log_level and { logLevel = config.options.log_level } or vim.empty_dict(),
  }, function(ierr, res)
    local waiters = state.waiters or {}
    state.waiters = nil
    if ierr then
      conn:stop()
      state.conn = nil
      for _, w in ipairs(waiters) do
        w("initialize failed: " .. err_text(ierr))
      end
      return
    end
    state.info = res
    conn:notify("initialized", vim.empty_dict())
    local caps = res.capabilities or {}
    documents.start(conn, root, caps.positionEncoding or "utf-16")
    for _, w in ipairs(waiters) do
      w(nil)
    end
    -- The default model, for the statusline of sessions that did not
    -- choose one.
    conn:request("octet/models", nil, function(merr, models)
      if not merr and type(models) == "table" then
        state.default_model = rpc.nn(models.default)
      end
    end)
  end)
end

--- The server's octet capabilities (experimental.octet), or {}.
function M.server_caps()
  local c = state.info and state.info.capabilities or {}
  return type(c.experimental) == "table" and c.experimental.octet or {}
end

--- Whether the server implements v1.1 feature name.
function M.has(name)
  for _, f in ipairs(M.server_caps().features or {}) do
    if f == name then
      return true
    end
  end
  return false
end

--- Sends a request once connected; cb(err_message, result).
function M.request(method, params, cb)
  M.connect(function(cerr)
    if cerr then
      return cb(cerr)
    end
    state.conn:request(method, params, function(err, res)
      if err then
        local msg = err_text(err)
        if todo[err.code] then
          msg = msg .. " — " .. todo[err.code]
        end
        return cb(msg, nil, err)
      end
      cb(nil, res)
    end)
  end)
end

local function chat_keymaps(s)
  if config.options.keymaps.cancel then
    vim.keymap.set("n", config.options.keymaps.cancel, function()
      M.cancel()
    end, { buffer = s.chat.buf, desc = "octet: cancel the run" })
  end
  if config.options.keymaps.stop_agent then
    vim.keymap.set("n", config.options.keymaps.stop_agent, function()
      M.stop_agent_at_cursor()
    end, { buffer = s.chat.buf, desc = "octet: stop the subagent under the cursor" })
  end
end

-- Draws session s's chat again from its transcript: the chat buffer was
-- emptied (:bdelete). The text of a run still going is in the transcript
-- once committed: drawn again when the run ends.
local function chat_reloaded(s)
  chat_keymaps(s)
  if state.conn then
    require("octet.review").rerender(s)
  end
  s.redraw_at_end = s.run_id ~= nil or s.sending
end

local function new_session_object(sid, title)
  local s = { id = sid, title = title, state = "idle", chat = chat.new(sid, title), totals = {} }
  chat_keymaps(s)
  s.chat.reloaded = function()
    chat_reloaded(s)
  end
  state.sessions[sid] = s
  return s
end

--- Creates a session in the configured mode; cb(err, session).
function M.new_session(cb, title)
  cb = cb or function() end
  M.request("octet/session/new", {
    title = title,
    model = config.options.model,
    effectPolicy = config.modes[config.options.mode],
  }, function(err, res)
    if err then
      notify("cannot start a session: " .. err, vim.log.levels.ERROR)
      return cb(err)
    end
    local s = new_session_object(res.sessionId, title)
    s.policy = policy_value(res.effectiveToolPolicy).value
    s.sandbox = sandbox_label(res.effectiveToolPolicy)
    s.model = config.options.model
    state.current = s.id
    write_last(state.root, s.id)
    cb(nil, s)
  end)
end

--- Opens session sid (resume: its transcript rendered); cb(err, session).
function M.resume(sid, cb)
  cb = cb or function() end
  local old = session(sid)
  M.request("octet/session/resume", { sessionId = sid }, function(err, res)
    if err then
      return cb(err)
    end
    local s = old or new_session_object(sid, nil)
    if not old then
      if rpc.nn(res.transcriptNextBefore) then
        s.chat:notice("Earlier entries are not shown here (octet sessions show " .. sid .. " prints them all).")
      end
      s.chat:transcript(res.transcript, res.recoveredOutput, res.runs)
      if type(res.plan) == "table" then
        -- The page may not reach back to the plan's call.
        s.chat:plan(res.plan)
      end
      agents.resumed(s, res.children)
      -- The resume result has no title: a renamed session's is listed.
      M.request("octet/session/list", { cwd = state.root, limit = 200 }, function(lerr, list)
        for _, x in ipairs(not lerr and type(list) == "table" and list.sessions or {}) do
          if x.sessionId == sid and type(x.title) == "string" and x.title ~= "" then
            s.title = x.title
            s.chat:set_title(x.title)
          end
        end
      end)
    end
    s.run_id = rpc.nn(res.activeRunId)
    s.state = s.run_id and "running" or "idle"
    s.totals, s.run_usage = type(res.usage) == "table" and res.usage or {}, nil
    s.uncertain = rpc.nn(res.usageUncertain) or s.totals.complete == false
    -- The model the session recorded ("": the configured default).
    if type(res.model) == "string" then
      s.model = res.model ~= "" and res.model or nil
    end
    state.current = sid
    write_last(state.root, sid)
    -- A session that was never switched by a person starts in the
    -- configured mode (the launch policy may be looser).
    M.request("octet/policy", { sessionId = sid }, function(perr, pol)
      local ep = policy_value(pol)
      if perr or ep.source == "session" then
        s.policy = ep.value
        s.sandbox = sandbox_label(pol)
        return cb(nil, s)
      end
      M.set_mode(config.options.mode, function()
        cb(nil, s)
      end, s)
    end)
  end)
end

--- Calls cb(err, session) with the current session: the open one, the
--- workspace's last one (resumed), or a new one.
function M.current(cb)
  local s = state.current and session(state.current)
  if s and s.state == "stopped" then
    -- octet lsp exited since: open the session in the new one.
    return M.resume(s.id, cb)
  end
  if s then
    return cb(nil, s)
  end
  -- One lookup at a time: callers meanwhile wait for its session.
  if state.finding then
    return table.insert(state.finding, cb)
  end
  state.finding = { cb }
  cb = function(err, found)
    local waiting = state.finding
    state.finding = nil
    for _, w in ipairs(waiting) do
      w(err, found)
    end
  end
  M.connect(function(cerr)
    if cerr then
      notify(cerr, vim.log.levels.ERROR)
      return cb(cerr)
    end
    local last = config.options.resume_last and read_last()[state.root]
    if not last then
      return M.new_session(cb)
    end
    M.resume(last, function(err, rs)
      if err then
        return M.new_session(cb)
      end
      cb(nil, rs)
    end)
  end)
end

--- Sends text: a prompt when the session is idle, else steering input
--- (opts.follow_up queues it for when the run ends instead). opts.context
--- is the attachments ([{uri, range?}]); opts.unsent(text) is called when
--- the text is not sent (the input window gets it back).
function M.send(text, opts)
  opts = opts or {}
  if not text or vim.trim(text) == "" then
    return
  end
  local function unsent()
    if opts.unsent then
      opts.unsent(text)
    end
  end
  M.current(function(err, s)
    if err then
      return unsent()
    end
    if s.run_id then
      if text:find("#image:", 1, true) then
        -- Steering is text only: keep the prompt for when the run ends.
        unsent()
        return notify("images go with a prompt, not with input to a running run: send it when the run ends", vim.log.levels.WARN)
      end
      return M.steer(text, opts.follow_up, opts.unsent)
    end
    if s.sending then
      -- The prompt was sent but its run_started has not arrived: wait
      -- for the run id, then steer.
      opts.tries = (opts.tries or 0) + 1
      if opts.tries < 100 then
        return vim.defer_fn(function()
          M.send(text, opts)
        end, 20)
      end
    end
    local context, names = attach.parse(text, opts.context)
    if not context then
      unsent()
      return notify("the prompt was not sent: " .. names, vim.log.levels.ERROR)
    end
    s.chat:user(text, nil, names)
    s.state, s.sending = "running", true
    redraw()
    M.request("octet/prompt", { sessionId = s.id, text = text, context = #context > 0 and context or nil },
      function(perr, res, raw)
        s.sending = false
        s.answers = (s.answers or 0) + 1
        if perr then
          s.state = "idle"
          s.chat:error(perr, not (raw and todo[raw.code]) and "check the message, then send again" or nil)
          redraw()
          return
        end
        add_usage(s, res.usage)
        if res.outcome == "failed" and s.run_id then
          s.chat:run_end("failed", res.error)
        end
        s.state, s.run_id = "idle", nil
        redraw()
        user_event("OctetRunFinished", res)
      end)
  end)
end

--- Steers the running run (or with follow_up, queues a follow-up);
--- unsent(text) as for M.send.
function M.steer(text, follow_up, unsent)
  local s = state.current and session(state.current)
  if not s or not s.run_id then
    return M.send(text, { unsent = unsent })
  end
  local method = follow_up and "octet/followUp" or "octet/steer"
  M.request(method, { runId = s.run_id, text = text }, function(err, _, raw)
    if raw and raw.code == -32803 then
      return M.send(text, { unsent = unsent }) -- the run ended meanwhile: a new prompt
    end
    if err then
      if unsent then
        unsent(text)
      end
      return s.chat:error(err)
    end
    s.chat:user(text, follow_up and "You (follow-up, queued)" or "You (steering)")
  end)
end

local function run_request(method, extra)
  local s = state.current and session(state.current)
  if not s or not s.run_id then
    return notify("no run is going", vim.log.levels.WARN)
  end
  M.request(method, vim.tbl_extend("force", { runId = s.run_id }, extra or {}), function(err)
    if err then
      notify(err, vim.log.levels.WARN)
    end
  end)
end

function M.cancel()
  local s = M.session()
  if s and s.run_id then
    s.cancelling = true
  end
  run_request("octet/cancel")
end

function M.finish_now(text)
  run_request("octet/finishNow", text and text ~= "" and { text = text } or nil)
end

--- Switches the current session's policy mode ("ask", "auto-read",
--- "full").
function M.set_mode(mode, cb, s)
  cb = cb or function() end
  s = s or (state.current and session(state.current))
  if not config.modes[mode] then
    notify("unknown mode " .. tostring(mode) .. ": ask, auto-read or full", vim.log.levels.ERROR)
    return cb("unknown mode")
  end
  if not s then
    return M.current(function(err, cs)
      if not err then
        M.set_mode(mode, cb, cs)
      end
    end)
  end
  M.request("octet/session/setPolicy", { sessionId = s.id, effectPolicy = config.modes[mode] }, function(err, res)
    if err then
      notify("cannot switch to " .. mode .. ": " .. err, vim.log.levels.ERROR)
      return cb(err)
    end
    s.policy = policy_value(res).value
    s.sandbox = sandbox_label(res)
    redraw()
    cb(nil)
  end)
end

--- The current session (or nil).
function M.session()
  return state.current and session(state.current)
end

--- Makes s the current session and shows its chat.
function M.switch(s)
  state.current = s.id
  M.open()
end

--- Forgets session sid (deleted).
function M.forget(sid)
  local s = session(sid)
  if s then
    if api.nvim_buf_is_valid(s.chat.buf) then
      api.nvim_buf_delete(s.chat.buf, { force = true })
    end
    state.sessions[sid] = nil
  end
  if state.current == sid then
    state.current = nil
  end
  if state.root and read_last()[state.root] == sid then
    write_last(state.root, nil)
  end
end

-- The input buffer: <C-s> sends (or steers), <C-f> queues a follow-up.
local function input_buffer()
  if state.input and api.nvim_buf_is_valid(state.input) then
    if vim.b[state.input].octet_input then
      return state.input
    end
    -- :bdelete cleared its options and keys: make it anew.
    api.nvim_buf_delete(state.input, { force = true })
  end
  local buf = api.nvim_create_buf(false, true)
  vim.b[buf].octet_input = true
  pcall(api.nvim_buf_set_name, buf, "octet://input")
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  chat.markdown(buf)
  local k = config.options.keymaps
  local function take()
    local text = table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
    api.nvim_buf_set_lines(buf, 0, -1, false, {})
    return text
  end
  -- Text that was not sent comes back, unless something was typed since.
  local function unsent(text)
    if api.nvim_buf_is_valid(buf) and table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), "") == "" then
      api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, "\n", { plain = true }))
    end
  end
  vim.keymap.set({ "n", "i" }, k.send, function()
    M.send(take(), { unsent = unsent })
  end, { buffer = buf, desc = "octet: send (steer while a run is going)" })
  vim.keymap.set("n", "<CR>", function()
    M.send(take(), { unsent = unsent })
  end, { buffer = buf, desc = "octet: send" })
  vim.keymap.set({ "n", "i" }, k.follow_up, function()
    M.send(take(), { follow_up = true, unsent = unsent })
  end, { buffer = buf, desc = "octet: queue a follow-up" })
  vim.keymap.set("n", k.cancel, M.cancel, { buffer = buf, desc = "octet: cancel the run" })
  attach.setup_buffer(buf)
  local hint_ns = api.nvim_create_namespace("octet.input.hint")
  local function hint()
    api.nvim_buf_clear_namespace(buf, hint_ns, 0, -1)
    local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
    if #lines == 1 and lines[1] == "" then
      api.nvim_buf_set_extmark(buf, hint_ns, 0, 0, {
        virt_text = { { M.input_hint(), "Comment" } },
        virt_text_pos = "overlay",
      })
    end
  end
  api.nvim_create_autocmd({ "TextChanged", "TextChangedI", "BufEnter" }, { buffer = buf, callback = hint })
  hint()
  state.input = buf
  return buf
end

--- The key hint the empty input window shows.
function M.input_hint()
  local k = config.options.keymaps
  return string.format("%s send · %s queue · %s cancel · # attach", k.send, k.follow_up, k.cancel)
end

local function show_buf(buf)
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) == buf then
      return win
    end
  end
end

--- Opens the current session's chat and input windows.
function M.open(cb)
  M.current(function(err, s)
    if err then
      return cb and cb(err)
    end
    local win = show_buf(s.chat.buf)
    if not win then
      -- Reuse a window showing another chat.
      for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
        if chat.of(api.nvim_win_get_buf(w)) then
          win = w
          api.nvim_win_set_buf(w, s.chat.buf)
        end
      end
    end
    if not win then
      local o = config.options
      if o.layout == "tab" then
        vim.cmd("tabnew")
      elseif o.layout == "horizontal" then
        vim.cmd("botright " .. o.height .. "split")
      else
        vim.cmd("botright " .. o.width .. "vsplit")
      end
      win = api.nvim_get_current_win()
      api.nvim_win_set_buf(win, s.chat.buf)
    end
    chat.setup_window(win)
    api.nvim_win_set_cursor(win, { api.nvim_buf_line_count(s.chat.buf), 0 })
    local input = input_buffer()
    if not show_buf(input) then
      api.nvim_set_current_win(win)
      vim.cmd("belowright " .. config.options.input_height .. "split")
      api.nvim_win_set_buf(0, input)
    end
    if cb then
      cb(nil, s)
    end
  end)
end

-- The session's known cost so far ("$0.42"), the running run's included;
-- "+" when some of it is not known (a request not priced or cancelled
-- after it was sent); nil before anything was priced.
local function session_cost(s)
  local t, r = s.totals or {}, s.run_usage or {}
  local total, run = rpc.nn(t.costMicros), rpc.nn(r.costMicros)
  if not total and not run then
    return nil
  end
  local known = not s.uncertain and t.complete ~= false
  return string.format("$%.2f%s", ((total or 0) + (run or 0)) / 1e6, known and "" or "+")
end

--- Closes the current session's chat and input windows when they are
--- shown in this tab, else opens them (:OctetToggle).
function M.toggle()
  local s = M.session()
  local wins = {}
  for _, b in ipairs({ s and s.chat.buf, state.input }) do
    local w = b and api.nvim_buf_is_valid(b) and show_buf(b)
    if w then
      table.insert(wins, w)
    end
  end
  if #wins == 0 then
    return M.open()
  end
  for _, w in ipairs(wins) do
    if #api.nvim_tabpage_list_wins(0) > 1 then
      api.nvim_win_close(w, false)
    else
      -- The last window of the tab: show another buffer in it.
      vim.cmd("enew")
    end
  end
end

--- A statusline component: "octet ask · workspace-write sandbox · running ·
--- gpt-5 · $0.01 · 12% ctx",
--- as a 'statusline' format: the text the server, the model or the
--- repository wrote (progress, model name) is shown as it is, its "%"
--- doubled, so the component is safe where its result is interpreted
--- ("%{%…%}", lualine).
function M.statusline()
  local s = M.session()
  if not s then
    return state.info and "octet" or ""
  end
  local mode = config.mode_names[s.policy or ""] or "?"
  local parts = { "octet " .. (mode == "full" and "FULL ACCESS" or mode) }
  if s.sandbox then
    -- Next to the mode: the OS sandbox its commands run in.
    table.insert(parts, s.sandbox)
  end
  local n = approval.pending(s.id)
  if n > 0 then
    table.insert(parts, "APPROVAL PENDING" .. (n > 1 and (" ×" .. n) or ""))
  elseif (s.retry or s.message) and s.state ~= "idle" then
    table.insert(parts, text.line(s.retry or s.message, 80))
  else
    table.insert(parts, text.line(s.state, 20))
  end
  local kids = agents.status(s)
  if kids then
    table.insert(parts, kids)
  end
  if s.model or state.default_model then
    table.insert(parts, text.line(s.model or state.default_model, 60))
  end
  local cost = session_cost(s)
  if cost then
    table.insert(parts, cost)
  end
  local u = s.context
  if type(u) == "table" then
    if rpc.nn(u.contextWindow) and u.contextWindow > 0 and rpc.nn(u.contextTokens) then
      table.insert(parts, string.format("%d%% ctx", math.floor(100 * u.contextTokens / u.contextWindow + 0.5)))
    end
  end
  return text.statusline(table.concat(parts, " · "))
end

--- Lists the current session's delegated children (vim.ui.select) and
--- stops the chosen one (:OctetAgents).
function M.agents()
  local s = M.session()
  local list = s and agents.of(s) or {}
  if #list == 0 then
    return notify("this session has no subagents", vim.log.levels.INFO)
  end
  vim.ui.select(list, { prompt = "octet subagents", format_item = agents.label }, function(k)
    if not k then
      return
    end
    local actions = { "show in chat" }
    if agents.live(k) then
      table.insert(actions, 1, "stop")
    end
    vim.ui.select(actions, { prompt = text.line(k.path) }, function(action)
      if action == "stop" then
        agents.stop(k, M.request, notify)
      elseif action == "show in chat" then
        M.open(function()
          local row = s.chat:region_rows(k.region)
          local win = vim.fn.bufwinid(s.chat.buf)
          if row and win ~= -1 then
            api.nvim_win_set_cursor(win, { row + 1, 0 })
          end
        end)
      end
    end)
  end)
end

--- Stops the subagent whose block is under the cursor in a chat window.
function M.stop_agent_at_cursor()
  local s
  for _, x in pairs(state.sessions) do
    if x.chat.buf == api.nvim_get_current_buf() then
      s = x
    end
  end
  local k = s and agents.at(s, api.nvim_win_get_cursor(0)[1] - 1)
  if not k then
    return notify("no subagent block under the cursor (:OctetAgents lists them)", vim.log.levels.INFO)
  end
  agents.stop(k, M.request, notify)
end

--- Stops the server (VimLeavePre): shutdown and exit, waiting at most
--- wait ms (default 1000) for it to settle its sessions.
function M.stop(wait)
  local c = state.conn
  if c then
    c.stopping = true
    c:stop(5000)
    vim.wait(type(wait) == "number" and wait or 1000, function()
      return c.closed
    end, 10)
  end
end

local function augroup()
  local g = api.nvim_create_augroup("octet", { clear = true })
  api.nvim_create_autocmd({ "BufReadPost", "BufNewFile", "BufEnter" }, {
    group = g,
    callback = function(a)
      if vim.bo[a.buf].buftype == "" and api.nvim_buf_get_name(a.buf) ~= "" then
        state.last_file = a.buf
        documents.attach(a.buf)
      end
    end,
  })
  api.nvim_create_autocmd("BufWritePost", {
    group = g,
    callback = function(a)
      documents.saved(a.buf)
    end,
  })
  api.nvim_create_autocmd({ "BufUnload", "BufFilePre" }, {
    group = g,
    callback = function(a)
      documents.detach(a.buf)
    end,
  })
  api.nvim_create_autocmd("DiagnosticChanged", {
    group = g,
    callback = function(a)
      documents.diagnostics_changed(a.buf)
    end,
  })
  api.nvim_create_autocmd("ColorScheme", {
    group = g,
    callback = agents.define_highlights,
  })
  api.nvim_create_autocmd("VimLeavePre", {
    group = g,
    callback = function()
      M.stop()
    end,
  })
end

--- Asks about lines l1..l2 of the current buffer (:'<,'>OctetAsk): the
--- selection is attached to the prompt.
function M.ask(l1, l2, text)
  local buf = api.nvim_get_current_buf()
  M.connect(function(err)
    if err then
      return notify(err, vim.log.levels.ERROR)
    end
    local uri = documents.uri(buf)
    if not uri then
      return notify("this buffer is not a file in the workspace " .. state.root .. "; only those can be attached",
        vim.log.levels.ERROR)
    end
    -- The range ends at the end of line l2, in the negotiated encoding.
    local last = api.nvim_buf_get_lines(buf, l2 - 1, l2, false)[1] or ""
    local width = documents.character(last, #last)
    local range = { start = { line = l1 - 1, character = 0 }, ["end"] = { line = l2 - 1, character = width } }
    if text == nil or vim.trim(text) == "" then
      text = "Explain this code."
    end
    M.send(text, { context = { { uri = uri, range = range } } })
    M.open()
  end)
end

--- Configures octet.nvim (see :help octet-setup).
function M.setup(opts)
  M.configured = true
  config.set(opts)
  augroup()
  agents.define_highlights()
end

return M
