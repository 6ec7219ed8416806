-- Delegated child agents in the parent's chat. OCTET_TEST_CASE "show":
-- the root spawns a child that reads notes.txt and answers; the chat
-- shows the child's block (path, status, task), its activity while it
-- works, and when it ends its status, answer and usage. "stop": the
-- child stalls; :OctetAgents picks it and "stop" sends octet/cancel with
-- the child's run; its block shows cancelled. Driven by agents_test.go.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api

T.run(function()
  local octet = T.setup({ cmd = { T.bin, "lsp", "--effect-policy", "unsafe_host" }, mode = "full" })
  local agents = require("octet.agents")
  -- The broker's decision on each call (tool_started comes before it).
  local decided = {}
  local approval = require("octet.approval")
  local on_decided = approval.decided
  approval.decided = function(sid, call_id, decision, reason)
    decided[call_id] = decision
    return on_decided(sid, call_id, decision, reason)
  end
  local s = T.start(octet, "Octet ROOT-PROMPT delegate it")
  -- Every child-block line the chat ever showed (activity is transient).
  local seen, seen_list = {}, {}
  api.nvim_buf_attach(s.chat.buf, false, {
    on_lines = function(_, buf, _, first, _, last)
      for _, l in ipairs(api.nvim_buf_get_lines(buf, first, last, false)) do
        if (l:find("↳", 1, true) or l:find("▸", 1, true)) and not seen[l] then
          seen[l] = true
          table.insert(seen_list, l)
        end
      end
    end,
  })
  if os.getenv("OCTET_TEST_CASE") == "approve" then
    -- The child's write is held until the session is tightened to
    -- auto-read (the Go test watches for the gate file): then it asks.
    -- Tightened while the root waits (before, agents_wait would be
    -- refused: delegation is full access only).
    T.wait("the root's agents_wait admitted", function()
      return decided.w1 ~= nil
    end, 60000)
    if decided.w1 ~= "allowed" then
      T.fail("the root's agents_wait was " .. decided.w1)
    end
    local tightened = false
    octet.set_mode("auto-read", function(err)
      tightened = err == nil
      local f = assert(io.open(os.getenv("OCTET_TEST_GATE"), "w"))
      f:close()
    end)
    T.wait("the session tightened", function()
      return tightened
    end)
    local float = T.float
    if not vim.wait(60000, float, 20) then
      T.fact("chat", T.text(s.chat.buf))
      T.fact("child", agents.label(agents.of(s)[1]))
      T.fail("timed out waiting for the child's approval float")
    end
    local fbuf = api.nvim_win_get_buf(float())
    T.fact("float_text", T.text(fbuf))
    local hl = api.nvim_buf_get_extmarks(fbuf, api.nvim_create_namespace("octet.approval"), { 0, 0 }, { 0, -1 }, { details = true })
    T.fact("float_first_hl", #hl > 0 and hl[1][4].hl_group or "")
    T.armed()
    api.nvim_feedkeys("a", "x", false)
    T.wait_idle(octet)
  elseif os.getenv("OCTET_TEST_CASE") == "stop" then
    T.wait("the child's run", function()
      local k = agents.of(s)[1]
      return k and k.run_id ~= nil and k.status == "running"
    end, 60000)
    local k = agents.of(s)[1]
    T.fact("child_run", k.run_id)
    T.fact("root_run", s.run_id)
    T.fact("statusline_running", octet.statusline())
    local sent = {}
    local request = octet.request
    octet.request = function(method, params, cb)
      table.insert(sent, { method = method, runId = params and params.runId })
      return request(method, params, cb)
    end
    local prompts = {}
    vim.ui.select = function(items, opts, on_choice)
      local labels = {}
      for _, it in ipairs(items) do
        table.insert(labels, opts.format_item and opts.format_item(it) or it)
      end
      table.insert(prompts, { prompt = opts.prompt, items = labels })
      on_choice(items[1])
    end
    vim.cmd("OctetAgents")
    octet.request = request -- what the stop sent, nothing later
    T.fact("select", prompts)
    T.fact("sent", sent)
    T.wait("the child cancelled", function()
      return k.status == "cancelled"
    end, 60000)
    T.wait_idle(octet)
  else
    T.wait_idle(octet)
    local k = agents.of(s)[1]
    T.wait("the child's final status", function()
      return k and k.status == "completed"
    end, 30000)
    -- gX on the child's block names it (it has ended: nothing to stop);
    -- elsewhere it finds no block.
    vim.cmd("OctetChat")
    local win = vim.fn.bufwinid(s.chat.buf)
    api.nvim_set_current_win(win)
    local notes = {}
    local notify = vim.notify
    vim.notify = function(msg)
      table.insert(notes, msg)
    end
    local row = s.chat:region_rows(k.region)
    api.nvim_win_set_cursor(win, { row + 2, 0 })
    api.nvim_feedkeys("gX", "x", false)
    api.nvim_win_set_cursor(win, { 1, 0 })
    api.nvim_feedkeys("gX", "x", false)
    vim.notify = notify
    T.fact("gx_notes", notes)
    -- Opened again after a restart, from octet/session/resume: the
    -- resume's children get their blocks in the new chat.
    T.fact("chat", T.text(s.chat.buf))
    octet.stop(10000)
    T.wait("octet lsp's exit noticed", function()
      return octet.state.conn == nil
    end)
    octet.state.sessions[s.id], octet.state.current = nil, nil
    vim.cmd("Octet")
    T.wait("the session resumed", function()
      local r = octet.session()
      return r and r ~= s and r.policy == "unsafe_host" and T.text(r.chat.buf):find("▸ root/worker1", 1, true) ~= nil
    end)
    T.fact("resumed_chat", T.text(octet.session().chat.buf))
  end
  T.fact("statusline_after", octet.statusline())
  T.fact("seen", seen_list)
  if not T.facts().chat then
    T.fact("chat", T.text(s.chat.buf))
  end
  s = octet.session() -- the resumed one in the "show" case
  local k = agents.of(s)[1]
  local row = s.chat:region_rows(k.region)
  local marks = api.nvim_buf_get_extmarks(s.chat.buf, api.nvim_create_namespace("octet.agents"), { row, 0 }, { row, -1 }, { details = true })
  local groups = {}
  for _, m in ipairs(marks) do
    table.insert(groups, m[4].hl_group)
  end
  T.fact("status_groups", groups)
  T.fact("linked", vim.fn.synIDattr(vim.fn.synIDtrans(vim.fn.hlID(agents.highlights[k.status])), "name"))
  T.done()
end)
