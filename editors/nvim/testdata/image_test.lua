-- #image:path attaches an image file to the prompt (read, recognized by
-- its bytes, base64); a file that is not an image keeps the prompt from
-- being sent, with a notification. Driven by TestImageAttachment.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local notes = {}
vim.notify = function(msg)
  table.insert(notes, msg)
end
T.run(function()
  local octet = T.setup()
  vim.cmd("Octet what do #image:one.png and #image:" .. T.ws .. "/two.png show?")
  T.wait("a session", function()
    return octet.session() ~= nil
  end)
  T.wait_idle(octet)
  local s = octet.session()
  vim.cmd("Octet and #image:notes.txt?")
  T.wait("the refusal", function()
    return #notes > 0
  end)
  T.fact("notes", table.concat(notes, "\n"))
  T.fact("chat", T.text(s.chat.buf))
  T.done()
end)
