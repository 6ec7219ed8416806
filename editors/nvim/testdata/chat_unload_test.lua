-- :bdelete in the chat window after an answer, then again while the next
-- answer streams; then :bdelete in the input window and a third
-- prompt sent from it. Driven by
-- TestChatSurvivesBdelete.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api
T.run(function()
  local octet = T.setup()
  local s = T.start(octet, "Octet first question")
  T.answered(s, 1, "the first answer")
  vim.cmd("OctetChat")
  api.nvim_set_current_win(vim.fn.bufwinid(s.chat.buf))
  vim.cmd("bdelete")
  vim.cmd("Octet second question")
  T.wait("the second answer streaming", function()
    return T.text(s.chat.buf):find("Second answer", 1, true) ~= nil
  end)
  vim.cmd("OctetChat")
  api.nvim_set_current_win(vim.fn.bufwinid(s.chat.buf))
  vim.cmd("bdelete")
  T.answered(s, 2, "the second answer")
  -- The input window closed with :bdelete too; :OctetChat opens it
  -- again and <C-s> sends from it.
  vim.cmd("OctetChat")
  api.nvim_set_current_win(vim.fn.bufwinid("octet://input"))
  vim.cmd("bdelete")
  vim.cmd("OctetChat")
  local input = vim.fn.bufnr("octet://input")
  api.nvim_set_current_win(vim.fn.bufwinid(input))
  api.nvim_buf_set_lines(input, 0, -1, false, { "third question" })
  api.nvim_feedkeys(api.nvim_replace_termcodes("<C-s>", true, false, true), "x", false)
  T.answered(s, 3, "the third answer")
  T.fact("input_buftype", vim.bo[input].buftype)
  T.fact("chat", T.text(s.chat.buf))
  T.done()
end)
