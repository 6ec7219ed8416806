-- Second Neovim of TestResumedChatKeepsRenamedTitle: :OctetChat resumes
-- the renamed session.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  local octet = T.setup()
  vim.cmd("OctetChat")
  T.wait("the resumed session", function()
    return octet.session() ~= nil
  end)
  local buf = octet.session().chat.buf
  vim.wait(5000, function()
    return vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1]:find("Renamed", 1, true) ~= nil
  end, 20)
  T.fact("title", vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1])
  T.done()
end)
