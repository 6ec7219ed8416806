-- The approval float arrives while the user types in the input window
-- (insert mode), with keys as nvim_input gives them, as typed: the float
-- takes the focus in normal mode, so its text is never typed into; an
-- "a" typed right as it appears (the user still typing) is not taken as
-- an answer; once the user has paused, "a" approves, and the user is back
-- in the input window in insert mode. Driven by TestApprovalWhileTyping.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api
T.async(function()
  local octet = T.setup()
  vim.cmd("edit " .. vim.fn.fnameescape(T.ws .. "/a.txt"))
  local buf = api.nvim_get_current_buf()
  vim.cmd("OctetChat")
  T.await("the input window", function()
    return api.nvim_buf_get_name(0):match("octet://input$") ~= nil
  end)
  local input = api.nvim_get_current_buf()
  -- Typed: insert mode, the prompt, <C-s> to send (insert mode stays).
  api.nvim_input("iedit a.txt<C-s>")
  T.await("the approval float", function()
    return T.float() ~= nil and api.nvim_get_current_win() == T.float()
  end)
  local win = T.float()
  local fbuf = api.nvim_win_get_buf(win)
  local text = T.text(fbuf)
  T.sleep(50)
  T.fact("mode_in_float", api.nvim_get_mode().mode)
  -- Still typing: the next key arrives as the float shows.
  api.nvim_input("a")
  T.sleep(100)
  local approval = require("octet.approval")
  T.fact("pending_after_early_key", approval.pending())
  T.fact("float_unchanged", api.nvim_win_is_valid(win) and T.text(fbuf) == text)
  T.fact("armed", T.try_await(function()
    return vim.b[fbuf].octet_armed == true
  end, 5000))
  api.nvim_input("a")
  local s = octet.session()
  T.fact("answered", T.try_await(function()
    return (s.answers or 0) >= 1
  end, 20000))
  T.sleep(50)
  T.fact("pending_after", approval.pending())
  T.fact("buffer", T.text(buf))
  T.fact("input_text", T.text(input))
  T.fact("back_in_input", api.nvim_get_current_buf() == input)
  T.fact("mode_after", api.nvim_get_mode().mode)
  T.done()
end)
