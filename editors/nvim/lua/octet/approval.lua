-- Approvals: octet/confirmEffect requests shown in a float with the
-- syntax-highlighted diff (or the command), answered with keys. A pending
-- approval stays visible in the chat and the statusline when its float is
-- closed (:OctetApprovals shows it again); one withdrawn or expired by the
-- server closes itself.
local M = {}

local api = vim.api
local config = require("octet.config")
local text = require("octet.text")

local pending = {} -- ordered list of {p, responders = {respond}, ids = {}, chat, mark, win, buf}

local function find(pred)
  for i, a in ipairs(pending) do
    if pred(a) then
      return a, i
    end
  end
end

local function changed()
  vim.cmd("redrawstatus!")
  pcall(vim.api.nvim_exec_autocmds, "User", { pattern = "OctetApproval", modeline = false })
end

local uv = vim.uv or vim.loop

-- When the last key was typed (vim.on_key): a float that pops up is armed
-- only once the user has paused typing.
local last_key = 0
local on_key_ns

local function watch_keys()
  if on_key_ns then
    return
  end
  on_key_ns = api.nvim_create_namespace("octet.approval.keys")
  vim.on_key(function()
    last_key = uv.now()
  end, on_key_ns)
end

-- Takes the user out of what they were doing so the float gets its keys
-- in normal mode: insert, replace and terminal mode end (the float's text
-- is never typed into), visual mode ends. Returns where to go back to, or
-- nil when the float must wait (command line, an operator, a prompt).
local function leave_mode()
  local mode = api.nvim_get_mode()
  local m = mode.mode
  if mode.blocking then
    return nil
  end
  local from = { win = api.nvim_get_current_win(), cursor = api.nvim_win_get_cursor(0) }
  local c = m:sub(1, 1)
  if c == "i" or c == "R" or c == "t" then
    from.insert = c == "i" or c == "R"
    vim.cmd("stopinsert")
  elseif c == "v" or c == "V" or c == "\22" or c == "s" or c == "S" or c == "\19" then
    vim.cmd("normal! \27")
  elseif m ~= "n" then
    return nil -- "c", "no", "r", "!": wait until it is over
  end
  return from
end

