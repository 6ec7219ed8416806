-- A markdown FileType handler that fails (as the markdown ftplugin of a
-- Neovim whose tree-sitter parser is missing does): the chat and the
-- input window still work. Driven by TestChatSurvivesFiletypeErrors.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local notes = {}
vim.notify = function(msg)
  table.insert(notes, msg)
end
vim.api.nvim_create_autocmd("FileType", {
  pattern = "markdown",
  callback = function()
    error('Parser could not be created for buffer and language "markdown"')
  end,
})
T.run(function()
  local octet = T.setup()
  -- The failing handler reports its error; the commands go on.
  pcall(vim.cmd, "Octet hello")
  T.wait("a session", function()
    return octet.session() ~= nil
  end)
  local s = octet.session()
  T.wait_idle(octet)
  pcall(vim.cmd, "OctetChat")
  T.fact("chat", T.text(s.chat.buf))
  T.fact("input", vim.fn.bufwinid(vim.fn.bufnr("octet://input")) ~= -1)
  T.fact("notes", table.concat(notes, "\n"))
  T.done()
end)
