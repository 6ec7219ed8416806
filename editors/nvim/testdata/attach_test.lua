-- Attachments. Typed as a person types them (nvim_input): the empty input
-- window shows the keys; "#" pops up the built-in menu (#buffer, #file:,
-- #image:), which goes on into the workspace's directories; the prompt
-- is sent with a file, an image and #buffer attached; :OctetToggle closes
-- and opens the chat (TestAttachmentCompletion). $OCTET_TEST_CASE
-- "named": :Octet with the three and :OctetAsk with a selection, the chat
-- names them under the prompts; "resumed" (a restarted Neovim): the
-- resumed chat shows the prompts and the attachments' names, not their
-- text (TestAttachmentsNamedInChat).
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api

local function words()
  local out = {}
  for _, it in ipairs(vim.fn.complete_info({ "items" }).items or {}) do
    table.insert(out, it.word .. (it.menu ~= "" and it.menu and (" " .. it.menu) or ""))
  end
  return out
end

-- Types keys and waits until the menu shows an item starting with want.
local function menu(keys, want, what)
  api.nvim_input(keys)
  T.await(what, function()
    if vim.fn.pumvisible() ~= 1 then
      return false
    end
    for _, w in ipairs(words()) do
      if w:sub(1, #want) == want then
        return true
      end
    end
    return false
  end, 10000)
  return words()
end

T.async(function()
  local octet = T.setup()
  if os.getenv("OCTET_TEST_CASE") == "named" then
    vim.cmd("edit " .. vim.fn.fnameescape(T.ws .. "/a.txt"))
    vim.cmd("Octet explain #file:src/main.go with #image:pics/one.png and #buffer")
    T.await("a session", function()
      return octet.session() ~= nil
    end)
    local s = octet.session()
    T.await("the answer", function()
      return (s.answers or 0) >= 1
    end, 60000)
    vim.cmd("1,1OctetAsk and this line?")
    T.await("the second answer", function()
      return (s.answers or 0) >= 2
    end, 60000)
    T.fact("chat", T.text(s.chat.buf))
    return T.done()
  elseif os.getenv("OCTET_TEST_CASE") == "resumed" then
    vim.cmd("OctetChat")
    T.await("the resumed chat", function()
      local s = octet.session()
      return s and T.text(s.chat.buf):find("## octet", 1, true) ~= nil
    end)
    T.fact("resumed_chat", T.text(octet.session().chat.buf))
    return T.done()
  end
  vim.cmd("edit " .. vim.fn.fnameescape(T.ws .. "/a.txt"))
  vim.cmd("OctetChat")
  T.await("the input window", function()
    return api.nvim_buf_get_name(0):match("octet://input$") ~= nil
  end)
  local input = api.nvim_get_current_buf()
  local function hints()
    local out = {}
    for _, m in ipairs(api.nvim_buf_get_extmarks(input, api.nvim_create_namespace("octet.input.hint"), 0, -1, { details = true })) do
      for _, chunk in ipairs(m[4].virt_text or {}) do
        table.insert(out, chunk[1])
      end
    end
    return table.concat(out)
  end
  T.fact("hint_empty", hints())
  T.fact("omnifunc", vim.bo[input].omnifunc)
  T.fact("menu_hash", menu("iexplain #", "#buffer", "the # menu"))
  T.fact("menu_file", menu("fi", "#file:", "#file: alone"))
  T.fact("menu_dirs", menu("le:s", "#file:src/", "the src directory"))
  T.fact("menu_src", menu("rc/m", "#file:src/main.go", "src/main.go"))
  api.nvim_input("<C-n><C-y>")
  T.await("the chosen file", function()
    return vim.fn.pumvisible() == 0 and api.nvim_get_current_line():find("#file:src/main.go", 1, true) ~= nil
  end)
  T.fact("menu_image", menu(" with #im", "#image:", "#image:"))
  T.fact("menu_pics", menu("age:", "#image:pics/", "the pics directory"))
  T.fact("menu_png", menu("pics/", "#image:pics/one.png", "one.png"))
  api.nvim_input("<C-n><C-y>")
  T.await("the chosen image", function()
    return vim.fn.pumvisible() == 0 and api.nvim_get_current_line():find("#image:pics/one.png", 1, true) ~= nil
  end)
  api.nvim_input(" and #buffer<Esc>")
  T.await("normal mode", function()
    return api.nvim_get_mode().mode == "n"
  end)
  T.fact("hint_typed", hints())
  T.fact("line", api.nvim_get_current_line())
  api.nvim_input("<C-s>")
  T.await("a session", function()
    return octet.session() ~= nil
  end)
  local s = octet.session()
  T.await("the answer", function()
    return (s.answers or 0) >= 1
  end, 60000)
  T.fact("hint_sent", hints())

  vim.cmd("OctetToggle")
  T.fact("toggled_off", vim.fn.bufwinid(s.chat.buf) == -1 and vim.fn.bufwinid(input) == -1)
  vim.cmd("OctetToggle")
  T.await("the chat again", function()
    return vim.fn.bufwinid(s.chat.buf) ~= -1 and vim.fn.bufwinid(input) ~= -1
  end)
  T.fact("toggled_on", true)
  T.done()
end)
