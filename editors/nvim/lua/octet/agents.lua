-- Delegated child agents (docs/protocol.md, "Delegated child agents"):
-- one block per child in its top-level session's chat, updated in place
-- from the parent's agent_updated events and the child's own octet/event
-- stream: its path, status and task, what it is doing now, and when it
-- ends its answer (or error) and usage. :OctetAgents lists and stops them.
local M = {}

local api = vim.api
local text = require("octet.text")
local hl_ns = api.nvim_create_namespace("octet.agents")

local kids = {} -- child sessionId -> kid
local order = {} -- child sessionIds in the order they appeared

-- The statuses a child goes through and their highlight groups.
M.highlights = {
  pending = "OctetAgentPending",
  running = "OctetAgentRunning",
  idle = "OctetAgentIdle",
  completed = "OctetAgentCompleted",
  failed = "OctetAgentFailed",
  cancelled = "OctetAgentCancelled",
  disconnected = "OctetAgentDisconnected",
}

local live = { pending = true, running = true, idle = true }

--- Defines the highlight groups (default = true: a colorscheme's win).
function M.define_highlights()
  -- DiagnosticOk is Neovim 0.9+; older ones get DiagnosticHint.
  local ok = vim.fn.hlexists("DiagnosticOk") == 1 and "DiagnosticOk" or "DiagnosticHint"
  local links = {
    OctetAgentPending = "DiagnosticHint",
    OctetAgentRunning = "DiagnosticInfo",
    OctetAgentIdle = ok,
    OctetAgentCompleted = ok,
    OctetAgentFailed = "DiagnosticError",
    OctetAgentCancelled = "DiagnosticWarn",
    OctetAgentDisconnected = "DiagnosticWarn",
    OctetAgentPath = "Title",
    OctetAgentActivity = "Comment",
  }
  for group, target in pairs(links) do
    api.nvim_set_hl(0, group, { link = target, default = true })
  end
end

local first_line = text.first_line

local function usage_text(u)
  if type(u) ~= "table" then
    return nil
  end
  local parts = {}
  if type(u.input) == "number" then
    table.insert(parts, tostring(u.input) .. " in")
  end
  if type(u.output) == "number" then
    table.insert(parts, tostring(u.output) .. " out")
  end
  if type(u.costPicodollars) == "number" then
    table.insert(parts, string.format("$%.4f", u.costPicodollars / 1e12))
  end
  if u.complete == false then
    table.insert(parts, "incomplete")
  end
  return #parts > 0 and table.concat(parts, " · ") or nil
end

-- The block's lines and the byte range of the status on its first line.
local function lines_of(k)
  local head = "▸ " .. text.line(k.path, 80) .. " "
  local status = "[" .. text.line(k.status, 20) .. "]"
  local l1 = head .. status
  if k.task and k.task ~= "" then
    l1 = l1 .. " " .. first_line(k.task, 72)
  end
  local lines = { l1 }
  if live[k.status] and k.status ~= "idle" then
    table.insert(lines, "    ↳ " .. (k.activity or "waiting…"))
  else
    if k.error then
      table.insert(lines, "    error: " .. first_line(k.error, 200))
    elseif k.answer and k.answer ~= "" then
      local al = vim.split(vim.trim(k.answer), "\n", { plain = true })
      for i = 1, math.min(#al, 3) do
        table.insert(lines, "    " .. (i == 1 and "answer: " or "        ") .. first_line(al[i], 120))
      end
      if #al > 3 then
        table.insert(lines, "            …")
      end
    end
    local u = usage_text(k.usage)
    if u then
      table.insert(lines, "    usage: " .. u)
    end
  end
  return lines, #head, #head + #status
end

local function render(k)
  local c = k.top and k.top.chat
  if not c or not api.nvim_buf_is_valid(c.buf) then
    return
  end
  local lines, hs, he = lines_of(k)
  local row = k.region and c:set_region(k.region, lines)
  if not row then
    -- A new block (or the chat was emptied since).
    k.region = c:region(lines)
    row = c:set_region(k.region, lines)
  end
  if not row then
    return
  end
  k.hl = api.nvim_buf_set_extmark(c.buf, hl_ns, row, hs, {
    id = k.hl,
    end_row = row,
    end_col = he,
    hl_group = M.highlights[k.status] or "OctetAgentDisconnected",
  })
  k.path_hl = api.nvim_buf_set_extmark(c.buf, hl_ns, row, 0, {
    id = k.path_hl,
    end_row = row,
    end_col = hs,
    hl_group = "OctetAgentPath",
  })
  if #lines > 1 then
    k.act_hl = api.nvim_buf_set_extmark(c.buf, hl_ns, row + 1, 0, {
      id = k.act_hl,
      end_row = row + #lines - 1,
      end_col = #lines[#lines],
      hl_group = "OctetAgentActivity",
    })
  end
  c.agent_rows = nil
end

local function kid(sid, top)
  local k = kids[sid]
  if not k then
    k = { sid = sid, status = "pending", path = "?", calls = {}, text = "" }
    kids[sid] = k
    table.insert(order, sid)
  end
  k.top = k.top or top
  return k
end

--- The top-level session a session id belongs to (itself, or the
--- session a child descends from), given the plugin's sessions.
local function top_of(sid, sessions)
  if sessions[sid] then
    return sessions[sid]
  end
  return kids[sid] and kids[sid].top
end

--- An agent_updated event on session parent_sid's stream.
function M.updated(parent_sid, e, sessions)
  if type(e.sessionId) ~= "string" then
    return
  end
  local k = kid(e.sessionId, top_of(parent_sid, sessions))
  k.parent = parent_sid
  k.agent_id = e.agentId
  k.path = type(e.agentPath) == "string" and e.agentPath or k.path
  k.status = type(e.status) == "string" and e.status or k.status
  if type(e.task) == "string" then
    k.task = e.task
  end
  if k.status == "pending" or k.status == "running" then
    k.error = nil
  end
  if type(e.error) == "string" then
    k.error = e.error
  elseif type(e.error) == "table" then
    k.error = e.error.message or vim.inspect(e.error)
  end
  if type(e.usage) == "table" then
    k.usage = e.usage
  end
  render(k)
end

local function call_what(c)
  local ok, args = pcall(vim.json.decode, c.args ~= "" and c.args or "{}")
  local s = ""
  if ok and type(args) == "table" then
    s = args.path or args.command or args.pattern or args.url or args.task or ""
  end
  s = first_line(s, 60)
  -- The name is the model's too: one line, bounded, like the argument.
  return text.line(c.tool or c.name or "tool", 40) .. (s ~= "" and (" " .. s) or "")
end

--- One of a child's own octet/event notifications (p.parentSessionId set).
function M.event(p, sessions)
  local e = p.event or {}
  local kind = e.kind
  if kind == "agent_updated" then
    -- A grandchild, reported on its parent (a child)'s stream.
    return M.updated(p.sessionId, e, sessions)
  end
  local k = kid(p.sessionId, top_of(p.parentSessionId, sessions))
  k.parent = k.parent or p.parentSessionId
  if type(p.agentPath) == "string" and k.path == "?" then
    k.path = p.agentPath
  end
  if type(p.runId) == "string" then
    k.run_id = p.runId
  end
  local before = k.activity
  if kind == "run_started" then
    k.text, k.activity = "", "starting…"
  elseif kind == "output_delta" then
    if e.channel == "reasoning" then
      k.activity = "thinking…"
    else
      k.text = (k.text or "") .. tostring(e.text or "")
      k.activity = "writing…"
    end
  elseif kind == "provider_retry" then
    k.text = ""
    k.activity = "retrying: " .. first_line(e.cause, 60)
  elseif kind == "assistant_committed" then
    if k.text ~= "" then
      k.answer = k.text
    end
    k.text = ""
  elseif kind == "tool_call_started" or kind == "tool_call_delta" then
    local c = k.calls[e.callId] or { args = "" }
    k.calls[e.callId] = c
    c.name = e.name or c.name
    c.args = c.args .. (type(e.delta) == "string" and e.delta or "")
  elseif kind == "tool_started" then
    local c = k.calls[e.callId] or { args = "" }
    k.calls[e.callId] = c
    c.tool = e.tool
    k.activity = call_what(c)
  elseif kind == "tool_finished" then
    local c = k.calls[e.callId]
    if c then
      k.activity = call_what(c) .. (e.isError and " · error" or " · done")
    end
  elseif kind == "run_finished" then
    k.activity = nil
    if e.outcome == "failed" and type(e.error) == "string" then
      k.error = e.error
    end
  end
  if k.activity ~= before or kind == "assistant_committed" or kind == "run_finished" then
    render(k)
  end
end

--- Renders the children a resume reported (octet/session/resume's
--- children) in session s's chat.
function M.resumed(s, children)
  for _, ch in ipairs(type(children) == "table" and children or {}) do
    if type(ch) == "table" and type(ch.sessionId) == "string" then
      local k = kid(ch.sessionId, s)
      if k.top ~= s then
        -- The session was opened again (a new chat): a new block there.
        k.top, k.region, k.hl, k.path_hl, k.act_hl = s, nil, nil, nil, nil
      end
      k.parent = s.id
      k.path = ch.agentPath or k.path
      k.status = ch.status or k.status
      k.task = ch.task or k.task
      render(k)
    end
  end
end

--- The children (and deeper descendants) of top-level session s, in the
--- order they appeared.
function M.of(s)
  local out = {}
  for _, sid in ipairs(order) do
    local k = kids[sid]
    if k and k.top == s then
      table.insert(out, k)
    end
  end
  return out
end

--- The child whose block holds row (0-based) of session s's chat, or nil.
function M.at(s, row)
  for _, k in ipairs(M.of(s)) do
    local a, b = s.chat:region_rows(k.region)
    if a and row >= a and row <= b then
      return k
    end
  end
end

--- The server is gone: children it drove are disconnected.
function M.disconnected()
  for _, sid in ipairs(order) do
    local k = kids[sid]
    if k and live[k.status] then
      k.status, k.activity = "disconnected", nil
      render(k)
    end
  end
end

--- The statusline part for top-level session s: "2 subagents running"
--- (pending ones count as running), or nil when none runs.
function M.status(s)
  local n = 0
  for _, k in ipairs(M.of(s)) do
    if k.status == "running" or k.status == "pending" then
      n = n + 1
    end
  end
  if n == 0 then
    return nil
  end
  return n .. (n == 1 and " subagent" or " subagents") .. " running"
end

--- Whether child k is still pending, running or idle.
function M.live(k)
  return live[k.status] == true
end

--- Stops child k: octet/cancel with its run (request is octet's).
function M.stop(k, request, notify)
  if not k.run_id or not live[k.status] then
    return notify(k.path .. " is " .. k.status .. (k.run_id and "" or " and has no run to stop yet"),
      vim.log.levels.WARN)
  end
  request("octet/cancel", { runId = k.run_id }, function(err)
    if err then
      notify("cannot stop " .. k.path .. ": " .. err, vim.log.levels.WARN)
    end
  end)
end

--- One line of the :OctetAgents list.
function M.label(k)
  return text.line(k.path, 80) .. " [" .. text.line(k.status, 20) .. "]"
    .. (k.task and (" " .. first_line(k.task, 60)) or "")
    .. (k.activity and live[k.status] and (" — " .. k.activity) or "")
end

return M
