-- First Neovim of TestResumedSessionShowsItsModel: a prompt, then
-- :OctetModel picks gpt-4.1 for the session.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
vim.ui.select = function(items, opts, on_choice)
  for i, it in ipairs(items) do
    if opts.format_item(it):find("gpt-4.1  ", 1, true) then
      return vim.schedule(function()
        on_choice(it, i)
      end)
    end
  end
  T.fail("no gpt-4.1 among the models")
end
T.run(function()
  local octet = T.setup()
  vim.cmd("Octet first")
  T.wait_idle(octet)
  T.fact("sid", octet.session().id)
  vim.cmd("OctetModel")
  T.wait("the model", function()
    return octet.session().model == "gpt-4.1"
  end)
  T.fact("statusline", octet.statusline())
  T.done()
end)
