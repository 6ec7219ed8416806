-- Second Neovim of TestSessionsResumeAndPicker (same data directory):
-- the first :Octet resumes the workspace's last session (beta, its
-- transcript rendered); :OctetSessions resumes alpha, renames it, forks
-- it and deletes the fork. vim.ui.select and vim.ui.input are replaced
-- the way picker plugins (telescope-ui-select, fzf-lua, snacks) do.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local picks = {}
vim.ui.select = function(items, opts, on_choice)
  local want = table.remove(picks, 1)
  for i, it in ipairs(items) do
    local text = opts.format_item and opts.format_item(it) or tostring(it)
    if text:find(want, 1, true) then
      return vim.schedule(function()
        on_choice(it, i)
      end)
    end
  end
  T.fail("no item matches " .. want .. " in " .. vim.inspect(vim.tbl_map(opts.format_item or tostring, items)))
end
vim.ui.input = function(_, on_confirm)
  vim.schedule(function()
    on_confirm("alpha renamed")
  end)
end

local function pick(...)
  picks = { ... }
  vim.cmd("OctetSessions")
  T.wait("the picker to be used", function()
    return #picks == 0
  end)
end

T.run(function()
  local octet = T.setup()
  local s = T.start(octet, "Octet continue please")
  T.answered(s, 1, "the answer")
  T.fact("resumed", s.id)
  T.fact("resumed_chat", T.text(s.chat.buf))

  pick("alpha task", "Resume")
  T.wait("alpha resumed and shown", function()
    return octet.session().id ~= s.id and vim.fn.bufwinid(octet.session().chat.buf) ~= -1
  end)
  local a = octet.session()
  T.fact("picked", a.id)
  T.fact("picked_chat", T.text(a.chat.buf))
  T.fact("chat_shown", vim.fn.bufwinid(a.chat.buf) ~= -1)
  vim.cmd("Octet back to alpha")
  T.answered(a, 1, "the alpha answer")

  pick("alpha task", "Rename")
  T.wait("the rename", function()
    return a.title == "alpha renamed"
  end)
  pick("alpha renamed", "Fork")
  T.wait("the fork", function()
    return octet.session().id ~= a.id and vim.fn.bufwinid(octet.session().chat.buf) ~= -1
  end)
  local f = octet.session()
  T.fact("fork", f.id)
  T.fact("fork_chat", T.text(f.chat.buf))
  pick(f.id, "Delete", "Delete")
  T.wait("the delete", function()
    return octet.state.sessions[f.id] == nil
  end)
  local list = octet.state.conn:request_sync("octet/session/list", { cwd = T.ws })
  local ids = {}
  for _, it in ipairs(list.sessions) do
    table.insert(ids, it.sessionId .. "=" .. it.title)
  end
  T.fact("listed", table.concat(ids, ","))

  -- :OctetModel picks from octet/models.
  picks = { "gpt-4.1  " }
  vim.cmd("OctetModel")
  T.wait("the model", function()
    return octet.session() ~= nil and octet.session().model == "gpt-4.1"
  end)
  T.fact("statusline_model", octet.statusline())
  T.done()
end)
