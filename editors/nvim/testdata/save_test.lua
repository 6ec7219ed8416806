-- Buffers and commands agree: a.txt and b.txt are open, b.txt with a line
-- the user typed (unsaved). The model edits both (approved), then runs
-- `cat a.txt b.txt`: octet asks the plugin to save them first; a.txt
-- (only octet's edit) is saved without a question, b.txt (the user's
-- edit too) is asked about (vim.ui.select) and kept unsaved; the
-- command's approval names b.txt as not saved. Driven by
-- TestSaveDocumentsBeforeCommand.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local api = vim.api
local asked = {}
vim.ui.select = function(items, opts, on_choice)
  table.insert(asked, { prompt = opts.prompt, items = items })
  on_choice("Keep unsaved")
end
T.run(function()
  local octet = T.setup({ approval_delay = 0 })
  vim.cmd("edit " .. vim.fn.fnameescape(T.ws .. "/a.txt"))
  local a = api.nvim_get_current_buf()
  vim.cmd("edit " .. vim.fn.fnameescape(T.ws .. "/b.txt"))
  local b = api.nvim_get_current_buf()
  api.nvim_buf_set_lines(b, 1, 1, false, { "typed by the user" })
  local s = T.start(octet, "Octet edit both, then cat them")
  for i = 1, 3 do
    T.wait("approval " .. i, T.float, 60000)
    T.armed()
    if i == 3 then
      T.fact("bash_float", T.text(api.nvim_win_get_buf(T.float())))
    end
    api.nvim_feedkeys("a", "x", false)
    T.wait("the float to close", function()
      return T.float() == nil
    end)
  end
  T.answered(s, 1, "the answer")
  T.fact("asked", asked)
  T.fact("a_modified", vim.bo[a].modified)
  T.fact("b_modified", vim.bo[b].modified)
  T.fact("b_buffer", T.text(b))
  T.fact("chat", T.text(s.chat.buf))
  T.done()
end)
