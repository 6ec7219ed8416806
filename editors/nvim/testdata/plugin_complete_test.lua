-- octet's attachment source in a completion plugin, typed as a person
-- types (nvim_input): $OCTET_TEST_CASE "cmp" (nvim-cmp) or "blink"
-- (blink.cmp) from the checkout in $OCTET_TEST_PLUGIN. "#" in the input
-- window offers the three kinds, "fi" then #file:, "#file:s" the src directory, "#file:src/m"
-- src/main.go, which is accepted; the built-in menu never pops up.
-- Driven by TestCompletionPlugins.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api
local case = os.getenv("OCTET_TEST_CASE")
vim.opt.rtp:prepend(os.getenv("OCTET_TEST_PLUGIN"))

local labels
if case == "cmp" then
  local cmp = require("cmp")
  cmp.setup({
    snippet = {
      expand = function(args)
        vim.snippet.expand(args.body)
      end,
    },
    mapping = cmp.mapping.preset.insert({ ["<C-y>"] = cmp.mapping.confirm({ select = true }) }),
    sources = { { name = "path" } },
  })
  vim.cmd("runtime! plugin/cmp.lua")
  labels = function()
    local out = {}
    if not cmp.visible() then
      return out
    end
    for _, e in ipairs(cmp.get_entries()) do
      table.insert(out, e.completion_item.textEdit and e.completion_item.textEdit.newText or e.completion_item.label)
    end
    return out
  end
else
  require("blink.cmp").setup({
    fuzzy = { implementation = "lua" },
    keymap = { preset = "default" },
    sources = { default = { "buffer" } },
  })
  vim.cmd("runtime! plugin/blink-cmp.lua")
  labels = function()
    local out = {}
    if not require("blink.cmp").is_menu_visible() then
      return out
    end
    for _, it in ipairs(require("blink.cmp.completion.list").items or {}) do
      table.insert(out, it.textEdit and it.textEdit.newText or it.label)
    end
    return out
  end
end

local function offered(keys, want)
  api.nvim_input(keys)
  local ok = T.try_await(function()
    return vim.tbl_contains(labels(), want)
  end, 10000)
  return { ok = ok, items = labels(), builtin = vim.fn.pumvisible() == 1 }
end

T.async(function()
  T.setup()
  vim.cmd("edit " .. vim.fn.fnameescape(T.ws .. "/a.txt"))
  vim.cmd("OctetChat")
  T.await("the input window", function()
    return api.nvim_buf_get_name(0):match("octet://input$") ~= nil
  end)
  -- A person's keys come a moment apart.
  api.nvim_input("i")
  T.sleep(100)
  T.fact("hash0", offered("#", "#image:"))
  T.fact("hash", offered("fi", "#file:"))
  api.nvim_input("<C-e><BS><BS><BS>")
  T.sleep(200)
  T.fact("dir", offered("#file:s", "#file:src/"))
  T.fact("file", offered("rc/m", "#file:src/main.go"))
  api.nvim_input("<C-y>")
  T.fact("accepted", T.try_await(function()
    return api.nvim_get_current_line() == "#file:src/main.go"
  end, 5000))
  T.fact("line", api.nvim_get_current_line())
  T.done()
end)
