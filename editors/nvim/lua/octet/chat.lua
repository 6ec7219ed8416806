-- The chat buffer of a session (markdown): prompts and answers streamed in
-- place, reasoning and tool output in folded blocks, file changes with
-- their diffs, recovered output of interrupted attempts in its own marked
-- section, errors with what to do. Blocks are tracked with extmarks, so
-- output of concurrent tool calls lands in its own block.
local M = {}

local api = vim.api
local text = require("octet.text")
local attach = require("octet.attach")
local ns = api.nvim_create_namespace("octet.chat")
local chats = {} -- bufnr -> Chat

local Chat = {}
Chat.__index = Chat

--- Makes buf a markdown buffer. An error of a FileType handler (a
--- markdown ftplugin whose tree-sitter parser is missing) does not stop
--- the chat: the buffer is still markdown, without what failed.
function M.markdown(buf)
  -- Through :setlocal, so the handler's error is this call's, caught
  -- here (set as an option, some versions report it at the next API
  -- call instead).
  local ok, err = pcall(api.nvim_buf_call, buf, function()
    vim.cmd("setlocal filetype=markdown")
  end)
  if not ok then
    vim.schedule(function()
      text.notify("the markdown filetype of the chat failed: " .. tostring(err), vim.log.levels.WARN)
    end)
  end
end

-- The chat buffer's options, variables and autocommands (again after
-- :bdelete, which clears them).
function Chat:setup_buffer()
  local buf = self.buf
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  M.markdown(buf)
  vim.b[buf].octet_session = self.sid
  local group = api.nvim_create_augroup("octet.chat." .. buf, { clear = true })
  -- Folding is window-local: every window showing the chat gets it.
  api.nvim_create_autocmd("BufWinEnter", {
    group = group,
    buffer = buf,
    callback = function()
      M.setup_window(api.nvim_get_current_win())
    end,
  })
  api.nvim_create_autocmd("BufWipeout", {
    group = group,
    buffer = buf,
    callback = function()
      chats[buf] = nil
    end,
  })
  -- :bdelete (or :bunload) empties the buffer and clears its options:
  -- set it up again and let self.reloaded draw the conversation again.
  api.nvim_create_autocmd("BufUnload", {
    group = group,
    buffer = buf,
    callback = function()
      vim.schedule(function()
        if chats[buf] == self and api.nvim_buf_is_valid(buf) then
          self:setup_buffer()
          self:clear()
          if self.reloaded then
            self.reloaded(self)
          end
        end
      end)
    end,
  })
end

--- Creates the chat buffer of session sid.
function M.new(sid, title)
  local buf = api.nvim_create_buf(false, true)
  pcall(api.nvim_buf_set_name, buf, "octet://" .. sid)
  local self = setmetatable({ buf = buf, sid = sid, blocks = {}, calls = {}, cur = nil, provisional = {} }, Chat)
  chats[buf] = self
  self:setup_buffer()
  self.title_line = "# octet · " .. text.line(title or sid)
  self:set_lines(0, -1, { self.title_line })
  self.titled = title ~= nil
  return self
end

--- Empties the chat (its title stays), e.g. to render a rewound
--- conversation again.
function Chat:clear()
  api.nvim_buf_clear_namespace(self.buf, ns, 0, -1)
  self:set_lines(0, -1, { self.title_line })
  self.blocks, self.calls, self.cur, self.provisional = {}, {}, nil, {}
  self.answer_header, self.changed, self.fold_tick = false, nil, nil
  self.plan_region, self.retrying = nil, nil
end

--- Sets the title line.
function Chat:set_title(title)
  self.titled = true
  self.title_line = "# octet · " .. text.line(title)
  self:set_lines(0, 1, { self.title_line })
end

