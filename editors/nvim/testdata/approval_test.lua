-- The edit approval float: a.txt is open with an unsaved line typed;
-- :Octet makes the model edit it; the float shows the diff (filetype
-- diff), the chat and the statusline show the approval pending; "a"
-- approves and the edit lands in the buffer beside the unsaved line, the
-- disk untouched. Then a bash call is denied with "r" and a reason typed
-- at the prompt (octet first asks to save a.txt, which is kept unsaved,
-- and the float names it), a third run's approval closes itself when the run is
-- cancelled, and "s" approves an edit for the session (the next edit of
-- the file is not asked). Driven by TestApprovalFloat.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api

local float = T.float

-- Before the bash call octet asks to save a.txt, which has the user's
-- line besides octet's edit: kept unsaved (the disk stays as it was).
local asked = {}
vim.ui.select = function(items, opts, on_choice)
  table.insert(asked, opts.prompt)
  on_choice("Keep unsaved")
end

T.run(function()
  local octet = T.setup()
  vim.cmd("edit " .. vim.fn.fnameescape(T.ws .. "/a.txt"))
  local buf = api.nvim_get_current_buf()
  api.nvim_buf_set_lines(buf, 1, 1, false, { "typed here" })
  vim.cmd("Octet edit a.txt")
  T.wait("the approval float", float)
  local win = float()
  local fbuf = api.nvim_win_get_buf(win)
  T.fact("float_filetype", vim.bo[fbuf].filetype)
  T.fact("float_text", T.text(fbuf))
  T.fact("float_current", api.nvim_get_current_win() == win)
  local s = octet.session()
  T.fact("chat_pending", T.text(s.chat.buf))
  T.fact("statusline_pending", octet.statusline())
  T.armed()
  -- Closing the float keeps the approval pending; :OctetApprovals shows it.
  api.nvim_feedkeys("q", "x", false)
  T.fact("closed_float", float() == nil)
  T.fact("statusline_closed", octet.statusline())
  vim.cmd("OctetApprovals")
  T.wait("the float again", float)
  -- Side by side: a tab with the buffer as it is and as the edit leaves it.
  api.nvim_feedkeys("v", "x", false)
  local wins = api.nvim_tabpage_list_wins(0)
  T.fact("sbs_windows", #wins)
  local sides = {}
  for _, w in ipairs(wins) do
    table.insert(sides, (vim.wo[w].diff and "diff:" or "") .. T.text(api.nvim_win_get_buf(w)))
  end
  T.fact("sbs", sides)
  vim.cmd("tabclose")
  vim.cmd("OctetApprovals")
  T.wait("the float once more", float)
  api.nvim_feedkeys("a", "x", false)
  T.answered(s, 1, "the first answer")
  T.fact("buffer", T.text(buf))
  T.fact("modified", vim.bo[buf].modified)
  T.fact("chat_after", T.text(s.chat.buf))
  T.fact("statusline_after", octet.statusline())

  vim.cmd("Octet now run make")
  T.wait("the bash approval", float)
  T.fact("bash_float", T.text(api.nvim_win_get_buf(float())))
  T.fact("asked", table.concat(asked, "\n"))
  T.armed()
  api.nvim_feedkeys("ruse make instead\r", "x", false)
  T.answered(s, 2, "the second answer")
  T.fact("chat_denied", T.text(s.chat.buf))

  vim.cmd("Octet and again")
  T.wait("the third approval", float)
  vim.cmd("OctetCancel")
  T.wait("the float to close itself", function()
    return float() == nil
  end)
  T.answered(s, 3, "the third answer")
  T.fact("pending_after_cancel", require("octet.approval").pending())
  T.fact("chat_cancelled", T.text(s.chat.buf))

  -- Approve for the session: the next edit of the file is not asked.
  local before = #vim.api.nvim_buf_get_lines(s.chat.buf, 0, -1, false)
  vim.cmd("Octet edit twice")
  T.wait("the session-wide approval", float)
  T.fact("session_keys", T.text(api.nvim_win_get_buf(float())))
  T.armed()
  api.nvim_feedkeys("s", "x", false)
  T.answered(s, 4, "the fourth answer")
  T.fact("chat_session_rule", table.concat(vim.api.nvim_buf_get_lines(s.chat.buf, before, -1, false), "\n"))
  T.fact("buffer_after_rule", T.text(buf))
  T.done()
end)
