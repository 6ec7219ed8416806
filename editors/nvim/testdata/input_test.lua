-- Input and run control: an interrupted attempt's output goes to its own
-- recovered section (not the answer); a failed run shows the error and
-- what to do; :OctetSteer and :OctetFollowUp while a run is going;
-- :'<,'>OctetAsk attaches the selection and #buffer the last file
-- buffer; :OctetFinishNow makes the rest of a run tool-free;
-- :OctetPolicy full shows in the statusline. Driven by
-- TestInputAndRunControl.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  local octet = T.setup()
  vim.cmd("edit " .. vim.fn.fnameescape(T.ws .. "/a.txt"))
  local file_win = vim.api.nvim_get_current_win()
  local s = T.start(octet, "Octet go")
  local function answers(n, what)
    T.wait(what, function()
      return (s.answers or 0) >= n
    end, 60000)
  end
  answers(1, "the recovered run")
  T.fact("recovered_chat", T.text(s.chat.buf))

  vim.cmd("Octet break")
  answers(2, "the failed run")
  T.fact("failed_chat", T.text(s.chat.buf))

  vim.cmd("Octet read it")
  T.wait("the run to start", function()
    return s.run_id ~= nil
  end)
  vim.cmd("OctetSteer steer text")
  vim.cmd("OctetFollowUp follow text")
  answers(3, "the steered run")
  T.fact("steered_chat", T.text(s.chat.buf))

  vim.api.nvim_set_current_win(file_win)
  vim.cmd("1,2OctetAsk what is this")
  answers(4, "the ask")
  vim.api.nvim_set_current_win(file_win)
  vim.cmd("Octet compare #buffer")
  answers(5, "the #buffer prompt")

  vim.cmd("Octet finish test")
  T.wait("the finish-now run to start", function()
    return s.run_id ~= nil
  end)
  vim.cmd("OctetFinishNow wrap up")
  answers(6, "the finished run")
  T.fact("finished_chat", T.text(s.chat.buf))

  vim.cmd("OctetPolicy full")
  T.wait("full access", function()
    return s.policy == "unsafe_host"
  end)
  T.fact("statusline_full", octet.statusline())
  local pol = octet.state.conn:request_sync("octet/policy", { sessionId = s.id })
  T.fact("server_policy", pol.effect_policy.value)
  vim.cmd("OctetPolicy ask")
  T.wait("ask again", function()
    return s.policy == "controlled_bash_approval"
  end)
  T.fact("statusline_ask", octet.statusline())
  T.done()
end)
