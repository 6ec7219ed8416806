-- Document sync: the workspace's file buffers are opened on the server
-- (textDocument/didOpen, full-text didChange, didSave, didClose) so octet
-- reads their unsaved text, and workspace/applyEdit puts the agent's edits
-- of an open buffer into the buffer (never behind it on disk). Before a
-- command reads the disk, octet/saveDocuments has the agent's unsaved
-- edits saved (asking first when the user edited the buffer too); the
-- buffers' diagnostics (vim.diagnostic) go to octet as octet/diagnostics.
local M = {}

local api = vim.api
local bit = require("bit")
local text = require("octet.text")
-- bufnr -> {uri, version, dirty, user_edited, agent_edited, diag_timer,
-- diag_sent}
local tracked = {}
local conn, root, encoding
local applying = nil -- the buffer an agent edit is being applied to

--- How long after a buffer's last diagnostics change they are sent (ms).
M.diagnostics_delay = 300

--- The most diagnostics sent for one file (octet keeps no more).
M.max_diagnostics = 500

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
  -- A buffer opened with unsaved changes has the user's edits.
  local t = { uri = uri_of(buf), version = api.nvim_buf_get_changedtick(buf), dirty = false, user_edited = vim.bo[buf].modified }
  tracked[buf] = t
  conn:notify("textDocument/didOpen", {
    textDocument = { uri = t.uri, languageId = vim.bo[buf].filetype, version = t.version, text = text_of(buf) },
  })
  if #vim.diagnostic.get(buf) > 0 then
    M.diagnostics_changed(buf)
  end
  api.nvim_buf_attach(buf, false, {
    on_lines = function()
      if tracked[buf] ~= t then
        return true
      end
      t.dirty = true
      if applying == buf then
        t.agent_edited = true
      else
        t.user_edited = true
      end
      -- Diagnostics not yet sent are of the text before this change.
      M.cancel_diagnostics(t)
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
        t.dirty, t.user_edited, t.agent_edited = true, false, false
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
  M.cancel_diagnostics(t)
  if conn then
    conn:notify("textDocument/didClose", { textDocument = { uri = t.uri } })
  end
end

function M.saved(buf)
  local t = tracked[buf]
  if t and conn then
    t.user_edited, t.agent_edited = false, false
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
    applying = item.buf
    local ok, err = pcall(vim.lsp.util.apply_text_edits, item.edits, item.buf, encoding)
    applying = nil
    if not ok then
      M.flush(item.buf)
      return respond({ applied = false, failureReason = "applying the edit failed: " .. tostring(err) })
    end
  end
  respond({ applied = true })
  for _, item in ipairs(todo) do
    M.flush(item.buf)
  end
end

-- Saving ---------------------------------------------------------------

-- Saves buf (:write, its autocommands and all); returns nil or why not.
local function write(buf)
  local ok, err = pcall(api.nvim_buf_call, buf, function()
    vim.cmd("write")
  end)
  if not ok then
    return tostring(err)
  end
  if vim.bo[buf].modified then
    return "it is still modified after :write"
  end
end

-- The relative name of buf, for a question or a notice.
local function name_of(buf)
  local name = api.nvim_buf_get_name(buf)
  local r = root and (root:sub(-1) == "/" and root or root .. "/")
  if r and name:sub(1, #r) == r then
    name = name:sub(#r + 1)
  end
  return text.line(name, 120)
end

--- Answers octet/saveDocuments {uris, reason}: saves exactly those
--- buffers, asking first (vim.ui.select) for one the user edited too
--- (besides octet's edits); respond({saved, declined}).
function M.save_documents(params, respond)
  params = type(params) == "table" and params or {}
  local reason = text.line(params.reason or "octet is about to run a command that reads the disk", 300)
  local saved, declined, todo = {}, {}, {}
  for _, uri in ipairs(type(params.uris) == "table" and params.uris or {}) do
    local buf = type(uri) == "string" and buf_of(uri)
    if not buf then
      table.insert(declined, uri)
    elseif not vim.bo[buf].modified then
      table.insert(saved, uri) -- the file already has the buffer's text
    else
      table.insert(todo, { uri = uri, buf = buf })
    end
  end
  local done = {}
  local function step(i)
    local item = todo[i]
    if not item then
      if #done > 0 then
        text.notify("saved " .. table.concat(done, ", ") .. ": " .. reason)
      end
      return respond({ saved = saved, declined = declined })
    end
    local function save()
      local why = write(item.buf)
      if why then
        text.notify("could not save " .. name_of(item.buf) .. ": " .. why, vim.log.levels.WARN)
        table.insert(declined, item.uri)
      else
        table.insert(saved, item.uri)
        table.insert(done, name_of(item.buf))
      end
      step(i + 1)
    end
    local t = tracked[item.buf]
    if not (t and t.user_edited) then
      return save()
    end
    -- "Keep unsaved" first: keys typed as the question pops up that pick
    -- the first item keep the file as it is.
    vim.ui.select({ "Keep unsaved", "Save" }, {
      prompt = "octet: " .. name_of(item.buf) .. " has your unsaved edits besides octet's. Save it now? (" .. reason .. ")",
      kind = "octet.save",
    }, function(choice)
      if choice == "Save" and api.nvim_buf_is_valid(item.buf) then
        return save()
      end
      table.insert(declined, item.uri)
      step(i + 1)
    end)
  end
  step(1)
end

-- Diagnostics ----------------------------------------------------------

--- The character of byte column col of line in the negotiated encoding.
function M.character(line, col)
  col = math.max(0, math.min(col or 0, #line))
  if encoding == "utf-8" then
    return col
  end
  -- Not in the middle of a character.
  while col > 0 and col < #line and bit.band(line:byte(col + 1), 0xC0) == 0x80 do
    col = col - 1
  end
  if vim.fn.has("nvim-0.11") == 1 then
    return vim.str_utfindex(line, encoding, col, false)
  end
  local u32, u16 = vim.str_utfindex(line, col)
  return encoding == "utf-32" and u32 or u16
end

-- One vim.diagnostic item of buf as an LSP Diagnostic.
local function lsp_diagnostic(buf, d)
  local function pos(lnum, col)
    local line = api.nvim_buf_get_lines(buf, lnum, lnum + 1, false)[1] or ""
    return { line = lnum, character = M.character(line, col) }
  end
  local code = d.code
  if code == nil and type(d.user_data) == "table" and type(d.user_data.lsp) == "table" then
    code = d.user_data.lsp.code
  end
  local out = {
    range = { start = pos(d.lnum, d.col), ["end"] = pos(d.end_lnum or d.lnum, d.end_col or d.col) },
    severity = d.severity,
    message = tostring(d.message or ""),
  }
  if type(d.source) == "string" then
    out.source = d.source
  end
  if type(code) == "string" or type(code) == "number" then
    out.code = code
  end
  return out
end

--- Stops a diagnostics send of tracked document t that is still waiting.
function M.cancel_diagnostics(t)
  if t and t.diag_timer then
    t.diag_timer:stop()
    t.diag_timer:close()
    t.diag_timer = nil
  end
end

-- Sends buf's current diagnostics (all of vim.diagnostic's) to octet.
local function send_diagnostics(buf)
  local t = tracked[buf]
  if not t or not conn or not api.nvim_buf_is_valid(buf) then
    return
  end
  local list = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if #list >= M.max_diagnostics then
      break
    end
    table.insert(list, lsp_diagnostic(buf, d))
  end
  M.flush(buf) -- octet reads them against the text they are of
  conn:notify("octet/diagnostics", { uri = t.uri, diagnostics = list })
end

--- vim.diagnostic changed buf's diagnostics (DiagnosticChanged): they go
--- to octet once they have not changed for diagnostics_delay ms. A
--- buffer whose diagnostics never changed (no language server) sends
--- nothing.
function M.diagnostics_changed(buf)
  local t = tracked[buf]
  if not t or not conn then
    return
  end
  M.cancel_diagnostics(t)
  local uv = vim.uv or vim.loop
  t.diag_timer = uv.new_timer()
  t.diag_timer:start(M.diagnostics_delay, 0, vim.schedule_wrap(function()
    if tracked[buf] == t and t.diag_timer then
      M.cancel_diagnostics(t)
      send_diagnostics(buf)
    end
  end))
end

--- Starts syncing for connection c whose workspace is dir.
function M.start(c, dir, enc)
  M.stop()
  conn, root, encoding = c, dir, enc or "utf-16"
  for _, buf in ipairs(api.nvim_list_bufs()) do
    M.attach(buf)
  end
end

function M.stop()
  for _, t in pairs(tracked) do
    M.cancel_diagnostics(t)
  end
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
