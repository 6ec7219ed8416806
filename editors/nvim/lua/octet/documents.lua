-- Document sync: the workspace's file buffers are opened on the server
-- (textDocument/didOpen, full-text didChange, didSave, didClose) so octet
-- reads their unsaved text, and workspace/applyEdit puts the agent's edits
-- of an open buffer into the buffer (never behind it on disk).
local M = {}

local api = vim.api
local tracked = {} -- bufnr -> {uri, version, dirty, timer}
local conn, root, encoding

local function uri_of(buf)
  return vim.uri_from_fname(api.nvim_buf_get_name(buf))
end

local function text_of(buf)
  local text = table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
  if vim.bo[buf].eol or vim.bo[buf].fixeol then
    text = text .. "\n"
  end
  return text
end

local function in_root(path)
  if not root or path == "" then
    return false
  end
  local r = root:sub(-1) == "/" and root or root .. "/"
  return path:sub(1, #r) == r
end

local function eligible(buf)
  return api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" and in_root(api.nvim_buf_get_name(buf))
end

--- Sends the buffer's pending change now.
function M.flush(buf)
  local t = tracked[buf]
  if not t or not t.dirty or not conn then
    return
  end
  t.dirty = false
  t.version = api.nvim_buf_get_changedtick(buf)
  conn:notify("textDocument/didChange", {
    textDocument = { uri = t.uri, version = t.version },
    contentChanges = { { text = text_of(buf) } },
  })
end

--- Opens buf on the server when it is a file buffer in the workspace.
function M.attach(buf)
  if not conn or tracked[buf] or not eligible(buf) then
    return
  end
  local t = { uri = uri_of(buf), version = api.nvim_buf_get_changedtick(buf), dirty = false }
  tracked[buf] = t
  conn:notify("textDocument/didOpen", {
    textDocument = { uri = t.uri, languageId = vim.bo[buf].filetype, version = t.version, text = text_of(buf) },
  })
  api.nvim_buf_attach(buf, false, {
    on_lines = function()
      if tracked[buf] ~= t then
        return true
      end
      t.dirty = true
      if not t.scheduled then
        t.scheduled = true
        vim.defer_fn(function()
          t.scheduled = false
          if tracked[buf] == t then
            M.flush(buf)
          end
        end, 50)
      end
    end,
    on_reload = function()
      if tracked[buf] == t then
        t.dirty = true
        M.flush(buf)
      end
    end,
    on_detach = function()
      -- Only this attachment's document (a restarted server has its own).
      if tracked[buf] == t then
        M.detach(buf)
      end
    end,
  })
end

--- Closes buf on the server.
function M.detach(buf)
  local t = tracked[buf]
  if not t then
    return
  end
  tracked[buf] = nil
  if conn then
    conn:notify("textDocument/didClose", { textDocument = { uri = t.uri } })
  end
end

function M.saved(buf)
  local t = tracked[buf]
  if t and conn then
    M.flush(buf)
    conn:notify("textDocument/didSave", { textDocument = { uri = t.uri } })
  end
end

local function buf_of(uri)
  for buf, t in pairs(tracked) do
    if t.uri == uri then
      return buf
    end
  end
end

--- Answers workspace/applyEdit: every documentChanges entry must name an
--- open buffer at the version the edit was computed against.
function M.apply_edit(params, respond)
  local edit = type(params) == "table" and params.edit or {}
  local changes = edit.documentChanges or {}
  local todo = {}
  for _, dc in ipairs(changes) do
    local doc = dc.textDocument or {}
    local buf = buf_of(doc.uri)
    if not buf then
      return respond({ applied = false, failureReason = tostring(doc.uri) .. " is not open in Neovim" })
    end
    local t = tracked[buf]
    local version = vim.NIL ~= doc.version and doc.version or nil
    if t.dirty or (version and version ~= t.version) then
      M.flush(buf)
      return respond({ applied = false, failureReason = "the buffer changed since version " .. tostring(version) })
    end
    table.insert(todo, { buf = buf, edits = dc.edits or {} })
  end
  for _, item in ipairs(todo) do
    vim.lsp.util.apply_text_edits(item.edits, item.buf, encoding)
  end
  respond({ applied = true })
  for _, item in ipairs(todo) do
    M.flush(item.buf)
  end
end

--- Starts syncing for connection c whose workspace is dir.
function M.start(c, dir, enc)
  conn, root, encoding = c, dir, enc or "utf-16"
  tracked = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    M.attach(buf)
  end
end

function M.stop()
  conn = nil
  tracked = {}
end

--- The buffer whose name is the file path (both as full paths), or nil.
--- Not bufnr(): that reads its argument as a pattern ("*", "%", a part of
--- a name), and paths here come from prompts and diffs.
function M.buf_named(path)
  local function full(p)
    return vim.fn.simplify(vim.fn.fnamemodify(p, ":p"))
  end
  local want = full(path)
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(buf)
    if name ~= "" and full(name) == want then
      return buf
    end
  end
end

--- The buffer's URI when it is synced (an attachment can name it).
function M.uri(buf)
  M.attach(buf)
  local t = tracked[buf]
  return t and t.uri
end

function M.root()
  return root
end

function M.encoding()
  return encoding
end

return M
