-- Review: in full access a run edits a.txt and b.txt; :OctetDiff lists
-- both, "x" on b.txt reverts only it, "k" on a.txt keeps it; then
-- :OctetRewind (through vim.ui.select) takes files and conversation back
-- to before the prompt. Driven by TestReviewDiffAndRewind.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local picks = {}
vim.ui.select = function(items, opts, on_choice)
  local want = table.remove(picks, 1)
  for i, it in ipairs(items) do
    if (opts.format_item and opts.format_item(it) or tostring(it)):find(want, 1, true) then
      return vim.schedule(function()
        on_choice(it, i)
      end)
    end
  end
  T.fail("no item matches " .. tostring(want))
end

local function row_of(buf, prefix)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if l:sub(1, #prefix) == prefix then
      return i
    end
  end
  T.fail("no line " .. prefix .. " in " .. T.text(buf))
end

T.run(function()
  local octet = T.setup({ mode = "full" })
  local s = T.start(octet, "Octet hello")
  T.answered(s, 1, "the first answer")
  vim.cmd("Octet change both")
  T.answered(s, 2, "the second answer")
  T.fact("policy", s.policy)
  local diffbuf
  require("octet.review").diff(function(b)
    diffbuf = b
  end)
  T.wait("the diff buffer", function()
    return diffbuf ~= nil
  end)
  T.fact("diff", T.text(diffbuf))
  vim.api.nvim_win_set_cursor(0, { row_of(diffbuf, "=== b.txt") + 2, 0 })
  vim.api.nvim_feedkeys("x", "x", false)
  T.wait("b.txt reverted", function()
    local st = vim.b[diffbuf].octet_reverted
    return st and st["b.txt"] ~= nil
  end)
  vim.api.nvim_win_set_cursor(0, { row_of(diffbuf, "=== a.txt"), 0 })
  vim.api.nvim_feedkeys("k", "x", false)
  T.fact("diff_after", T.text(diffbuf))
  T.fact("reverted", vim.b[diffbuf].octet_reverted)

  -- The chat rendered from the transcript shows the run's changes too.
  require("octet.review").rerender(s)
  T.fact("rerendered", T.text(s.chat.buf))
  picks = { "change both", "Files and conversation" }
  vim.cmd("OctetRewind")
  T.wait("the rewind", function()
    return T.text(s.chat.buf):find("Rewound", 1, true) ~= nil
  end)
  T.fact("chat_after_rewind", T.text(s.chat.buf))
  local page = octet.state.conn:request_sync("octet/session/transcript", { sessionId = s.id })
  T.fact("head_type", page.entries[1].type)
  T.fact("entries", #page.entries)
  T.done()
end)