-- Back where the user was when a float took the focus: their window, and
-- insert mode at the same place when they were typing.
local function go_back(from)
  if not from or not api.nvim_win_is_valid(from.win) then
    return
  end
  api.nvim_set_current_win(from.win)
  if from.insert then
    local buf = api.nvim_win_get_buf(from.win)
    local row = math.min(from.cursor[1], api.nvim_buf_line_count(buf))
    local line = api.nvim_buf_get_lines(buf, row - 1, row, false)[1] or ""
    if from.cursor[2] >= #line then
      api.nvim_win_set_cursor(from.win, { row, #line })
      vim.cmd("startinsert!")
    else
      api.nvim_win_set_cursor(from.win, { row, from.cursor[2] })
      vim.cmd("startinsert")
    end
  end
end

local function close_float(a)
  local was_current = a.win and api.nvim_get_current_win() == a.win
  if a.win and api.nvim_win_is_valid(a.win) then
    api.nvim_win_close(a.win, true)
  end
  a.win = nil
  if a.timer and not a.timer:is_closing() then
    a.timer:stop()
    a.timer:close()
  end
  a.timer = nil
  if was_current then
    go_back(a.from)
  end
  a.from = nil
end

local function remove(a, text, approved)
  close_float(a)
  local _, i = find(function(x)
    return x == a
  end)
  if i then
    table.remove(pending, i)
  end
  if a.chat and a.mark then
    a.chat:approval_resolved(a.mark, text, a.p.callId, approved)
  end
  changed()
end

--- Answers approval a with decision ("approve", "approve_for_session",
--- "deny") and an optional reason.
function M.decide(a, decision, reason)
  local answer = { decision = decision, digest = a.p.digest }
  if reason and reason ~= "" then
    answer.reason = reason
  end
  for _, respond in ipairs(a.responders) do
    respond(answer)
  end
  local text = ({ approve = "approved", approve_for_session = "approved for this session", deny = "denied" })[decision]
  if reason and reason ~= "" then
    text = text .. " — " .. reason
  end
  remove(a, text .. " (" .. (a.p.title or a.p.tool) .. ")", decision ~= "deny")
end

local function body(p)
  local lines = {}
  if type(p.agentPath) == "string" and p.agentPath ~= "" then
    -- A delegated child asks (its approvals come to the parent session).
    table.insert(lines, "Subagent " .. text.line(p.agentPath) .. " asks"
      .. (type(p.childSessionId) == "string" and (" (session " .. text.line(p.childSessionId) .. ")") or "") .. ":")
  end
  -- One line each, nothing cut: the whole title stays in view.
  table.insert(lines, text.line(p.title or p.tool) .. "   [" .. text.line(p.tool) .. ", " .. text.line(p.effect) .. "]")
  if type(p.detail) == "string" and p.detail ~= "" then
    vim.list_extend(lines, vim.split(p.detail, "\n", { plain = true }))
  end
  if type(p.diff) == "string" and p.diff ~= "" then
    table.insert(lines, "")
    vim.list_extend(lines, vim.split(p.diff:gsub("\n$", ""), "\n", { plain = true }))
  end
  local k = config.options.keymaps
  local keys = "[" .. k.approve .. "] approve  "
  if type(p.ruleScope) == "table" then
    keys = keys .. "[" .. k.approve_session .. "] approve for session  "
  end
  keys = keys .. "[" .. k.deny .. "] deny  [" .. k.deny_reason .. "] deny with reason  ["
    .. k.side_by_side .. "] side by side  [" .. k.close .. "] close"
  table.insert(lines, "")
  table.insert(lines, keys)
  return lines
end

-- patched applies a unified diff's hunks to lines (the side-by-side view).
local function patched(lines, diff)
  local out, src = {}, 1
  local dl = vim.split(diff, "\n", { plain = true })
  local i = 1
  while i <= #dl do
    local old = dl[i]:match("^@@ %-(%d+)")
    if old then
      old = tonumber(old)
      if old == 0 then
        old = 1
      end
      while src < old do
        table.insert(out, lines[src])
        src = src + 1
      end
      i = i + 1
      while i <= #dl and not dl[i]:match("^@@") do
        local c, rest = dl[i]:sub(1, 1), dl[i]:sub(2)
        if c == " " then
          table.insert(out, rest)
          src = src + 1
        elseif c == "-" then
          src = src + 1
        elseif c == "+" then
          table.insert(out, rest)
        end
        i = i + 1
      end
    else
      i = i + 1
    end
  end
  while src <= #lines do
    table.insert(out, lines[src])
    src = src + 1
  end
  return out
end

--- Opens a tab with the file as it is and as the change would leave it.
function M.side_by_side(a)
  local p = a.p
  if type(p.diff) ~= "string" or p.diff == "" then
    return vim.notify("octet: this approval has no diff", vim.log.levels.INFO)
  end
  local path = p.diff:match("\n%+%+%+ b/([^\n]+)") or ""
  local root = require("octet.documents").root() or vim.fn.getcwd()
  local file = path:sub(1, 1) == "/" and path or (root .. "/" .. path)
  local cur = {}
  local b = require("octet.documents").buf_named(file)
  if b and api.nvim_buf_is_loaded(b) then
    cur = api.nvim_buf_get_lines(b, 0, -1, false)
  elseif vim.fn.filereadable(file) == 1 then
    cur = vim.fn.readfile(file)
  end
  -- vim.filetype.match({filename}) is 0.8+ (0.7's takes other arguments).
  local ft = ""
  if vim.fn.has("nvim-0.8") == 1 then
    local okft, m = pcall(vim.filetype.match, { filename = file })
    ft = okft and m or ""
  end
  vim.cmd("tabnew")
  local function scratch(lines, name)
    local sb = api.nvim_get_current_buf()
    api.nvim_buf_set_lines(sb, 0, -1, false, lines)
    vim.bo[sb].buftype, vim.bo[sb].bufhidden, vim.bo[sb].modifiable = "nofile", "wipe", false
    vim.bo[sb].filetype = ft or ""
    pcall(api.nvim_buf_set_name, sb, name)
    vim.cmd("diffthis")
  end
  scratch(cur, "octet://before/" .. path)
  vim.cmd("rightbelow vnew")
  scratch(patched(cur, p.diff), "octet://after/" .. path)
end

-- Arms the float's keys of approval a once the user has not typed for
-- config approval_delay ms (the float shown as long at least): keys typed
-- as a float pops up were meant for something else.
local function arm_later(a)
  local delay = tonumber(config.options.approval_delay) or 0
  local function arm()
    a.armed = true
    if a.buf and api.nvim_buf_is_valid(a.buf) then
      vim.b[a.buf].octet_armed = true
    end
  end
  if delay <= 0 then
    return arm()
  end
  watch_keys()
  local shown = uv.now()
  a.timer = uv.new_timer()
  a.timer:start(50, 50, vim.schedule_wrap(function()
    if a.timer and uv.now() - math.max(shown, last_key) >= delay then
      a.timer:stop()
      a.timer:close()
      a.timer = nil
      arm()
    end
  end))
end

--- Shows approval a (the first pending one without a). popup: the float
--- opens by itself (a new request), not because the user asked: it takes
--- the user out of insert or visual mode first, and its keys work once
--- the user pauses typing; closing it goes back where the user was.
function M.show(a, popup)
  a = a or pending[1]
  if not a then
    return vim.notify("octet: no approval is pending", vim.log.levels.INFO)
  end
  if a.win and api.nvim_win_is_valid(a.win) then
    return api.nvim_set_current_win(a.win)
  end
  if popup then
    local from = leave_mode()
    if not from then
      -- The command line or an operator is going: show it when it is over.
      return vim.defer_fn(function()
        if find(function(x)
          return x == a
        end) and not a.win then
          M.show(a, true)
        end
      end, 200)
    end
    a.from = from
  end
  local lines = body(a.p)
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = "diff"
  if type(a.p.agentPath) == "string" and a.p.agentPath ~= "" then
    api.nvim_buf_add_highlight(buf, api.nvim_create_namespace("octet.approval"), "OctetAgentPath", 0, 0, -1)
  end
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  width = math.min(width + 2, 100, vim.o.columns - 4)
  -- Beside a chat window on the right, the float keeps out of its way.
  local col = nil
  local cwin = a.chat and vim.fn.bufwinid(a.chat.buf) or -1
  if cwin ~= -1 then
    local ccol = api.nvim_win_get_position(cwin)[2]
    if ccol >= 50 then
      width = math.min(width, ccol - 4)
      col = 1
    end
  end
  local height = 0
  for _, l in ipairs(lines) do
    height = height + math.max(1, math.ceil(vim.fn.strdisplaywidth(l) / width))
  end
  height = math.min(height, math.max(vim.o.lines - 6, 3))
  a.buf = buf
  a.win = api.nvim_open_win(buf, true, {
    relative = "editor",
    width = width,
    height = height,
    row = math.max(math.floor((vim.o.lines - height) / 2) - 1, 0),
    col = col or math.floor((vim.o.columns - width) / 2),
    style = "minimal",
    border = "rounded",
  })
  vim.wo[a.win].wrap = true
  vim.b[buf].octet_approval = a.p.digest
  a.armed = false
  if popup then
    arm_later(a)
  else
    a.armed = true
    vim.b[buf].octet_armed = true
  end
  local k = config.options.keymaps
  local function map(key, fn)
    vim.keymap.set("n", key, function()
      if not a.armed then
        return api.nvim_echo({ { "octet: a key typed as the approval appeared is ignored; press it again to answer",
          "WarningMsg" } }, false, {})
      end
      fn()
    end, { buffer = buf, nowait = true, silent = true })
  end
  map(k.approve, function()
    M.decide(a, "approve")
  end)
  map(k.approve_session, function()
    M.decide(a, "approve_for_session")
  end)
  map(k.deny, function()
    M.decide(a, "deny")
  end)
  map(k.deny_reason, function()
    vim.ui.input({ prompt = "Reason for denying: " }, function(reason)
      if reason then
        M.decide(a, "deny", reason)
      end
    end)
  end)
  map(k.side_by_side, function()
    a.from = nil -- to the new tab, not back
    close_float(a)
    M.side_by_side(a)
  end)
  map(k.close, function()
    close_float(a)
  end)
end

--- An octet/confirmEffect request (id) for chat; respond answers it.
function M.request(chat, p, respond, id)
  local a = find(function(x)
    return x.p.digest:lower() == tostring(p.digest):lower()
  end)
  if a then
    table.insert(a.responders, respond)
    a.ids[id] = true
    return
  end
  a = { p = p, responders = { respond }, ids = { [id] = true }, chat = chat }
  table.insert(pending, a)
  changed()
  -- The server sends the request after the call's events; the short
  -- delay lets the chat draw them (and octet servers older than that,
  -- which could send it first) before the float covers it.
  vim.defer_fn(function()
    if find(function(x)
      return x == a
    end) then
      a.mark = chat and chat:approval(p)
      M.show(a, true)
    end
  end, 50)
end

--- The server withdrew its request id ($/cancelRequest: expired, or the
--- run was cancelled).
function M.withdrawn(id)
  local a = find(function(x)
    return x.ids[id]
  end)
  if a then
    a.ids[id] = nil
    if next(a.ids) == nil then
      remove(a, "withdrawn (" .. (a.p.title or a.p.tool) .. ")")
    end
  end
end

--- A policy decision arrived for callId: an approval decided elsewhere
--- (another client, octet.approve, expiry) closes.
function M.decided(sid, call_id, decision, reason)
  local a = find(function(x)
    return x.p.sessionId == sid and x.p.callId == call_id
  end)
  if a then
    local text = ({
      approved = "approved elsewhere",
      approved_for_session = "approved for this session elsewhere",
      approval_denied = "denied elsewhere",
      approval_expired = "expired unanswered (a denial)",
    })[reason or ""] or ("withdrawn (" .. tostring(reason or decision) .. ")")
    remove(a, text .. " (" .. (a.p.title or a.p.tool) .. ")", decision == "allowed")
  end
end

--- Withdraws every approval of session sid (the run ended).
function M.clear(sid)
  for i = #pending, 1, -1 do
    local a = pending[i]
    if sid == nil or a.p.sessionId == sid then
      remove(a, "withdrawn (the run ended)")
    end
  end
end

function M.pending(sid)
  local n = 0
  for _, a in ipairs(pending) do
    if sid == nil or a.p.sessionId == sid then
      n = n + 1
    end
  end
  return n
end

--- The pending approval shown in the current window, or the first one.
function M.current()
  local d = vim.b.octet_approval
  return find(function(x)
    return x.p.digest == d
  end) or pending[1]
end

return M
