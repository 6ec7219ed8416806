-- Second Neovim of TestResumedSessionShowsItsModel: :OctetChat resumes
-- the last session; its statusline, then a prompt.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  local octet = T.setup()
  local s = T.start(octet, "OctetChat", "the resumed session")
  T.fact("resumed", s.id)
  -- The default model is known once octet/models answered.
  T.wait("the default model", function()
    return octet.state.default_model ~= nil
  end)
  T.fact("statusline_resumed", octet.statusline())
  vim.cmd("Octet second")
  T.answered(s, 1, "the answer")
  T.fact("statusline_after", octet.statusline())
  T.done()
end)
