-- Headless Neovim (0.7.2 API: vim.lsp.start_client; also run on newer
-- builds) as a real client of `octet lsp` for the approval choices: it
-- approves an edit for the session, sees the next edit of the same file
-- admitted by the standing rule without a prompt, denies a bash call with
-- a reason, lists and revokes the rule, and is asked again. It writes one
-- line of facts to $OCTET_TEST_RESULT. Driven by server/nvim_test.go.
local bin = os.getenv("OCTET_BIN")
local ws = os.getenv("OCTET_TEST_WORKSPACE")
local result_path = os.getenv("OCTET_TEST_RESULT")

local done = false
local function finish(msg)
  if done then
    return
  end
  done = true
  local f = io.open(result_path, "w")
  f:write(msg .. "\n")
  f:close()
  vim.cmd("qa!")
end

local asked = {}
local decisions = {}
local scope_path = "none"

local caps = vim.lsp.protocol.make_client_capabilities()
caps.experimental = { octet = { confirmEffect = true, events = true } }

local function fail(what, err)
  finish("fail " .. what .. ": " .. vim.inspect(err))
end

local client_id = vim.lsp.start_client({
  name = "octet",
  cmd = { bin, "lsp" },
  root_dir = ws,
  workspace_folders = { { uri = vim.uri_from_fname(ws), name = "ws" } },
  capabilities = caps,
  handlers = {
    ["octet/confirmEffect"] = function(_, p, _)
      table.insert(asked, p.callId)
      if p.callId == "call_1" then
        if type(p.ruleScope) == "table" then
          scope_path = p.ruleScope.path
        end
        return { decision = "approve_for_session", digest = p.digest }
      end
      if p.tool == "bash" then
        return { decision = "deny", digest = p.digest, reason = "use make instead" }
      end
      return { decision = "approve", digest = p.digest }
    end,
    ["octet/event"] = function(_, p, _)
      local e = p.event
      if e.kind == "tool_policy_decision" then
        local rule = (type(e.ruleId) == "string") and "rule" or "-"
        table.insert(decisions, e.callId .. ":" .. tostring(e.reason) .. ":" .. rule)
      end
    end,
    ["window/workDoneProgress/create"] = function()
      return vim.NIL
    end,
  },
  on_init = function(client)
    client.request("octet/session/new", { title = "nvim" }, function(err, s)
      if err then
        return fail("session/new", err)
      end
      local sid = s.sessionId
      client.request("octet/prompt", { sessionId = sid, text = "edit twice, then run" }, function(perr, first)
        if perr then
          return fail("prompt", perr)
        end
        client.request("octet/approvals/list", { sessionId = sid }, function(lerr, list)
          if lerr then
            return fail("approvals/list", lerr)
          end
          local rules = #list.rules
          local rule_id = rules > 0 and list.rules[1].ruleId or "none"
          client.request("octet/approvals/revoke", { sessionId = sid, ruleId = rule_id }, function(rerr)
            if rerr then
              return fail("approvals/revoke", rerr)
            end
            client.request("octet/prompt", { sessionId = sid, text = "edit again" }, function(serr, second)
              if serr then
                return fail("second prompt", serr)
              end
              client.request("octet/session/resume", { sessionId = sid }, function(_, res)
                local reason = "none"
                for _, e in ipairs(res.transcript) do
                  if type(e.result) == "table" and e.result.callId == "call_3" then
                    reason = e.result.text
                  end
                end
                finish(string.format("ok first=%s second=%s rules=%d scope=%s asked=%s decisions=%s bash=%q",
                  first.outcome, second.outcome, rules, tostring(scope_path), table.concat(asked, ","),
                  table.concat(decisions, ","), reason))
              end)
            end)
          end)
        end)
      end)
    end)
  end,
  on_exit = function(code)
    finish("fail server exited early with " .. tostring(code))
  end,
})
if not client_id then
  finish("fail start_client")
end
vim.defer_fn(function()
  finish("fail timed out")
end, 60000)
