-- A prompt whose answer holds lines shaped like the chat's own turn
-- headings; reports the chat's text. Driven by
-- TestChatEscapesModelTurnHeadings.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  local octet = T.setup()
  vim.cmd("Octet hello")
  T.wait("a session", function()
    return octet.session() ~= nil
  end)
  local s = octet.session()
  T.wait_idle(octet)
  T.fact("chat", T.text(s.chat.buf))
  T.done()
end)
