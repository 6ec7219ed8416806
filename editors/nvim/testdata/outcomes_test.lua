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
  vim.cmd("Octet run make")
  T.wait("a session", function()
    return octet.session() ~= nil
  end)
  local s = octet.session()
  T.wait("the bash approval", T.float, 60000)
  T.armed()
  api.nvim_feedkeys("rnot now\r", "x", false)
  T.wait("answer 1", function()
    return (s.answers or 0) >= 1
  end, 60000)
  vim.cmd("Octet break")
  T.wait("answer 2", function()
    return (s.answers or 0) >= 2
  end, 60000)
  -- Cancelled last: a prompt after a cancelled stalled request can hang
  -- in octet (see the report of issue 31), which is not this test's.
  vim.cmd("Octet wait for it")
  T.wait("the stalled run", function()
    return s.run_id ~= nil
  end)
  vim.cmd("OctetCancel")
  T.wait("answer 3", function()
    return (s.answers or 0) >= 3
  end, 60000)
  T.fact("chat", T.text(s.chat.buf))
  T.done()
end)
