-- A blink.cmp source of octet's attachments (#buffer, #file:, #image:) for
-- the input window, registered with blink.cmp when it is loaded (octet
-- does not depend on it); or configure it yourself as a provider with
-- module = "octet.blink". Its items are octet.attach's.
local M = {}
M.__index = M

--- blink.cmp's constructor of the source.
function M.new()
  return setmetatable({}, M)
end

function M:enabled()
  return vim.b.octet_input == true
end

function M:get_trigger_characters()
  return { "#", ":", "/" }
end

function M:get_completions(ctx, callback)
  local line = ctx.line:sub(1, ctx.cursor[2])
  local items = require("octet.attach").lsp_items(line, ctx.cursor[1] - 1) or {}
  callback({ items = items, is_incomplete_forward = true, is_incomplete_backward = true })
end

local registered = false

--- Adds the source to blink.cmp (once) for the input window's filetype;
--- returns true.
function M.register()
  if registered then
    return true
  end
  registered = true
  local blink = require("blink.cmp")
  if blink.add_source_provider then
    -- A provider the user configured as "octet" stays as it is.
    pcall(blink.add_source_provider, "octet", { name = "octet", module = "octet.blink" })
    pcall(blink.add_filetype_source, "markdown", "octet")
  end
  return true
end

return M
