-- First Neovim of TestSessionsResumeAndPicker: two sessions, "alpha
-- task" then (after :OctetNew) "beta task".
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  local octet = T.setup()
  vim.cmd("Octet alpha task")
  T.wait_idle(octet)
  T.fact("alpha", octet.session().id)
  vim.cmd("OctetNew")
  T.wait("the new session", function()
    return octet.session() and octet.session().id ~= T.facts().alpha
  end)
  vim.cmd("Octet beta task")
  T.wait("the beta answer", function()
    return (octet.session().answers or 0) >= 1
  end, 60000)
  T.fact("beta", octet.session().id)
  T.done()
end)
