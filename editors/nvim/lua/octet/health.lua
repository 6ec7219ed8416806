-- :checkhealth octet — the binary and its version, the protocol version
-- and features, credentials (presence only, never their value), the
-- policy mode, the Neovim version and what is degraded.
local M = {}

local config = require("octet.config")
local rpc = require("octet.rpc")

local h = vim.health or {}
local legacy = not h.start and require("health") or {}
local start = h.start or h.report_start or legacy.report_start
local ok = h.ok or h.report_ok or legacy.report_ok
local info = h.info or h.report_info or legacy.report_info
local warn = h.warn or h.report_warn or legacy.report_warn
local error = h.error or h.report_error or legacy.report_error

-- The v1.1 features the plugin uses, and what is missing without each.
local wanted = {
  ["octet/session/rename"] = "renaming sessions",
  ["octet/session/fork"] = "forking sessions",
  ["octet/session/delete"] = "deleting sessions",
  ["octet/session/transcript"] = "rewind and fork pickers",
  ["octet/session/diff"] = ":OctetDiff",
  ["octet/session/rewind"] = ":OctetRewind and per-file revert",
  ["octet/models"] = ":OctetModel",
  ["octet/session/setPolicy"] = "policy modes (sessions would run under the launch policy)",
  ["approve_for_session"] = "approve for session",
}

local function env(name)
  local v = config.options.env[name]
  if v == false then
    return nil
  end
  if v ~= nil then
    return tostring(v)
  end
  return vim.env[name]
end

local function check_nvim()
  start("Neovim")
  local v = vim.version()
  local s = string.format("%d.%d.%d", v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.7") ~= 1 then
    return error("Neovim " .. s .. " is too old: octet.nvim needs 0.7 or later")
  end
  ok("Neovim " .. s)
  if vim.fn.has("nvim-0.8") ~= 1 then
    warn("degraded on Neovim " .. s .. ": the side-by-side approval view has no syntax highlighting"
      .. " (vim.filetype.match is 0.8+); chat, approvals, sessions and review work")
  end
end

-- Starts a throwaway `octet lsp`, initializes it and reports what it says.
local function check_server(bin)
  start("octet lsp")
  local root = require("octet").root()
  local shown = {}
  local conn, err = rpc.start({ bin, unpack(vim.list_slice(config.options.cmd, 2)) }, { cwd = root, env = config.options.env }, {
    notification = function(method, p)
      if method == "window/showMessage" then
        table.insert(shown, p)
      end
    end,
    request = function(_, _, respond)
      respond(vim.NIL)
    end,
    exit = function() end,
  })
  if not conn then
    return error(err)
  end
  local uri = vim.uri_from_fname(root)
  local res, ierr = conn:request_sync("initialize", {
    processId = vim.fn.getpid(),
    rootUri = uri,
    workspaceFolders = { { uri = uri, name = "workspace" } },
    capabilities = { experimental = { octet = { confirmEffect = true } } },
  }, 10000)
  if ierr then
    conn:stop(200)
    return error("initialize failed: " .. tostring(ierr.message) .. " (octet's stderr: "
      .. vim.trim(conn.stderr_tail) .. ")")
  end
  conn:notify("initialized", vim.empty_dict())
  vim.wait(300, function()
    return #shown > 0
  end, 10)
  local o = (res.capabilities or {}).experimental
  o = type(o) == "table" and o.octet or {}
  local version = tonumber(o.version) or 1
  if version >= 2 then
    ok("protocol version " .. version .. " (" .. #(o.features or {}) .. " v1.1 features)")
  else
    warn("protocol version " .. version .. ": sessions, review and policy modes need v1.1 (octet 2026.11 or later)")
  end
  local have = {}
  for _, f in ipairs(o.features or {}) do
    have[f] = true
  end
  local missing = {}
  for f, what in pairs(wanted) do
    if not have[f] then
      table.insert(missing, f .. " (" .. what .. ")")
    end
  end
  table.sort(missing)
  if #missing > 0 then
    warn("degraded: the server lacks " .. table.concat(missing, ", "))
  end
  if not o.confirmEffect then
    warn("the server does not offer octet/confirmEffect: approvals come as plain message requests")
  end
  local problem = false
  for _, m in ipairs(shown) do
    if m.type == 1 then
      problem = true
      error("configuration problem: " .. tostring(m.message))
    end
  end
  if not problem then
    ok("configuration loads (workspace " .. root .. ")")
  end
  conn:stop(500)
  vim.wait(2000, function()
    return conn.closed
  end, 10)
  return problem
end

local function check_credentials()
  start("Credentials")
  if env("OPENAI_API_KEY") and env("OPENAI_API_KEY") ~= "" then
    return ok("OPENAI_API_KEY is set (its value is not shown)")
  end
  local home = env("OCTET_HOME") or ((vim.uv or vim.loop).os_homedir() .. "/.octet")
  if vim.fn.filereadable(home .. "/credentials") == 1 then
    return ok("credentials file present: " .. home .. "/credentials (its content is not shown)")
  end
  local base = env("OPENAI_BASE_URL") or ""
  if base:match("^https?://127%.0%.0%.1") or base:match("^https?://localhost") or base:match("^https?://%[::1%]") then
    return info("no API key; the provider " .. base .. " is on loopback, where none is needed")
  end
  error("no API key: set OPENAI_API_KEY (in the environment, or setup{ env = { OPENAI_API_KEY = … } }) or write "
    .. home .. "/credentials")
end

local function check_policy()
  start("Policy")
  local mode = config.options.mode
  local msg = "new sessions start in mode " .. mode .. " (" .. config.modes[mode] .. "); :OctetPolicy switches"
  if mode == "full" then
    warn(msg .. " — full access: nothing is asked before edits and commands")
  else
    ok(msg)
  end
  local launch = env("OCTET_EFFECT_POLICY")
  info("launch policy of octet lsp: " .. (launch or "unsafe_host (octet's default)")
    .. "; a session may only be tightened below it")
  local s = require("octet").session()
  if s and s.policy then
    local name = config.mode_names[s.policy] or s.policy
    local line = "current session " .. s.id .. ": " .. name
    if s.policy == "unsafe_host" then
      warn(line .. " (full access)")
    else
      ok(line)
    end
  end
  if s and s.sandbox then
    if s.sandbox == "no OS sandbox" then
      warn("OS sandbox: unavailable on this host; commands are only admitted by the policy, not confined (see octet's docs/security.md)")
    else
      info("OS sandbox of the current session's commands: " .. s.sandbox)
    end
  end
end

function M.check()
  check_nvim()
  start("octet binary")
  local bin = config.options.cmd[1]
  local path = vim.fn.exepath(bin)
  if path == "" then
    error("the octet binary " .. vim.inspect(bin) .. " was not found (PATH or setup{ cmd = { '/path/to/octet', 'lsp' } });"
      .. " install it with: go install github.com/octet-agent/octet/cmd/octet@latest")
  else
    local out = vim.fn.system({ path, "version" })
    if vim.v.shell_error ~= 0 then
      error(path .. " version failed: " .. vim.trim(out))
    else
      ok(path .. ": " .. vim.trim(out))
    end
    check_server(path)
  end
  check_credentials()
  check_policy()
end

return M
