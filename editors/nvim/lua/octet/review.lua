-- Review: :OctetDiff shows a run's changes with keys to keep or revert
-- each file (octet/session/rewind of that path), :OctetRewind takes
-- files and/or the conversation back to an entry of the chat.
local M = {}

local api = vim.api

local function octet()
  return require("octet")
end

local text = require("octet.text")
local notify = text.notify

-- The user entry that started run run_id (files at it are as before the
-- run), from the newest transcript pages.
local function run_start(sid, run_id, cb, before, pages)
  octet().request("octet/session/transcript", { sessionId = sid, beforeEntryId = before, limit = 200 },
    function(err, page)
      if err then
        return cb(err)
      end
      local found
      for _, e in ipairs(page.entries or {}) do
        if e.runId == run_id and e.type == "user" then
          found = e.id
        end
      end
      if found then
        return cb(nil, found)
      end
      local nxt = require("octet.rpc").nn(page.nextBefore)
      if nxt and (pages or 0) < 20 then
        return run_start(sid, run_id, cb, nxt, (pages or 0) + 1)
      end
      cb("the run's first entry is not on the active branch")
    end)
end

local function render(buf, d, status)
  local lines = {
    "octet: changes of run " .. text.line(d.runId),
    "[k] keep file  [x] revert file  [X] revert all  [q] close",
  }
  local at = {}
  for _, ch in ipairs(d.changes) do
    table.insert(lines, "")
    at[#lines + 1] = ch.path
    table.insert(lines, "=== " .. text.line(ch.path) .. " (" .. text.line(ch.kind) .. ")"
      .. (status[ch.path] and ("  [" .. text.line(status[ch.path]) .. "]") or ""))
    for _, l in ipairs(vim.split((ch.diff or ""):gsub("\n$", ""), "\n", { plain = true })) do
      table.insert(lines, l)
      at[#lines] = ch.path
    end
  end
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  return at
end

--- :OctetDiff — the current session's last run's changes.
function M.diff(cb)
  local s = octet().session()
  if not s then
    return notify("no session: :Octet {prompt} or :OctetSessions first", vim.log.levels.WARN)
  end
  if not octet().has("octet/session/diff") then
    return notify("this octet has no octet/session/diff: update octet (:checkhealth octet)", vim.log.levels.WARN)
  end
  octet().request("octet/session/diff", { sessionId = s.id }, function(err, d)
    if err then
      return notify(err, vim.log.levels.ERROR)
    end
    if #(d.changes or {}) == 0 then
      notify("the last run changed no files")
      return cb and cb(nil)
    end
    vim.cmd("tabnew")
    local buf = api.nvim_get_current_buf()
    vim.bo[buf].buftype, vim.bo[buf].bufhidden, vim.bo[buf].swapfile = "nofile", "wipe", false
    pcall(api.nvim_buf_set_name, buf, "octet://diff/" .. s.id)
    vim.bo[buf].filetype = "diff"
    local status = {}
    local at = render(buf, d, status)
    local function revert(paths)
      run_start(s.id, d.runId, function(rerr, entry)
        if rerr then
          return notify(rerr, vim.log.levels.ERROR)
        end
        local params = { sessionId = s.id, entryId = entry, files = true, conversation = false, paths = paths }
        octet().request("octet/session/rewind", params, function(werr, res)
          if werr then
            return notify(werr, vim.log.levels.ERROR)
          end
          for _, ch in ipairs(res.changes or {}) do
            local c = require("octet.rpc").nn(ch.conflict)
            status[ch.path] = c and ("not reverted: " .. c) or "reverted"
          end
          for _, p in ipairs(paths or {}) do
            status[p] = status[p] or "reverted"
          end
          if not paths then
            for _, ch in ipairs(d.changes) do
              status[ch.path] = status[ch.path] or "reverted"
            end
          end
          if api.nvim_buf_is_valid(buf) then
            at = render(buf, d, status)
          end
          vim.b[buf].octet_reverted = vim.deepcopy(status)
        end)
      end)
    end
    local function path()
      return at[api.nvim_win_get_cursor(0)[1]]
    end
    local function map(key, fn)
      vim.keymap.set("n", key, fn, { buffer = buf, nowait = true, silent = true })
    end
    map("x", function()
      local p = path()
      if p then
        revert({ p })
      end
    end)
    map("X", function()
      revert(nil)
    end)
    map("k", function()
      local p = path()
      if p then
        status[p] = "kept"
        at = render(buf, d, status)
      end
    end)
    map("q", "<cmd>close<cr>")
    if cb then
      cb(buf)
    end
  end)
end

--- Renders session s's chat again from its transcript (after the
--- conversation moved).
function M.rerender(s)
  local page = octet().state.conn:request_sync("octet/session/transcript", { sessionId = s.id, limit = 200 }, 10000)
  if not page then
    return
  end
  local entries = {}
  for i = #page.entries, 1, -1 do
    table.insert(entries, page.entries[i])
  end
  s.chat:clear()
  s.chat:transcript(entries, nil, page.runs)
end

--- :OctetRewind — pick an entry of the chat, then what to take back.
function M.rewind()
  local s = octet().session()
  if not s then
    return notify("no session: :Octet {prompt} or :OctetSessions first", vim.log.levels.WARN)
  end
  if not octet().has("octet/session/rewind") then
    return notify("this octet has no octet/session/rewind: update octet (:checkhealth octet)", vim.log.levels.WARN)
  end
  octet().request("octet/session/transcript", { sessionId = s.id, limit = 200 }, function(err, page)
    if err then
      return notify(err, vim.log.levels.ERROR)
    end
    local items = {}
    for _, e in ipairs(page.entries or {}) do
      if e.type == "user" or e.type == "steering" or e.type == "follow_up" then
        table.insert(items, e)
      end
    end
    vim.ui.select(items, {
      prompt = "Rewind to before which prompt?",
      kind = "octet.rewind_entry",
      format_item = function(e)
        return text.line(type(e.time) == "string" and e.time:sub(12, 19) or "") .. "  " .. text.first_line(e.text)
      end,
    }, function(e)
      if not e then
        return
      end
      local what = {
        { "Files and conversation", true, true },
        { "Files only", true, false },
        { "Conversation only", false, true },
      }
      vim.ui.select(what, {
        prompt = "Take back",
        format_item = function(w)
          return w[1]
        end,
      }, function(w)
        if not w then
          return
        end
        -- Files at the prompt entry are as before its run; the
        -- conversation goes back to the entry before the prompt.
        local entry = w[3] and (require("octet.rpc").nn(e.parent) or e.id) or e.id
        local params = { sessionId = s.id, entryId = entry, files = w[2], conversation = w[3] }
        octet().request("octet/session/rewind", params, function(rerr, res)
          if rerr then
            return notify(rerr, vim.log.levels.ERROR)
          end
          local conflicts = 0
          for _, ch in ipairs(res.changes or {}) do
            if require("octet.rpc").nn(ch.conflict) then
              conflicts = conflicts + 1
            end
          end
          if w[3] then
            M.rerender(s)
          end
          s.chat:notice(string.format("Rewound %s to before “%s”: %d file(s)%s.", w[1]:lower(),
            (tostring(e.text):gsub("\n.*", "")), #(res.changes or {}), conflicts > 0 and (", " .. conflicts .. " left as they are (conflicts)") or ""))
        end)
      end)
    end)
  end)
end

return M
