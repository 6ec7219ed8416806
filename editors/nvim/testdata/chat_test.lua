-- A prompt streams into the chat buffer (more than one update), the
-- reasoning is in a closed fold, and a second prompt continues the same
-- session. Driven by TestChatStreamsAndContinues.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  local octet = T.setup()
  local s = T.start(octet, "Octet first prompt")
  local updates = 0
  vim.api.nvim_buf_attach(s.chat.buf, false, {
    on_lines = function()
      updates = updates + 1
    end,
  })
  T.wait_idle(octet)
  T.fact("first_sid", s.id)
  T.fact("updates", updates)
  vim.cmd("OctetChat")
  local win = vim.fn.bufwinid(s.chat.buf)
  T.fact("chat_shown", win ~= -1)
  local text = T.text(s.chat.buf)
  T.fact("chat1", text)
  local row
  for i, l in ipairs(vim.api.nvim_buf_get_lines(s.chat.buf, 0, -1, false)) do
    if l == "> Reasoning" then
      row = i
    end
  end
  T.fact("reasoning_row", row)
  if row then
    vim.api.nvim_set_current_win(win)
    T.fact("reasoning_folded", vim.fn.foldclosed(row) ~= -1)
    T.fact("reasoning_fold_end", vim.fn.foldclosedend(row))
  end
  vim.cmd("Octet second prompt")
  T.answered(s, 2, "the second answer")
  T.fact("second_sid", octet.session().id)
  T.fact("chat2", T.text(s.chat.buf))
  -- The input window: text typed there is sent with <C-s>.
  local input = vim.fn.bufnr("octet://input")
  T.fact("input_shown", vim.fn.bufwinid(input) ~= -1)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(input))
  vim.api.nvim_buf_set_lines(input, 0, -1, false, { "third prompt", "on two lines" })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<C-s>", true, false, true), "x", false)
  T.fact("input_after_send", T.text(input))
  T.answered(s, 3, "the third answer")
  T.fact("chat3", T.text(s.chat.buf))
  T.fact("statusline", octet.statusline())
  T.done()
end)
