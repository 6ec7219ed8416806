-- The editor's diagnostics for the agent: a.go is open, a "linter" (any
-- plugin that reports through vim.diagnostic: it re-checks the buffer as
-- it changes, as a language server does) reports "undefined: foo" on a
-- line whose text before the call is not ASCII. The model asks for the
-- diagnostics, edits the call away (approved with "a"), and the edit's
-- result says the diagnostic went away. Driven by
-- TestDiagnosticsForwarded.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api
T.run(function()
  local octet = T.setup({ approval_delay = 0 })
  vim.cmd("edit " .. vim.fn.fnameescape(T.ws .. "/a.go"))
  local buf = api.nvim_get_current_buf()
  local ns = api.nvim_create_namespace("test.linter")
  local sent = 0
  local function lint()
    local diags = {}
    for i, l in ipairs(api.nvim_buf_get_lines(buf, 0, -1, false)) do
      local s, e = l:find("foo()", 1, true)
      if s then
        table.insert(diags, {
          lnum = i - 1, col = s - 1, end_col = e, severity = vim.diagnostic.severity.ERROR,
          message = "undefined: foo", source = "compiler", code = "UndeclaredName",
        })
      end
    end
    vim.diagnostic.set(ns, buf, diags)
  end
  api.nvim_buf_attach(buf, false, {
    on_lines = function()
      vim.defer_fn(lint, 100) -- a language server answers a moment later
    end,
  })
  octet.connect(function() end)
  T.wait("octet", function()
    return octet.state.info ~= nil
  end)
  -- Count what goes to octet.
  local notify = octet.state.conn.notify
  octet.state.conn.notify = function(c, method, params)
    if method == "octet/diagnostics" then
      sent = sent + 1
      T.fact("last_sent", params)
    end
    return notify(c, method, params)
  end
  lint()
  T.wait("the diagnostics sent", function()
    return sent >= 1
  end, 5000)
  local s = T.start(octet, "Octet fix the problems")
  T.wait("the edit's approval", T.float, 60000)
  T.armed()
  api.nvim_feedkeys("a", "x", false)
  T.answered(s, 1, "the answer")
  T.fact("sent", sent)
  T.fact("buffer", T.text(buf))
  T.fact("chat", T.text(s.chat.buf))
  T.done()
end)
