-- Test helpers for the octet.nvim scripts run by nvim_test.go: facts
-- recorded with T.fact are written as JSON to $OCTET_TEST_RESULT when
-- the script ends (T.done) or fails (T.fail).
local T = {}
T.ws = os.getenv("OCTET_TEST_WORKSPACE")
T.bin = os.getenv("OCTET_BIN")
local facts = {}

-- Stops octet lsp and waits until it has exited (its session files
-- settled) before Neovim quits and the test removes the directories.
local function stop()
  local ok, octet = pcall(require, "octet")
  if ok and octet.state and octet.state.conn then
    octet.stop(10000)
  end
end

local function write()
  local f = assert(io.open(os.getenv("OCTET_TEST_RESULT"), "w"))
  f:write(vim.json.encode(facts))
  f:close()
end

function T.fact(k, v)
  facts[k] = v
end

function T.facts()
  return facts
end

function T.done()
  stop()
  write()
  vim.cmd("qa!")
end

function T.fail(msg)
  facts.failed = msg
  stop()
  write()
  vim.cmd("qa!")
end

--- Waits until cond() is true (at most ms), else fails naming what.
function T.wait(what, cond, ms)
  if not vim.wait(ms or 30000, cond, 20) then
    T.fail("timed out waiting for " .. what)
  end
end

--- The lines of buf joined by "\n".
function T.text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
end

--- The first floating window (the approval float), or nil.
function T.float()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(win).relative ~= "" then
      return win
    end
  end
end

--- Waits until the approval float takes its keys (an approval float that
--- opens by itself does once no key was typed for a moment).
function T.armed()
  T.wait("the approval float's keys", function()
    local win = T.float()
    return win and vim.b[vim.api.nvim_win_get_buf(win)].octet_armed == true
  end)
end

--- Sets up the plugin for the test workspace.
function T.setup(extra)
  local octet = require("octet")
  octet.setup(vim.tbl_extend("force", { cmd = { T.bin, "lsp" }, root = T.ws }, extra or {}))
  return octet
end

--- Runs the command cmd and returns the session it opens (what: the
--- wait's name, "a session" by default).
function T.start(octet, cmd, what)
  vim.cmd(cmd)
  T.wait(what or "a session", function()
    return octet.session() ~= nil
  end)
  return octet.session()
end

--- Waits (up to a minute) until session s has shown n answers.
function T.answered(s, n, what)
  T.wait(what, function()
    return (s.answers or 0) >= n
  end, 60000)
end

--- Waits until the current session's run is over.
function T.wait_idle(octet, what)
  T.wait(what or "the run to end", function()
    local s = octet.session()
    return s and s.state == "idle" and s.run_id == nil and not s.sending
  end, 60000)
end

-- A script error fails the test instead of hanging.
function T.run(fn)
  local ok, err = xpcall(fn, debug.traceback)
  if not ok then
    T.fail("script error: " .. tostring(err))
  end
end

-- T.async runs fn as a coroutine: T.await and T.sleep in it wait without
-- blocking Neovim's main loop, so keys given with nvim_input are handled
-- as typed (a blocking vim.wait does not run them).
function T.async(fn)
  local co = coroutine.create(function()
    T.run(fn)
  end)
  local ok, err = coroutine.resume(co)
  if not ok then
    T.fail("script error: " .. tostring(err))
  end
end

--- In T.async: waits until cond() is true (at most ms); returns whether
--- it became true.
function T.try_await(cond, ms)
  local co = coroutine.running()
  local uv = vim.uv or vim.loop
  local deadline = uv.now() + (ms or 30000)
  local timer = uv.new_timer()
  timer:start(20, 20, vim.schedule_wrap(function()
    local done = cond()
    if done or uv.now() > deadline then
      if not timer:is_closing() then
        timer:stop()
        timer:close()
        local ok, err = coroutine.resume(co, done and true or false)
        if not ok then
          T.fail("script error: " .. tostring(err))
        end
      end
    end
  end))
  return coroutine.yield()
end

--- In T.async: waits until cond() is true (at most ms), else fails naming
--- what.
function T.await(what, cond, ms)
  if not T.try_await(cond, ms) then
    T.fail("timed out waiting for " .. what)
  end
end

--- In T.async: lets Neovim run for ms.
function T.sleep(ms)
  local uv = vim.uv or vim.loop
  local until_ = uv.now() + ms
  T.try_await(function()
    return uv.now() >= until_
  end, ms + 1000)
end

vim.defer_fn(function()
  T.fail("the script timed out")
end, 100000)

return T
