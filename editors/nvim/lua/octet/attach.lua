-- Attachments: what `#buffer`, `#file:path` and `#image:path` in a prompt
-- attach (octet/prompt's context), their names as the chat shows them,
-- the names in a resumed prompt (whose recorded text has the attachments
-- appended), and completion of the three in the input window: built-in
-- (an 'omnifunc' that pops up as "#" is typed), and sources for nvim-cmp
-- (lua/octet/cmp.lua) and blink.cmp (lua/octet/blink.lua) built on the
-- same items.
local M = {}

local api = vim.api
local uv = vim.uv or vim.loop
local text = require("octet.text")
local image = require("octet.image")
local documents = require("octet.documents")

local function octet()
  return require("octet")
end

-- The workspace root, without a trailing "/".
local function root()
  return (octet().state.root or octet().root()):gsub("/$", "")
end

--- path relative to the workspace root when it is inside it.
function M.relative(path)
  local r = root() .. "/"
  if path:sub(1, #r) == r then
    return path:sub(#r + 1)
  end
  return path
end

-- The absolute path a #file:/#image: path names (relative to the root).
local function absolute(path)
  if path:sub(1, 1) == "/" or path:sub(1, 1) == "~" then
    return vim.fn.fnamemodify(path, ":p")
  end
  return root() .. "/" .. path
end

local function human_bytes(n)
  if n < 1024 then
    return n .. " B"
  elseif n < 1024 * 1024 then
    return string.format("%.0f KB", n / 1024)
  end
  return string.format("%.1f MB", n / 1024 / 1024)
end

--- The attachments named in prompt text: #image:path (images), #buffer
--- (the last file buffer), #file:path. Appends them to context (a list,
--- e.g. :OctetAsk's selection) and returns it and their names as the chat
--- shows them; nil and why when an image cannot be attached.
function M.parse(prompt, context)
  context = context or {}
  local names = {}
  for _, item in ipairs(context) do
    table.insert(names, M.name(item))
  end
  for path in prompt:gmatch("#image:(%S+)") do
    local item, why = image.attachment(vim.fn.fnamemodify(absolute(path), ":p"))
    if not item then
      return nil, why
    end
    table.insert(context, item)
    local bytes = math.floor(#item.data * 3 / 4)
    table.insert(names, text.line(vim.fn.fnamemodify(path, ":t"), 80) .. " (" .. item.mimeType .. ", " .. human_bytes(bytes) .. ")")
  end
  local last = octet().state.last_file
  if prompt:find("#buffer", 1, true) and last and api.nvim_buf_is_valid(last) then
    local uri = documents.uri(last)
    if uri then
      table.insert(context, { uri = uri })
      table.insert(names, M.name({ uri = uri }))
    end
  end
  for path in prompt:gmatch("#file:(%S+)") do
    local abs = absolute(path)
    local b = documents.buf_named(abs)
    local item = { uri = b and documents.uri(b) or vim.uri_from_fname(abs) }
    table.insert(context, item)
    table.insert(names, M.name(item))
  end
  return context, names
end

--- The name of a context item as the chat shows it: "a.go lines 3-9",
--- "notes.md", "terminal output".
function M.name(item)
  if type(item.uri) == "string" then
    local ok, fname = pcall(vim.uri_to_fname, item.uri)
    local s = M.relative(ok and fname or item.uri)
    local r = item.range
    if type(r) == "table" and type(r.start) == "table" and type(r["end"]) == "table" then
      s = s .. " lines " .. (r.start.line + 1) .. "-" .. (r["end"].line + 1)
    end
    return text.line(s, 120)
  elseif item.type == "image" then
    return "image (" .. text.line(item.mimeType, 40) .. ")"
  end
  return text.line(item.label or "?", 80)
end

-- What host.WithAttachments puts between the prompt and its attachments.
local marker = "\n\nThe user attached this context:\n"

--- Splits a prompt as the transcript records it (the text, then each
--- attachment in a delimited block) into the text the user typed and the
--- attachments' titles. Text without well-formed attachment blocks after
--- the marker is returned whole.
function M.split(recorded)
  local from = 1
  while true do
    local s, e = recorded:find(marker, from, true)
    if not s then
      return recorded, {}
    end
    local titles = M.titles(recorded:sub(e + 1))
    if titles then
      return recorded:sub(1, s - 1), titles
    end
    from = s + 1
  end
end

-- The titles of the attachment blocks that make up rest (the text after
-- the marker), or nil when it is not a sequence of blocks 1..n. A block
-- ends at an end line that the next block's header or the end of the
-- text follows; when a body holds such lines itself (a file about octet's
-- format), the earliest end that lets the rest parse is taken, within a
-- bounded number of tries: the titles are shown, never trusted.
function M.titles(rest)
  local budget = 200
  local function blocks(pos, n)
    if pos > #rest then
      return n > 1 and {} or nil
    end
    local _, he, title = rest:find("^\n%-%-%- attachment " .. n .. ": ([^\n]*) %-%-%-\n", pos)
    if not he then
      return nil
    end
    local tail = "\n--- end of attachment " .. n .. " ---\n"
    local search = he
    while budget > 0 do
      local ts, te = rest:find(tail, search, true)
      if not ts then
        return nil
      end
      budget = budget - 1
      if te == #rest or rest:find("^\n%-%-%- attachment " .. (n + 1) .. ": ", te + 1) then
        local after = blocks(te + 1, n + 1)
        if after then
          table.insert(after, 1, title)
          return after
        end
      end
      search = ts + 1
    end
    return nil
  end
  return blocks(1, 1)
end

-- Completion ----------------------------------------------------------------

local kinds = {
  { word = "#buffer", info = "the last file buffer you were in, its unsaved text" },
  { word = "#file:", info = "a file of the workspace" },
  { word = "#image:", info = "an image: PNG, JPEG, GIF or WebP" },
}

local image_ext = { png = true, jpg = true, jpeg = true, gif = true, webp = true }

--- The byte column (0-based) where the #word before the cursor starts in
--- line (the text before the cursor), or nil.
function M.start(line)
  local s = line:find("#[^%s#]*$")
  if not s or (s > 1 and not line:sub(s - 1, s - 1):match("%s")) then
    return nil
  end
  return s - 1
end

-- Whether a name can be written in a #file: path (no white space, no
-- control or invisible characters: the text would show it otherwise).
local function writable(name)
  return not name:find("%s") and text.line(name) == name
end

-- Directory entries of dir (absolute) whose names start with prefix, for
-- a #file: or #image: path under "rel" (the typed directory part).
local function entries(dir, rel, prefix, want)
  local out = {}
  local h = uv.fs_scandir(dir)
  if not h then
    return out
  end
  local lower = prefix:lower() == prefix
  while #out < 200 do
    local name, typ = uv.fs_scandir_next(h)
    if not name then
      break
    end
    local cmp = lower and name:lower() or name
    if cmp:sub(1, #prefix) == prefix and writable(name) and (prefix:sub(1, 1) == "." or name:sub(1, 1) ~= ".") then
      if typ == "link" then
        local st = uv.fs_stat(dir .. "/" .. name)
        typ = st and st.type or "file"
      end
      if typ == "directory" then
        table.insert(out, { word = want .. rel .. name .. "/", abbr = rel .. name .. "/", kind = "dir" })
      elseif want == "#file:" or image_ext[(name:match("%.(%w+)$") or ""):lower()] then
        table.insert(out, { word = want .. rel .. name, abbr = rel .. name, kind = "file" })
      end
    end
  end
  table.sort(out, function(a, b)
    return a.word < b.word
  end)
  return out
end

-- The workspace's open file buffers whose relative names start with path.
local function open_buffers(path)
  local out = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(buf)
    if vim.bo[buf].buftype == "" and name ~= "" and api.nvim_buf_is_loaded(buf) then
      local rel = M.relative(name)
      if rel ~= name and rel:sub(1, #path) == path and writable(rel) then
        table.insert(out, { word = "#file:" .. rel, abbr = rel, kind = "file", menu = "[buffer]" })
      end
    end
  end
  return out
end

--- The completion items (|complete-items|) for base, the #word being
--- typed: the three kinds, or the paths a #file:/#image: path goes on to.
function M.items(base)
  local want, path = base:match("^(#%a+:)(.*)$")
  if want ~= "#file:" and want ~= "#image:" then
    local out = {}
    for _, k in ipairs(kinds) do
      if k.word:sub(1, #base) == base then
        local item = { word = k.word, info = k.info, kind = "octet" }
        if k.word == "#buffer" then
          local last = octet().state.last_file
          item.menu = last and api.nvim_buf_is_valid(last) and text.line(M.relative(api.nvim_buf_get_name(last)), 60) or "(no file buffer yet)"
        end
        table.insert(out, item)
      end
    end
    return out
  end
  local rel, prefix = path:match("^(.*/)([^/]*)$")
  rel, prefix = rel or "", prefix or path
  local dir = rel == "" and root() or absolute(rel)
  local out = {}
  if want == "#file:" and rel == "" then
    vim.list_extend(out, open_buffers(path))
  end
  local seen = {}
  for _, it in ipairs(out) do
    seen[it.word] = true
  end
  for _, it in ipairs(entries(dir:gsub("/$", ""), rel, prefix, want)) do
    if not seen[it.word] then
      table.insert(out, it)
    end
  end
  return out
end

-- LSP CompletionItemKind of each item kind.
local lsp_kind = { file = 17, dir = 19, octet = 14 }

--- The items for the #word before the cursor as LSP completion items (for
--- nvim-cmp and blink.cmp): line is the text before the cursor, row the
--- 0-based line; each replaces the #word (byte columns, utf-8). nil when
--- no #word is being typed.
function M.lsp_items(line, row)
  local start = M.start(line)
  if not start then
    return nil
  end
  local out = {}
  for i, it in ipairs(M.items(line:sub(start + 1))) do
    table.insert(out, {
      label = it.abbr or it.word,
      filterText = it.word,
      sortText = string.format("%04d", i),
      kind = lsp_kind[it.kind],
      detail = it.menu or it.info,
      textEdit = {
        newText = it.word,
        range = { start = { line = row, character = start }, ["end"] = { line = row, character = #line } },
      },
    })
  end
  return out
end

--- 'omnifunc' (and 'completefunc') of the input window.
function M.omnifunc(findstart, base)
  if findstart == 1 then
    local line = api.nvim_get_current_line():sub(1, api.nvim_win_get_cursor(0)[2])
    return M.start(line) or -3
  end
  return { words = M.items(base), refresh = "always" }
end

-- Gives nvim-cmp and blink.cmp octet's source when they are loaded (a
-- lazy-loaded one may load only as insert mode starts); returns whether
-- one is (then the built-in menu does not pop up by itself).
local function plugin_completion(buf)
  local cmp = package.loaded["cmp"] ~= nil and require("octet.cmp").attach(buf)
  local blink = package.loaded["blink.cmp"] ~= nil and require("octet.blink").register()
  return cmp or blink
end

-- The user's 'completeopt' while octet's menu pops up by itself (it must
-- not insert a match as you type), restored when completion ends.
local saved_completeopt

local function restore_completeopt()
  if saved_completeopt then
    vim.o.completeopt, saved_completeopt = saved_completeopt, nil
  end
end

-- Pops up the completion menu for the #word before the cursor.
local function popup(buf)
  if api.nvim_get_current_buf() ~= buf or api.nvim_get_mode().mode ~= "i" or vim.fn.pumvisible() == 1 then
    return
  end
  local line = api.nvim_get_current_line():sub(1, api.nvim_win_get_cursor(0)[2])
  if not M.start(line) then
    return
  end
  if not saved_completeopt then
    saved_completeopt = vim.o.completeopt
    vim.o.completeopt = "menu,menuone,noselect"
  end
  api.nvim_feedkeys(api.nvim_replace_termcodes("<C-x><C-o>", true, false, true), "n", false)
end

--- Sets up completion in the input buffer buf.
function M.setup_buffer(buf)
  vim.bo[buf].omnifunc = "v:lua.require'octet.attach'.omnifunc"
  vim.bo[buf].completefunc = "v:lua.require'octet.attach'.omnifunc"
  vim.b[buf].octet_input = true
  local g = api.nvim_create_augroup("octet.attach." .. buf, { clear = true })
  api.nvim_create_autocmd("InsertCharPre", {
    group = g,
    buffer = buf,
    callback = function()
      if vim.v.char == "#" and not plugin_completion(buf) then
        vim.schedule(function()
          popup(buf)
        end)
      end
    end,
  })
  -- After a directory or "#file:" is chosen, the menu goes on with what
  -- is in it.
  api.nvim_create_autocmd("CompleteDone", {
    group = g,
    buffer = buf,
    callback = function()
      restore_completeopt()
      local item = vim.v.completed_item
      local word = type(item) == "table" and item.word or ""
      if word:match("^#%a+:$") or word:match("^#%a+:.*/$") then
        vim.schedule(function()
          popup(buf)
        end)
      end
    end,
  })
  api.nvim_create_autocmd("InsertLeave", {
    group = g,
    buffer = buf,
    callback = restore_completeopt,
  })
  api.nvim_create_autocmd("InsertEnter", {
    group = g,
    buffer = buf,
    callback = function()
      plugin_completion(buf)
    end,
  })
  plugin_completion(buf)
end

return M
