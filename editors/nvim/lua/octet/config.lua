-- Configuration of octet.nvim: defaults merged with require("octet").setup{}.
local M = {}

--- The policy modes a person switches between, and the server's names.
M.modes = {
  ask = "controlled_bash_approval",
  ["auto-read"] = "controlled",
  full = "unsafe_host",
}
M.mode_names = {
  controlled_bash_approval = "ask",
  controlled = "auto-read",
  unsafe_host = "full",
}

M.defaults = {
  -- The octet binary and the arguments that start the editor server.
  cmd = { "octet", "lsp" },
  -- Extra environment for the server process ({NAME = "value"}; false
  -- removes a variable).
  env = {},
  -- Workspace root: a directory, or a function returning one. Default:
  -- Neovim's current directory when octet starts.
  root = nil,
  -- Policy mode sessions start in: "ask" (edits and every command are
  -- approved), "auto-read" (edits and non-read-only commands are
  -- approved) or "full" (full access). :OctetPolicy switches.
  mode = "ask",
  -- Model of new sessions (nil: the configured default).
  model = nil,
  -- Resume the workspace's last session on the first :Octet.
  resume_last = true,
  -- Where the chat opens: "vertical", "horizontal" or "tab".
  layout = "vertical",
  width = 80,
  height = 15,
  input_height = 5,
  -- Buffer-local keys. Chat input: send (prompt, or steer a running run),
  -- follow_up (queue for when the run ends). Approval float: approve,
  -- approve_session, deny, deny_reason, close, side_by_side. Chat:
  -- stop_agent (stop the subagent whose block is under the cursor).
  keymaps = {
    send = "<C-s>",
    follow_up = "<C-f>",
    cancel = "<C-c>",
    approve = "a",
    approve_session = "s",
    deny = "d",
    deny_reason = "r",
    close = "q",
    side_by_side = "v",
    stop_agent = "gX",
  },
  -- An approval float that opens by itself takes its keys once no key was
  -- typed for this many ms (keys typed as it pops up were meant for
  -- something else); 0 takes them at once.
  approval_delay = 500,
  -- Server log level sent as window/logMessage to :messages (nil: none).
  log_level = nil,
}

M.options = vim.deepcopy(M.defaults)

function M.set(opts)
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  if not M.modes[M.options.mode] then
    vim.notify("octet: unknown mode " .. tostring(M.options.mode) .. " (ask, auto-read, full); using ask",
      vim.log.levels.WARN)
    M.options.mode = "ask"
  end
  return M.options
end

return M
