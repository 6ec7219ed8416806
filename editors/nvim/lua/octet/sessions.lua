-- Pickers: sessions (resume, rename, fork, delete), models and policy
-- modes, all through vim.ui.select and vim.ui.input, so telescope,
-- fzf-lua or snacks pickers registered there are used.
local M = {}

local config = require("octet.config")

local function octet()
  return require("octet")
end

local text = require("octet.text")
local notify = text.notify

local function label(s)
  local title = (type(s.title) == "string" and s.title ~= "") and text.line(s.title, 80) or "(untitled)"
  local when = type(s.updatedAt) == "string" and text.line((s.updatedAt:sub(1, 16):gsub("T", " "))) or ""
  local cur = octet().session()
  return (cur and cur.id == s.sessionId and "* " or "  ") .. title .. "  ·  " .. when .. "  ·  " .. text.line(s.sessionId)
end

--- Resumes session sid and shows its chat.
function M.resume(sid, cb)
  octet().resume(sid, function(err, s)
    if err then
      notify("cannot resume " .. sid .. ": " .. err, vim.log.levels.ERROR)
    else
      octet().switch(s)
    end
    if cb then
      cb(err, s)
    end
  end)
end

function M.rename(sid)
  vim.ui.input({ prompt = "New title: " }, function(title)
    if not title or vim.trim(title) == "" then
      return
    end
    octet().request("octet/session/rename", { sessionId = sid, title = title }, function(err)
      if err then
        return notify(err, vim.log.levels.ERROR)
      end
      local s = octet().state.sessions[sid]
      if s then
        s.title = title
        s.chat:set_title(title)
      end
      notify("renamed to " .. title)
    end)
  end)
end

--- Forks session sid at its head and resumes the fork.
function M.fork(sid)
  octet().request("octet/session/transcript", { sessionId = sid, limit = 1 }, function(err, page)
    if err then
      return notify(err, vim.log.levels.ERROR)
    end
    local head = page.entries and page.entries[1]
    if not head then
      return notify("the session is empty: nothing to fork", vim.log.levels.WARN)
    end
    octet().request("octet/session/fork", { sessionId = sid, entryId = head.id }, function(ferr, res)
      if ferr then
        return notify(ferr, vim.log.levels.ERROR)
      end
      M.resume(res.sessionId)
    end)
  end)
end

function M.delete(sid)
  vim.ui.select({ "Delete", "Keep" }, { prompt = "Delete session " .. text.line(sid) .. "?" }, function(choice)
    if choice ~= "Delete" then
      return
    end
    octet().request("octet/session/delete", { sessionId = sid }, function(err)
      if err then
        return notify(err, vim.log.levels.ERROR)
      end
      octet().forget(sid)
      notify("deleted " .. sid)
    end)
  end)
end

-- Each action, and the server feature it needs (initialize's
-- experimental.octet.features; nil: v1).
local actions = {
  { "Resume", M.resume },
  { "Rename", M.rename, "octet/session/rename" },
  { "Fork", M.fork, "octet/session/fork" },
  { "Delete", M.delete, "octet/session/delete" },
}

local function offered()
  local out = {}
  for _, a in ipairs(actions) do
    if not a[3] or octet().has(a[3]) then
      table.insert(out, a)
    end
  end
  return out
end

--- :OctetSessions — pick a session of the workspace, then an action.
function M.pick()
  octet().request("octet/session/list", { cwd = octet().root(), limit = 200 }, function(err, res)
    if err then
      return notify(err, vim.log.levels.ERROR)
    end
    local list = res.sessions or {}
    if #list == 0 then
      return notify("no sessions in this workspace yet: :Octet {prompt} starts one")
    end
    vim.ui.select(list, { prompt = "octet sessions", format_item = label, kind = "octet.session" }, function(s)
      if not s then
        return
      end
      vim.ui.select(offered(), {
        prompt = text.line((type(s.title) == "string" and s.title ~= "") and s.title or s.sessionId),
        format_item = function(a)
          return a[1]
        end,
        kind = "octet.session_action",
      }, function(a)
        if a then
          a[2](s.sessionId)
        end
      end)
    end)
  end)
end

--- :OctetModel — pick the current session's model from octet/models.
function M.pick_model()
  octet().current(function(cerr, s)
    if cerr then
      return
    end
    octet().request("octet/models", nil, function(err, res)
      if err then
        return notify(err, vim.log.levels.ERROR)
      end
      vim.ui.select(res.models or {}, {
        prompt = "octet model (default " .. text.line(res.default) .. ")",
        kind = "octet.model",
        format_item = function(m)
          local window = tonumber(m.contextWindow)
          local s2 = tostring(m.id) .. "  ·  " .. (window and math.floor(window / 1000) .. "K context" or "context unknown")
          if m.listed == false then
            s2 = s2 .. "  ·  not listed by the endpoint"
          end
          if type(m.prices) == "table" then
            s2 = s2 .. "  ·  $" .. tostring(m.prices.input) .. "/$" .. tostring(m.prices.output) .. " per M"
          end
          return text.line(s2)
        end,
      }, function(m)
        if not m then
          return
        end
        octet().request("octet/setModel", { sessionId = s.id, model = m.id }, function(serr, r)
          if serr then
            return notify(serr, vim.log.levels.ERROR)
          end
          s.model = r.effective
          vim.cmd("redrawstatus!")
        end)
      end)
    end)
  end)
end

--- :OctetPolicy without an argument — pick the mode.
function M.pick_mode()
  local modes = { "ask", "auto-read", "full" }
  local text = {
    ask = "Ask — approve every edit and every command",
    ["auto-read"] = "Auto-read — approve edits and commands that are not read-only",
    full = "Full access — nothing is asked",
  }
  vim.ui.select(modes, {
    prompt = "octet policy mode",
    kind = "octet.mode",
    format_item = function(m)
      return text[m]
    end,
  }, function(m)
    if m then
      octet().set_mode(m)
    end
  end)
end

M.modes = config.modes
return M
