-- The statusline's cost is the session's: two prompts, then (second
-- Neovim, $OCTET_TEST_CASE "resumed") the resumed session and a third
-- prompt. Driven by TestStatuslineSessionTotals.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  local octet = T.setup()
  local function prompt(text, n)
    vim.cmd("Octet " .. text)
    T.wait("a session", function()
      return octet.session() ~= nil
    end)
    T.wait("answer " .. n, function()
      return (octet.session().answers or 0) >= n
    end, 60000)
  end
  if os.getenv("OCTET_TEST_CASE") == "resumed" then
    vim.cmd("OctetChat")
    T.wait("the resumed session", function()
      return octet.session() ~= nil
    end)
    T.fact("resumed", octet.statusline())
    prompt("three", 1)
    T.fact("third", octet.statusline())
  else
    prompt("one", 1)
    T.fact("first", octet.statusline())
    prompt("two", 2)
    T.fact("second", octet.statusline())
  end
  T.done()
end)
