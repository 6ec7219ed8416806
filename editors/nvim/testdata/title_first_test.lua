-- First Neovim of TestResumedChatKeepsRenamedTitle: a prompt, then
-- :OctetSessions renames the session.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
vim.ui.input = function(_, on_confirm)
  vim.schedule(function()
    on_confirm("Renamed Title")
  end)
end
vim.ui.select = function(items, opts, on_choice)
  for i, it in ipairs(items) do
    local label = opts.format_item and opts.format_item(it) or tostring(it)
    if label:find("alpha task", 1, true) or label == "Rename" then
      return vim.schedule(function()
        on_choice(it, i)
      end)
    end
  end
  T.fail("nothing to pick")
end
T.run(function()
  local octet = T.setup()
  vim.cmd("Octet alpha task")
  T.wait_idle(octet)
  local buf = octet.session().chat.buf
  vim.cmd("OctetSessions")
  T.wait("the rename", function()
    return vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1]:find("Renamed", 1, true) ~= nil
  end)
  T.fact("title", vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1])
  T.done()
end)
