-- An nvim-cmp source of octet's attachments (#buffer, #file:, #image:) for
-- the input window, given to nvim-cmp when it is loaded; octet does not
-- depend on it. Its items are octet.attach's.
local M = {}

local api = vim.api
local source = {}
source.__index = source

function source:is_available()
  return vim.b.octet_input == true
end

function source:get_debug_name()
  return "octet"
end

-- The items' columns are bytes.
function source:get_position_encoding_kind()
  return "utf-8"
end

function source:get_keyword_pattern()
  return [[#\%(\w\|[:/._~+-]\)*]]
end

function source:get_trigger_characters()
  return { "#", ":", "/" }
end

function source:complete(params, callback)
  local ctx = params.context
  local items = require("octet.attach").lsp_items(ctx.cursor_before_line, ctx.cursor.row - 1)
  -- Incomplete: typing on into a directory asks again.
  callback({ items = items or {}, isIncomplete = true })
end

local registered = false
local attached = {}

--- Registers the source (once) and makes it the first of buffer buf's
--- sources (the others stay). Returns true.
function M.attach(buf)
  local cmp = require("cmp")
  if not registered then
    cmp.register_source("octet", setmetatable({}, source))
    registered = true
  end
  if not attached[buf] and api.nvim_buf_is_valid(buf) then
    attached[buf] = true
    api.nvim_buf_call(buf, function()
      local sources = { { name = "octet" } }
      for _, s in ipairs(cmp.get_config().sources or {}) do
        if s.name ~= "octet" then
          table.insert(sources, s)
        end
      end
      cmp.setup.buffer({ sources = sources })
    end)
  end
  return true
end

return M
