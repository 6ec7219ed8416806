-- Headless Neovim (0.7.2 API: vim.lsp.start_client) as a real client of
-- `octet lsp`: it creates a session, sends a prompt, answers the
-- octet/confirmEffect the scripted model's edit triggers, and writes the
-- outcome to $OCTET_TEST_RESULT. Driven by server/nvim_test.go.
local bin = os.getenv("OCTET_BIN")
local ws = os.getenv("OCTET_TEST_WORKSPACE")
local result_path = os.getenv("OCTET_TEST_RESULT")

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

local events = 0
local confirmations = 0
local progress = {}

local caps = vim.lsp.protocol.make_client_capabilities()
caps.experimental = { octet = { confirmEffect = true, events = true } }

local client_id = vim.lsp.start_client({
  name = "octet",
  cmd = { bin, "lsp" },
  root_dir = ws,
  workspace_folders = { { uri = vim.uri_from_fname(ws), name = "ws" } },
  capabilities = caps,
  handlers = {
    ["octet/confirmEffect"] = function(_, params, _)
      confirmations = confirmations + 1
      note("confirmEffect " .. params.tool .. " " .. params.title)
      -- Refusals and approvals are results; the digest is echoed.
      return { decision = "approve", digest = params.digest }
    end,
    ["octet/event"] = function(_, params, _)
      events = events + 1
      note("event " .. params.seq .. " " .. params.event.kind)
    end,
    ["$/progress"] = function(_, params, _)
      table.insert(progress, params.value.kind)
    end,
    ["window/workDoneProgress/create"] = function()
      return vim.NIL
    end,
  },
  on_init = function(client)
    client.request("octet/session/new", { title = "nvim" }, function(err, res)
      if err then
        return finish(false, "session/new: " .. vim.inspect(err))
      end
      note("session " .. res.sessionId)
      client.request("octet/prompt", { sessionId = res.sessionId, text = "edit a.txt" }, function(perr, pres)
        if perr then
          return finish(false, "prompt: " .. vim.inspect(perr))
        end
        local f = io.open(ws .. "/a.txt")
        local content = f:read("*a")
        f:close()
        local ok = pres.outcome == "completed" and content == "goodbye world\n" and confirmations == 1 and events > 3
        finish(ok, string.format("outcome=%s confirmations=%d events=%d progress=%s content=%q",
          pres.outcome, confirmations, events, table.concat(progress, ","), content))
      end)
    end)
  end,
  on_exit = function(code)
    finish(false, "server exited early with " .. tostring(code))
  end,
})
if not client_id then
  finish(false, "start_client failed")
end
vim.defer_fn(function()
  finish(false, "timed out")
end, 60000)
