-- Headless Neovim (0.7.2 to 0.12 APIs) as a real client of `octet lsp`
-- for buffer coherence: it opens a.txt, types an unsaved line, prompts
-- (the scripted model edits line 1), approves, then checks that the
-- agent's edit landed in the buffer beside the unsaved line while the
-- disk is untouched, that :undo reverts only the agent's edit, and that
-- :redo then :w writes both. Writes the outcome to $OCTET_TEST_RESULT.
-- Driven by server/nvim_test.go.
local bin = os.getenv("OCTET_BIN")
local ws = os.getenv("OCTET_TEST_WORKSPACE")
local result_path = os.getenv("OCTET_TEST_RESULT")
local file = ws .. "/a.txt"

local log = {}
local function note(s)
  table.insert(log, s)
end

local done = false
local function finish(ok, msg)
  if done then
    return
  end
  done = true
  local f = io.open(result_path, "w")
  f:write((ok and "ok" or "fail") .. "\n" .. msg .. "\n" .. table.concat(log, "\n") .. "\n")
  f:close()
  vim.cmd("qa!")
end

local function request(client, method, params, handler)
  if vim.fn.has("nvim-0.11") == 1 then
    return client:request(method, params, handler)
  end
  return client.request(method, params, handler)
end

local function disk()
  local f = io.open(file)
  local s = f:read("*a")
  f:close()
  return s
end

local function lines(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
end

-- An undo step ends here (:help undo-break).
local function break_undo()
  vim.o.undolevels = vim.o.undolevels
end

vim.cmd("edit " .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()
local confirmations = 0

local caps = vim.lsp.protocol.make_client_capabilities()
caps.experimental = { octet = { confirmEffect = true } }
local config = {
  name = "octet",
  cmd = { bin, "lsp" },
  root_dir = ws,
  workspace_folders = { { uri = vim.uri_from_fname(ws), name = "ws" } },
  capabilities = caps,
  flags = { debounce_text_changes = 20 },
  handlers = {
    ["octet/confirmEffect"] = function(_, params, _)
      confirmations = confirmations + 1
      note("confirmEffect " .. params.tool .. ": " .. params.detail)
      return { decision = "approve", digest = params.digest }
    end,
    ["window/workDoneProgress/create"] = function()
      return vim.NIL
    end,
    ["$/progress"] = function() end,
    ["octet/event"] = function() end,
  },
}

local function check(client)
  local after = lines(buf)
  local want_edit = "goodbye world\ntyped \u{1F600} here\nthird"
  if after ~= want_edit then
    return finish(false, "buffer after the agent's edit: " .. vim.inspect(after))
  end
  if disk() ~= "hello world\nthird\n" then
    return finish(false, "the edit was written behind the buffer: " .. vim.inspect(disk()))
  end
  if not vim.bo[buf].modified then
    return finish(false, "the buffer is not modified after the agent's edit")
  end
  break_undo()
  vim.cmd("silent undo")
  local undone = lines(buf)
  if undone ~= "hello world\ntyped \u{1F600} here\nthird" then
    return finish(false, "after :undo: " .. vim.inspect(undone))
  end
  vim.cmd("silent redo")
  vim.cmd("silent write")
  local saved = disk()
  finish(saved == want_edit .. "\n" and confirmations == 1,
    string.format("saved=%q confirmations=%d encoding=%s", saved, confirmations, client.offset_encoding))
end

local function start(client)
  -- Type an unsaved line between the two lines of the file.
  vim.api.nvim_buf_set_lines(buf, 1, 1, false, { "typed \u{1F600} here" })
  break_undo()
  request(client, "octet/session/new", { title = "nvim docs" }, function(err, res)
    if err then
      return finish(false, "session/new: " .. vim.inspect(err))
    end
    request(client, "octet/prompt", { sessionId = res.sessionId, text = "edit a.txt" }, function(perr, pres)
      if perr then
        return finish(false, "prompt: " .. vim.inspect(perr))
      end
      note("outcome " .. pres.outcome)
      check(client)
    end)
  end)
end

config.on_init = function(client)
  vim.defer_fn(function()
    start(client)
  end, 100)
end
config.on_exit = function(code)
  finish(false, "server exited early with " .. tostring(code))
end

local id
if vim.lsp.start then
  id = vim.lsp.start(config, { bufnr = buf })
else
  id = vim.lsp.start_client(config)
  if id then
    vim.lsp.buf_attach_client(buf, id)
  end
end
if not id then
  finish(false, "starting the client failed")
end
vim.defer_fn(function()
  finish(false, "timed out")
end, 60000)
