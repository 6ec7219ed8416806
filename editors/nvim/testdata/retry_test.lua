-- Retries and outages in the chat: $OCTET_TEST_CASE "flaky" (the
-- provider fails twice, then answers) records the chat as the retries
-- come and at the end; "outage" (nothing listens at the provider's
-- address) records the retry line, then <C-c> in the chat window cancels
-- the run. Driven by TestRetriesInChat.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api
T.run(function()
  local octet = T.setup()
  -- The words for events octet sends (the VS Code extension's cases).
  local text = require("octet.text")
  local cause = "cannot connect to the provider: connection refused"
  T.fact("words", {
    text.retry({ attempt = 3, maxAttempts = 29, delayMs = 3500, operation = vim.NIL, cause = cause, giveUpInMs = 355000 }),
    text.retry({ attempt = 4, maxAttempts = vim.NIL, delayMs = 60000, operation = vim.NIL, cause = cause }),
    text.retry({ attempt = 4, maxAttempts = vim.NIL, delayMs = 60000, operation = vim.NIL, cause = cause }, true),
    text.retry({ attempt = 1, maxAttempts = 5, delayMs = 200, operation = "compaction", cause = "HTTP 503" }),
    text.retry({ attempt = 1, maxAttempts = 5, delayMs = 200, operation = "compaction", cause = "HTTP 503" }, true),
  })
  vim.cmd("OctetNew")
  T.wait("the chat", function()
    local s = octet.session()
    return s and vim.fn.bufwinid(s.chat.buf) ~= -1
  end)
  local s = octet.session()
  local seen = {}
  api.nvim_buf_attach(s.chat.buf, false, {
    on_lines = function()
      vim.schedule(function()
        local t = T.text(s.chat.buf)
        if t:find("retrying", 1, true) then
          table.insert(seen, t)
        end
      end)
    end,
  })
  vim.cmd("Octet hello")
  if os.getenv("OCTET_TEST_CASE") == "outage" then
    T.wait("a retry in the chat", function()
      return T.text(s.chat.buf):find("retrying", 1, true) ~= nil
    end, 60000)
    T.fact("statusline", octet.statusline())
    T.fact("retry_chat", T.text(s.chat.buf))
    vim.api.nvim_set_current_win(vim.fn.bufwinid(s.chat.buf))
    local k = api.nvim_replace_termcodes("<C-c>", true, false, true)
    local t0 = vim.loop.now()
    api.nvim_feedkeys(k, "x", false)
    T.wait_idle(octet, "the cancelled run")
    T.fact("cancel_ms", vim.loop.now() - t0)
  else
    T.wait_idle(octet)
  end
  T.fact("seen", seen)
  T.fact("chat", T.text(s.chat.buf))
  T.done()
end)
