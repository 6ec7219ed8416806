-- The model's plan is a checklist block in the chat, replaced in place
-- by each update (no tool block for update_plan); with
-- OCTET_TEST_PHASE=resume a restarted Neovim resumes the session and
-- shows the plan again. Driven by TestPlanChecklist.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  local octet = T.setup()
  if os.getenv("OCTET_TEST_PHASE") == "resume" then
    local done
    octet.current(function(err, s)
      done = { err = err, s = s }
    end)
    T.wait("the resumed session", function()
      return done ~= nil
    end)
    T.fact("chat", T.text(done.s.chat.buf))
    return T.done()
  end
  local s = T.start(octet, "Octet fix the parser")
  -- The chat as it is when a plan first appears (the second may follow
  -- at once: each change is looked at as it happens).
  local first
  vim.api.nvim_buf_attach(s.chat.buf, false, {
    on_lines = function()
      if first then
        return true -- detach
      end
      local c = T.text(s.chat.buf)
      if c:find("**Plan**", 1, true) and c:find("Fix the bug", 1, true) then
        first = c
      end
    end,
  })
  T.wait("the first plan", function()
    return first ~= nil
  end, 60000)
  T.fact("first", first)
  T.wait_idle(octet)
  T.fact("chat", T.text(s.chat.buf))
  T.done()
end)
