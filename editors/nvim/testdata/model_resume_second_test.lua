-- Second Neovim of TestResumedSessionShowsItsModel: :OctetChat resumes
-- the last session; its statusline, then a prompt.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  local octet = T.setup()
  vim.cmd("OctetChat")
  T.wait("the resumed session", function()
    return octet.session() ~= nil
  end)
  local s = octet.session()
  T.fact("resumed", s.id)
  -- The default model is known once octet/models answered.
  T.wait("the default model", function()
    return octet.state.default_model ~= nil
  end)
  T.fact("statusline_resumed", octet.statusline())
  vim.cmd("Octet second")
  T.wait("the answer", function()
    return (s.answers or 0) >= 1
  end, 60000)
  T.fact("statusline_after", octet.statusline())
  T.done()
end)
