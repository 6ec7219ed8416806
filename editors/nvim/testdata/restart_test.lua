-- octet lsp dies: the user is told, and the next :Octet starts it again,
-- resumes the same session and syncs the open buffer again (a line typed
-- after the restart is what the model reads). Driven by
-- TestServerRestart.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local notes = {}
vim.notify = function(msg)
  table.insert(notes, msg)
end
T.run(function()
  local octet = T.setup()
  vim.cmd("edit " .. vim.fn.fnameescape(T.ws .. "/a.txt"))
  local buf = vim.api.nvim_get_current_buf()
  local s = T.start(octet, "Octet hello")
  T.answered(s, 1, "the first answer")
  local old = octet.state.conn
  old.handle:kill(9)
  T.wait("the exit to be noticed", function()
    return octet.state.conn == nil
  end)
  T.fact("notes", table.concat(notes, "\n"))
  vim.cmd("Octet read a.txt")
  T.wait("the restarted server", function()
    return octet.state.info ~= nil and octet.state.conn ~= old
  end)
  -- Typed after the restart: the first change since the new didOpen.
  vim.api.nvim_buf_set_lines(buf, 0, 0, false, { "typed after the restart" })
  T.answered(s, 2, "the second answer")
  T.fact("same_session", octet.session().id == s.id)
  T.fact("chat", T.text(s.chat.buf))
  T.done()
end)
