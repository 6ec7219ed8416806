-- Text the model, the server or the repository wrote reaches the
-- statusline, the chat and the approval float as text, never as
-- something Neovim interprets. Driven by untrusted_test.go;
-- OCTET_TEST_CASE picks the case:
--   statusline: while the model's search and read run, the statusline
--     component is evaluated as an expression whose result is a format
--     (%{%…%}) and as the format itself (as lualine embeds it); the
--     configured model's name is shown after the run.
--   newline: a file name with a newline in an approval float, a tool
--     name with one in the chat.
--   side_by_side: the side-by-side view of a new file "notes" while
--     notes.txt is open shows an empty file before the change.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api

local expr = "%{%v:lua.require'octet'.statusline()%}"

-- The statusline as Neovim draws it: through the expression, and with the
-- component's text as the format itself.
local function drawn(octet)
  local ok1, a = pcall(api.nvim_eval_statusline, expr, { maxwidth = 400 })
  local ok2, b = pcall(api.nvim_eval_statusline, octet.statusline(), { maxwidth = 400 })
  return { ok1 and a.str or ("error: " .. tostring(a)), ok2 and b.str or ("error: " .. tostring(b)) }
end

local float = T.float

local cases = {}

function cases.statusline(octet)
  vim.o.statusline = expr
  local seen = {}
  api.nvim_create_autocmd("User", {
    pattern = "OctetProgress",
    callback = function()
      -- (The event's data is 0.8+: the session's message is the same.)
      local msg = octet.session() and octet.session().message
      if type(msg) == "string" and msg:find("^Running") then
        vim.cmd("redrawstatus!")
        vim.list_extend(seen, drawn(octet))
      end
    end,
  })
  vim.cmd("Octet search for it")
  T.wait("a session", function()
    return octet.session() ~= nil
  end)
  T.wait_idle(octet)
  T.fact("seen", seen)
  T.fact("idle", drawn(octet))
  T.fact("chat", T.text(octet.session().chat.buf))
end

function cases.newline(octet)
  local s = T.start(octet, "Octet write it")
  if not vim.wait(30000, float, 20) then
    T.fact("chat", T.text(s.chat.buf))
    T.fail("timed out waiting for the approval float")
  end
  T.fact("float_text", T.text(api.nvim_win_get_buf(float())))
  T.armed()
  api.nvim_feedkeys("a", "x", false)
  T.wait_idle(octet)
  T.fact("chat", T.text(s.chat.buf))
end

function cases.side_by_side(octet)
  vim.cmd("edit " .. vim.fn.fnameescape(T.ws .. "/notes.txt"))
  vim.cmd("Octet write notes")
  T.wait("the approval float", float)
  T.armed()
  api.nvim_feedkeys("v", "x", false)
  local sides = {}
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    table.insert(sides, T.text(api.nvim_win_get_buf(w)))
  end
  T.fact("sbs", sides)
  vim.cmd("tabclose")
  octet.cancel()
  T.wait_idle(octet)
end

T.run(function()
  local octet = T.setup()
  cases[os.getenv("OCTET_TEST_CASE")](octet)
  T.done()
end)
