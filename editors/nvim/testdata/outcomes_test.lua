-- Runs that did not complete, marked again in a resumed chat: a denied
-- bash call (with a reason), a failed run and a cancelled run; then
-- ($OCTET_TEST_CASE "resumed") a restarted Neovim's chat. Driven by
-- TestResumedChatMarksOutcomes.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api
T.run(function()
  local octet = T.setup({ approval_delay = 0 })
  if os.getenv("OCTET_TEST_CASE") == "resumed" then
    vim.cmd("OctetChat")
    T.wait("the resumed chat", function()
      local s = octet.session()
      return s and T.text(s.chat.buf):find("## octet", 1, true) ~= nil
    end)
    T.fact("chat", T.text(octet.session().chat.buf))
    return T.done()
  end
  local s = T.start(octet, "Octet run make")
  T.wait("the bash approval", T.float, 60000)
  T.armed()
  api.nvim_feedkeys("rnot now\r", "x", false)
  T.answered(s, 1, "answer 1")
  vim.cmd("Octet break")
  T.answered(s, 2, "answer 2")
  -- Cancelled last: a prompt after a cancelled stalled request can hang
  -- in octet (see the report of issue 31), which is not this test's.
  vim.cmd("Octet wait for it")
  T.wait("the stalled run", function()
    return s.run_id ~= nil
  end)
  vim.cmd("OctetCancel")
  T.answered(s, 3, "answer 3")
  T.fact("chat", T.text(s.chat.buf))
  T.done()
end)
