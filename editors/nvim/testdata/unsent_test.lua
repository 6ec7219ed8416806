-- A prompt typed in the input window that is not sent stays there: an
-- unreadable #image: attachment, and an image while a run is going
-- (steering is text only). Driven by TestInputKeepsUnsentPrompt.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api
local notes = {}
vim.notify = function(m)
  table.insert(notes, tostring(m))
end
T.run(function()
  local octet = T.setup()
  vim.cmd("OctetChat")
  T.wait("the input window", function()
    return vim.fn.bufwinid("octet://input") ~= -1
  end)
  local input = vim.fn.bufnr("octet://input")
  local function send(lines)
    api.nvim_set_current_win(vim.fn.bufwinid(input))
    api.nvim_buf_set_lines(input, 0, -1, false, lines)
    api.nvim_feedkeys(api.nvim_replace_termcodes("<C-s>", true, false, true), "x", false)
  end
  send({ "what is in #image:missing.png", "and why" })
  T.wait("the refusal", function()
    return #notes > 0
  end)
  T.fact("input_bad_image", T.text(input))

  -- A run waits for an approval; an image typed meanwhile is refused.
  local s = octet.session()
  vim.cmd("Octet run make")
  T.wait("the approval", T.float)
  vim.cmd("close")
  local before = #notes
  local f = assert(io.open(T.ws .. "/shot.png", "wb"))
  f:write("\137PNG\r\n\26\n" .. string.rep("\0", 32))
  f:close()
  send({ "look at #image:shot.png" })
  T.wait("the second refusal", function()
    return #notes > before
  end)
  T.fact("input_steer_image", T.text(input))
  T.fact("notes", table.concat(notes, "\n"))
  vim.cmd("OctetCancel")
  T.wait_idle(octet)
  T.done()
end)
