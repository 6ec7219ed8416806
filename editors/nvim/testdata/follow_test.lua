-- A new chat follows the stream: :OctetNew opens the chat and the input
-- window, a prompt sent from the input window streams a long answer, and
-- the chat window (not the current one) keeps its cursor on the last line
-- with the last line in view. A chat window whose cursor was moved up
-- stays where it is while the next answer streams; back at the end (G),
-- it follows again. Driven by TestChatFollowsTheStream.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api
T.run(function()
  local octet = T.setup()
  vim.cmd("OctetNew")
  T.wait("the new session's chat", function()
    local s = octet.session()
    return s and vim.fn.bufwinid(s.chat.buf) ~= -1 and vim.fn.bufwinid(vim.fn.bufnr("octet://input")) ~= -1
  end)
  local s = octet.session()
  local win = vim.fn.bufwinid(s.chat.buf)
  local input = vim.fn.bufnr("octet://input")
  T.fact("input_current", api.nvim_get_current_buf() == input)
  local function at(what)
    T.fact(what, {
      cursor = api.nvim_win_get_cursor(win)[1],
      last = api.nvim_buf_line_count(s.chat.buf),
      bottom = vim.fn.line("w$", win),
    })
  end
  local function send(prompt, n)
    api.nvim_set_current_win(vim.fn.bufwinid(input))
    api.nvim_buf_set_lines(input, 0, -1, false, { prompt })
    api.nvim_feedkeys(api.nvim_replace_termcodes("<C-s>", true, false, true), "x", false)
    T.wait("answer " .. n, function()
      return (s.answers or 0) >= n
    end, 60000)
    T.wait_idle(octet)
  end
  send("first", 1)
  at("first")
  -- The user reads further up: the next answer does not move the cursor.
  api.nvim_win_set_cursor(win, { 3, 0 })
  send("second", 2)
  at("second")
  -- Back at the end: following again.
  api.nvim_set_current_win(win)
  vim.cmd("normal! G")
  send("third", 3)
  at("third")
  T.done()
end)