-- The windows showing the chat with the cursor on its last line: they
-- follow the stream (a window whose cursor was moved up stays put).
function Chat:at_end()
  local last, wins = api.nvim_buf_line_count(self.buf), {}
  for _, win in ipairs(api.nvim_list_wins()) do
    if api.nvim_win_get_buf(win) == self.buf and api.nvim_win_get_cursor(win)[1] >= last then
      table.insert(wins, win)
    end
  end
  return wins
end

-- Moves the cursor of wins (Chat:at_end before a change) to the last line.
function Chat:follow(wins)
  local last = api.nvim_buf_line_count(self.buf)
  for _, win in ipairs(wins) do
    if api.nvim_win_is_valid(win) and api.nvim_win_get_buf(win) == self.buf then
      api.nvim_win_set_cursor(win, { last, 0 })
    end
  end
end

-- Every change of the chat's text goes through here or Chat:write.
function Chat:set_lines(s, e, lines)
  local wins = self:at_end()
  vim.bo[self.buf].modifiable = true
  api.nvim_buf_set_lines(self.buf, s, e, false, lines)
  vim.bo[self.buf].modifiable = false
  self:follow(wins)
end

function Chat:last_row()
  return api.nvim_buf_line_count(self.buf) - 1
end

--- Appends lines at the end of the buffer; returns the first new row.
function Chat:append(lines)
  local n = api.nvim_buf_line_count(self.buf)
  local last = api.nvim_buf_get_lines(self.buf, n - 1, n, false)[1]
  if n == 1 and last == "" then
    self:set_lines(0, 1, lines)
    return 0
  end
  self:set_lines(n, n, lines)
  return n
end

