-- JSON-RPC 2.0 over the LSP base protocol (Content-Length framing) on a
-- child process's stdio. octet.nvim talks to `octet lsp` with this rather
-- than with vim.lsp: the server asks for approvals with requests a person
-- answers minutes later, and vim.lsp answers server requests synchronously
-- (see the README's "Why not vim.lsp"). Works on Neovim 0.7 and later.
local M = {}

local uv = vim.uv or vim.loop

--- Turns vim.NIL (JSON null) into nil.
function M.nn(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

local Conn = {}
Conn.__index = Conn

local function encode(msg)
  local body = vim.json.encode(msg)
  return "Content-Length: " .. #body .. "\r\n\r\n" .. body
end

--- Starts cmd (a list: program and arguments) and returns a connection.
--- handlers: {notification = fn(method, params), request = fn(method,
--- params, respond, id), cancel = fn(id), exit = fn(code, stderr_tail)}.
--- Callbacks run on the main loop (vim.schedule).
function M.start(cmd, opts, handlers)
  local stdin, stdout, stderr = uv.new_pipe(false), uv.new_pipe(false), uv.new_pipe(false)
  local self = setmetatable({
    handlers = handlers,
    next_id = 0,
    pending = {},
    buf = "",
    stderr_tail = "",
    closed = false,
    stdin = stdin,
  }, Conn)
  local env
  if opts.env and next(opts.env) then
    env = {}
    for k, v in pairs(vim.fn.environ()) do
      if opts.env[k] == nil then
        table.insert(env, k .. "=" .. v)
      end
    end
    for k, v in pairs(opts.env) do
      if v ~= false then
        table.insert(env, k .. "=" .. tostring(v))
      end
    end
  end
  local handle, pid = uv.spawn(cmd[1], {
    args = vim.list_slice(cmd, 2),
    stdio = { stdin, stdout, stderr },
    cwd = opts.cwd,
    env = env,
  }, function(code, signal)
    self.closed = true
    for _, h in ipairs({ stdin, self.handle }) do
      if h and not h:is_closing() then
        h:close()
      end
    end
    vim.schedule(function()
      for id, cb in pairs(self.pending) do
        self.pending[id] = nil
        cb({ code = -32099, message = "octet lsp exited (code " .. code .. ")" }, nil)
      end
      if handlers.exit then
        handlers.exit(code, signal, self.stderr_tail)
      end
    end)
  end)
  if not handle then
    for _, p in ipairs({ stdin, stdout, stderr }) do
      p:close()
    end
    return nil, "cannot start " .. cmd[1] .. ": " .. tostring(pid)
  end
  self.handle, self.pid = handle, pid
  stdout:read_start(function(err, data)
    if err or not data then
      if not stdout:is_closing() then
        stdout:close()
      end
      return
    end
    self.buf = self.buf .. data
    self:drain()
  end)
  stderr:read_start(function(_, data)
    if data then
      self.stderr_tail = (self.stderr_tail .. data):sub(-4000)
    elseif not stderr:is_closing() then
      stderr:close()
    end
  end)
  return self
end

-- drain decodes every complete frame in the buffer (fast context).
function Conn:drain()
  while true do
    local hend = self.buf:find("\r\n\r\n", 1, true)
    if not hend then
      return
    end
    local header = self.buf:sub(1, hend - 1)
    local len = tonumber(header:match("[Cc]ontent%-[Ll]ength:%s*(%d+)"))
    if not len then
      self.buf = self.buf:sub(hend + 4)
    else
      if #self.buf < hend + 3 + len then
        return
      end
      local body = self.buf:sub(hend + 4, hend + 3 + len)
      self.buf = self.buf:sub(hend + 4 + len)
      vim.schedule(function()
        self:dispatch(body)
      end)
    end
  end
end

function Conn:dispatch(body)
  local ok, msg = pcall(vim.json.decode, body)
  if not ok or type(msg) ~= "table" then
    return
  end
  local id = M.nn(msg.id)
  if msg.method and id ~= nil then
    local answered = false
    local function respond(result, err)
      if answered then
        return
      end
      answered = true
      if err then
        self:send({ jsonrpc = "2.0", id = id, error = err })
      else
        self:send({ jsonrpc = "2.0", id = id, result = result == nil and vim.NIL or result })
      end
    end
    local hok, herr = pcall(self.handlers.request, msg.method, M.nn(msg.params), respond, id)
    if not hok then
      respond(nil, { code = -32603, message = tostring(herr) })
    end
  elseif msg.method then
    if msg.method == "$/cancelRequest" and type(msg.params) == "table" and self.handlers.cancel then
      self.handlers.cancel(msg.params.id)
    else
      self.handlers.notification(msg.method, M.nn(msg.params))
    end
  elseif id ~= nil then
    local cb = self.pending[id]
    self.pending[id] = nil
    if cb then
      cb(M.nn(msg.error), M.nn(msg.result))
    end
  end
end

function Conn:send(msg)
  if self.closed then
    return false
  end
  self.stdin:write(encode(msg))
  return true
end

--- Sends a request; cb(err, result) runs when the answer arrives. Returns
--- the request id.
function Conn:request(method, params, cb)
  self.next_id = self.next_id + 1
  local id = self.next_id
  self.pending[id] = cb or function() end
  if not self:send({ jsonrpc = "2.0", id = id, method = method, params = params or vim.empty_dict() }) then
    self.pending[id] = nil
    if cb then
      cb({ code = -32099, message = "octet lsp is not running" }, nil)
    end
  end
  return id
end

function Conn:notify(method, params)
  return self:send({ jsonrpc = "2.0", method = method, params = params or vim.empty_dict() })
end

--- Sends a request and waits for its answer (at most timeout ms).
function Conn:request_sync(method, params, timeout)
  local done, rerr, rres = false, nil, nil
  self:request(method, params, function(err, res)
    done, rerr, rres = true, err, res
  end)
  if not vim.wait(timeout or 5000, function()
    return done
  end, 10) then
    return nil, { code = -32098, message = method .. " timed out" }
  end
  return rres, rerr
end

--- Stops the process: shutdown and exit, then a kill after grace ms.
function Conn:stop(grace)
  if self.closed then
    return
  end
  self:request("shutdown", nil, function()
    self:notify("exit")
  end)
  local h = self.handle
  vim.defer_fn(function()
    if not self.closed and h and not h:is_closing() then
      h:kill(15)
    end
  end, grace or 2000)
end

return M
