-- A prompt whose answer holds lines shaped like the chat's own turn
-- headings; reports the chat's text. Driven by
-- TestChatEscapesModelTurnHeadings.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  local octet = T.setup()
  local s = T.start(octet, "Octet hello")
  T.wait_idle(octet)
  T.fact("chat", T.text(s.chat.buf))
  T.done()
end)