-- A block: header row mark, insertion-point mark (moves right as text is
-- inserted at it), prefix of its content lines, whether it folds.
function Chat:block(kind, header, opts)
  opts = opts or {}
  local lines = { "" }
  if header then
    table.insert(lines, header)
  end
  table.insert(lines, opts.prefix or "")
  local first = self:append(lines)
  local hrow = header and first + 1 or nil
  local crow = self:last_row()
  local b = {
    kind = kind,
    prefix = opts.prefix or "",
    fold = opts.fold,
    start = api.nvim_buf_set_extmark(self.buf, ns, hrow or crow, 0, { right_gravity = false }),
    head = hrow and api.nvim_buf_set_extmark(self.buf, ns, hrow, 0, { right_gravity = false }),
    tail = api.nvim_buf_set_extmark(self.buf, ns, crow, #(opts.prefix or ""), {}),
    empty = true,
  }
  table.insert(self.blocks, b)
  self.fold_tick = nil
  return b
end

--- Inserts text at the end of block b (newlines start prefixed lines).
function Chat:write(b, chunk)
  if chunk == nil or chunk == "" then
    return
  end
  local pos = api.nvim_buf_get_extmark_by_id(self.buf, ns, b.tail, {})
  local lines = vim.split(chunk, "\n", { plain = true })
  for i = 2, #lines do
    lines[i] = b.prefix .. lines[i]
  end
  local wins = self:at_end()
  vim.bo[self.buf].modifiable = true
  api.nvim_buf_set_text(self.buf, pos[1], pos[2], pos[1], pos[2], lines)
  if b.prefix == "" then
    self:escape_turns(pos[1], pos[1] + #lines - 1)
  end
  vim.bo[self.buf].modifiable = false
  self:follow(wins)
  b.empty = false
  self.fold_tick = nil
end

--- Escapes, in rows first..last of an unprefixed block (the model's
--- text), a line that would read as the chat's own turn heading ("## You",
--- "## octet"): the model cannot show a prompt the user never sent.
function Chat:escape_turns(first, last)
  for row = first, last do
    local line = api.nvim_buf_get_lines(self.buf, row, row + 1, false)[1] or ""
    if line:match("^##%s+You") or line:match("^##%s+octet") then
      api.nvim_buf_set_text(self.buf, row, 0, row, 0, { "\\" })
    end
  end
end

--- Replaces the header line of block b.
function Chat:set_header(b, header)
  if not b.head then
    return
  end
  local row = api.nvim_buf_get_extmark_by_id(self.buf, ns, b.head, {})[1]
  self:set_lines(row, row + 1, { header })
end

--- Appends a region of lines that set_region() replaces in place later
--- (a delegated child's block); returns its handle.
function Chat:region(lines)
  self:ensure_answer_header()
  local first = self:append(vim.list_extend({ "" }, lines)) + 1
  local r = {}
  r.start = api.nvim_buf_set_extmark(self.buf, ns, first, 0, { right_gravity = false })
  r.stop = api.nvim_buf_set_extmark(self.buf, ns, first + #lines - 1, 0, { right_gravity = false })
  self.cur = nil
  return r
end

--- The first and last row of region r (nil when it is gone).
function Chat:region_rows(r)
  if not r then
    return nil
  end
  local s = api.nvim_buf_get_extmark_by_id(self.buf, ns, r.start, {})[1]
  local e = api.nvim_buf_get_extmark_by_id(self.buf, ns, r.stop, {})[1]
  if not s or not e then
    return nil
  end
  return s, e
end

--- Replaces region r's lines; returns the row of its first line.
function Chat:set_region(r, lines)
  local s = api.nvim_buf_get_extmark_by_id(self.buf, ns, r.start, {})[1]
  local e = api.nvim_buf_get_extmark_by_id(self.buf, ns, r.stop, {})[1]
  if not s or not e then
    return nil
  end
  self:set_lines(s, e + 1, lines)
  api.nvim_buf_set_extmark(self.buf, ns, s, 0, { id = r.start, right_gravity = false })
  api.nvim_buf_set_extmark(self.buf, ns, s + #lines - 1, 0, { id = r.stop, right_gravity = false })
  self.fold_tick = nil
  return s
end

local plan_marks = { completed = "[x]", in_progress = "[>]", pending = "[ ]" }

--- The model's plan ({explanation?, plan = {{step, status}}}, a plan
--- event or resume's plan): a checklist block, replaced in place by each
--- later plan.
function Chat:plan(p)
  local head = "**Plan**"
  if type(p.explanation) == "string" and p.explanation ~= "" then
    head = head .. " — " .. text.line(p.explanation, 200)
  end
  local lines = { head }
  for _, st in ipairs(type(p.plan) == "table" and p.plan or {}) do
    if type(st) == "table" then
      table.insert(lines, "- " .. (plan_marks[st.status] or "[ ]") .. " " .. text.line(st.step or "", 300))
    end
  end
  if self:region_rows(self.plan_region) then
    self:set_region(self.plan_region, lines)
  else
    self.plan_region = self:region(lines)
  end
end

--- Deletes block b's lines (a provisional attempt the server replaced).
function Chat:remove(b)
  local s = api.nvim_buf_get_extmark_by_id(self.buf, ns, b.start, {})[1]
  local e = api.nvim_buf_get_extmark_by_id(self.buf, ns, b.tail, {})[1]
  -- The blank separator line before the block goes too.
  self:set_lines(math.max(s - 1, 0), e + 1, {})
  for i, x in ipairs(self.blocks) do
    if x == b then
      table.remove(self.blocks, i)
      break
    end
  end
  self.fold_tick = nil
end

--- A user prompt (or steering / follow-up input), and the names of its
--- attachments under it.
function Chat:user(prompt, label, attachments)
  if not self.titled then
    -- As the server titles an untitled session: its first prompt's line.
    self:set_title(text.line((vim.trim(prompt):gsub("\n.*", "")), 80))
  end
  self:append({ "", "## " .. (label or "You"), "" })
  self:append(vim.split(prompt, "\n", { plain = true }))
  if attachments and #attachments > 0 then
    self:append({ "", "> Attached: " .. text.line(table.concat(attachments, " · ")) })
  end
  self.cur = nil
  self.answer_header = false
end

function Chat:ensure_answer_header()
  if not self.answer_header then
    self:append({ "", "## octet" })
    self.answer_header = true
  end
end

--- Streams answer text (channel "text") or reasoning.
function Chat:delta(channel, delta)
  self:retried()
  self:ensure_answer_header()
  local kind = channel == "reasoning" and "reasoning" or "text"
  if not self.cur or self.cur.kind ~= kind then
    if kind == "reasoning" then
      self.cur = self:block("reasoning", "> Reasoning", { prefix = "> ", fold = true })
    else
      self.cur = self:block("text")
    end
    table.insert(self.provisional, self.cur)
  end
  self:write(self.cur, delta)
end

--- The streamed assistant message is durable.
function Chat:commit()
  self.provisional = {}
  self.cur = nil
end

--- A main-request retry: the failed attempt's provisional output goes.
function Chat:discard()
  for i = #self.provisional, 1, -1 do
    self:remove(self.provisional[i])
  end
  self.provisional = {}
  self.cur = nil
end

local function summary(args)
  if type(args) ~= "table" then
    return ""
  end
  return text.first_line(args.path or args.command or args.pattern or args.url)
end

--- Remembers a provisional tool call's name and arguments.
function Chat:call_delta(id, name, delta)
  local c = self.calls[id] or { args = "" }
  self.calls[id] = c
  c.name = name or c.name
  c.args = c.args .. (delta or "")
end

local function call_header(c)
  -- The name is the model's too: one line, bounded, like the argument.
  local s = "### " .. text.line(c.tool or c.name or "tool", 60)
  if c.what and c.what ~= "" then
    s = s .. " · " .. c.what
  end
  return s .. " · " .. c.status
end

function Chat:call(id)
  local c = self.calls[id]
  if not c then
    c = { args = "" }
    self.calls[id] = c
  end
  return c
end

--- A tool call starts: its block holds the output, folded.
function Chat:tool_start(id, tool)
  self:retried()
  self:ensure_answer_header()
  local c = self:call(id)
  c.tool = tool
  local ok, args = pcall(vim.json.decode, c.args ~= "" and c.args or "{}")
  c.what = ok and summary(args) or ""
  c.status = c.status or "running"
  c.block = self:block("tool", call_header(c), { prefix = "    ", fold = true })
  self.cur = nil
end

function Chat:tool_status(id, status)
  local c = self:call(id)
  c.status = status
  if c.block then
    self:set_header(c.block, call_header(c))
  end
end

function Chat:tool_output(id, output)
  local c = self:call(id)
  if not c.block then
    self:tool_start(id, c.name)
  end
  self:write(c.block, output)
end

--- A tool call ends; changes are shown with their diffs.
function Chat:tool_finish(id, is_error, changes)
  local c = self:call(id)
  if not c.block then
    self:tool_start(id, c.name)
  end
  if not (c.status or ""):match("^denied") then
    self:tool_status(id, is_error and "error" or "done")
  end
  for _, ch in ipairs(changes or {}) do
    self:change(ch)
  end
  self.cur = nil
end

--- One file change: "Changed path (kind)" and its diff, or, when the
--- diff is omitted (a directory, a binary file, one over the bound), the
--- line saying why after it: it is no diff to fence.
function Chat:change(ch)
  self.changed = self.changed or {}
  table.insert(self.changed, ch.path)
  local head = "**Changed " .. text.line(ch.path) .. "** (" .. text.line(ch.kind) .. ")"
  if ch.diffOmitted == true then
    self:append({ "", head .. ": " .. text.line(ch.diff or "") })
    return
  end
  local lines = { "", head, "```diff" }
  vim.list_extend(lines, vim.split((ch.diff or ""):gsub("\n$", ""), "\n", { plain = true }))
  table.insert(lines, "```")
  self:append(lines)
end

--- A denial or other policy decision shown under the call.
function Chat:decision(id, decision, reason)
  if decision == "denied" then
    self:tool_status(id, "denied" .. (reason and (" (" .. text.line(reason) .. ")") or ""))
  end
end

--- Shows a pending approval; returns a handle for resolved().
function Chat:approval(p)
  self:ensure_answer_header()
  if self.calls[p.callId] and self.calls[p.callId].block then
    self:tool_status(p.callId, "waiting for approval")
  end
  local row = self:append({ "", "> **Approval pending:** " .. text.line(p.title or p.tool)
    .. " — a float asks; :OctetApprovals shows it again" })
  local mark = api.nvim_buf_set_extmark(self.buf, ns, row + 1, 0, { right_gravity = false })
  self.cur = nil
  return mark
end

function Chat:approval_resolved(mark, outcome, call_id, approved)
  local c = call_id and self.calls[call_id]
  if c and c.block and c.status == "waiting for approval" then
    self:tool_status(call_id, approved and "running" or "not run")
  end
  local row = api.nvim_buf_get_extmark_by_id(self.buf, ns, mark, {})[1]
  if row then
    self:set_lines(row, row + 1, { "> Approval: " .. text.line(outcome) })
  end
end

--- Recovered output of an interrupted attempt: its own marked section,
--- never part of the answer.
function Chat:recovered(channel, output, attempt)
  local b = self:block("recovered", "> **Recovered output** (" .. text.line(channel, 20) .. " of interrupted attempt "
    .. text.line(attempt or "?", 20) .. "; not part of the answer)", { prefix = "> ", fold = true })
  self:write(b, output)
  self.cur = nil
end

--- A provider retry event e ("retrying 3/29 in 4 s: …", text.retry) with
--- the key that cancels: one line, replaced in place by the next retry
--- until the answer goes on.
function Chat:retry(e, key)
  local lines = { "> " .. text.retry(e) .. (key and (" — " .. key .. " or :OctetCancel cancels") or "") }
  if self.retrying and self:region_rows(self.retrying.region) then
    self:set_region(self.retrying.region, lines)
  else
    self.retrying = { region = self:region(lines) }
  end
  self.retrying.event = e
end

-- The retries are over (the answer goes on, or the run ended): the line
-- says how many there were ("retried 3 times: …").
function Chat:retried()
  local r = self.retrying
  self.retrying = nil
  if r and self:region_rows(r.region) then
    self:set_region(r.region, { "> " .. text.retry(r.event, true) })
  end
end

--- A notice (retry, info): one quoted line.
function Chat:notice(notice)
  self:append({ "", "> " .. text.line(notice) })
  self.cur = nil
end

--- An error with what to do.
function Chat:error(msg, todo)
  local lines = { "", "> **Error:** " .. text.line((tostring(msg):gsub("\n", " "))) }
  if todo then
    table.insert(lines, "> What to do: " .. todo)
  end
  self:append(lines)
  self.cur = nil
end

--- The run ended.
function Chat:run_end(outcome, err)
  self:retried()
  self:commit()
  if outcome == "failed" then
    self:error(err or "the run failed", "fix the cause above, then send the prompt again (:Octet)")
  elseif outcome == "cancelled" then
    self:notice("Cancelled.")
  elseif outcome == "max_turns" then
    self:notice("Stopped: turn limit reached. Send a follow-up to continue.")
  end
  if self.changed and #self.changed > 0 then
    self:notice("Changed in this run: " .. table.concat(self.changed, ", ") .. " — :OctetDiff to review")
  end
  self.changed = nil
  self.answer_header = false
end

local function rpc_text(v)
  if type(v) ~= "string" then
    return ""
  end
  return v
end

--- Renders a transcript page (octet/session/resume's, oldest first);
--- runs ([{runId, outcome, error?}]) are how its runs that did not
--- complete ended, marked after their last entry as the live chat did.
function Chat:transcript(entries, recovered, runs)
  local ended = {}
  for _, r in ipairs(type(runs) == "table" and runs or {}) do
    if type(r) == "table" and type(r.runId) == "string" then
      ended[r.runId] = r
    end
  end
  entries = entries or {}
  for i, e in ipairs(entries) do
    self:entry(e)
    local next_run = entries[i + 1] and entries[i + 1].runId
    local r = e.runId and ended[e.runId]
    if r and next_run ~= e.runId then
      self:run_end(r.outcome, rpc_text(r.error) ~= "" and r.error or nil)
    end
  end
  for _, r in ipairs(recovered or {}) do
    self:recovered(r.channel, r.text, r.attempt)
  end
  self.answer_header = false
end

-- Renders one transcript entry.
function Chat:entry(e)
  do
    if e.type == "user" or e.type == "steering" or e.type == "follow_up" then
      local label = ({ steering = "You (steering)", follow_up = "You (follow-up)" })[e.type]
      -- The recorded text has the attachments appended: their titles
      -- are shown, not their text.
      local prompt, names = attach.split(rpc_text(e.text))
      for _, im in ipairs(type(e.images) == "table" and e.images or {}) do
        table.insert(names, "image (" .. text.line(im.mimeType or "?", 40) .. ", " .. tostring(tonumber(im.bytes) or 0) .. " bytes)")
      end
      self:user(prompt, label, names)
    elseif e.type == "assistant" then
      for _, it in ipairs(e.items or {}) do
        if it.type == "text" or it.type == "reasoning" then
          self:delta(it.type, rpc_text(it.text))
        elseif it.type == "function_call" then
          self:call_delta(it.callId, it.name, rpc_text(it.arguments))
        end
      end
      self:commit()
    elseif e.type == "tool_result" and type(e.result) == "table" and e.result.tool == "update_plan" then
      local details = e.result.details
      if not e.result.isError and type(details) == "table" then
        self:plan(details)
      end
    elseif e.type == "tool_result" and type(e.result) == "table" then
      local id = e.result.callId
      self:tool_start(id, e.result.tool)
      self:write(self.calls[id].block, rpc_text(e.result.text))
      local details = e.result.details
      if type(details) == "table" and type(details.policy_denial) == "string" then
        -- Denied, not failed: its text says why.
        self:tool_status(id, "denied")
      else
        self:tool_status(id, e.result.isError and "error" or "done")
      end
      if type(details) == "table" and type(details.changes) == "table" then
        for _, ch in ipairs(details.changes) do
          if type(ch) == "table" and type(ch.path) == "string" then
            self:change(ch)
          end
        end
        self.changed = nil
      end
    elseif e.type == "compaction" then
      self:notice("Context compacted.")
    end
  end
end

--- The chat of buffer buf.
function M.of(buf)
  return chats[buf]
end

-- Fold levels of a chat buffer, recomputed when it changed.
local function levels(self)
  local tick = api.nvim_buf_get_changedtick(self.buf)
  if self.fold_tick == tick then
    return self.fold_levels
  end
  local lv = {}
  for _, b in ipairs(self.blocks) do
    if b.fold then
      local s = api.nvim_buf_get_extmark_by_id(self.buf, ns, b.start, {})[1]
      local e = api.nvim_buf_get_extmark_by_id(self.buf, ns, b.tail, {})[1]
      if s and e and e > s then
        lv[s + 1] = ">1"
        for r = s + 2, e + 1 do
          lv[r] = "1"
        end
      end
    end
  end
  self.fold_tick, self.fold_levels = tick, lv
  return lv
end

--- 'foldexpr' of chat windows.
function M.foldexpr(lnum)
  local self = chats[api.nvim_get_current_buf()]
  if not self then
    return "0"
  end
  return levels(self)[lnum] or "0"
end

--- Sets the chat window's folding.
function M.setup_window(win)
  vim.wo[win].foldmethod = "expr"
  vim.wo[win].foldexpr = "luaeval(\"require'octet.chat'.foldexpr(_A)\", v:lnum)"
  vim.wo[win].foldlevel = 0
  vim.wo[win].foldenable = true
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
end

return M
