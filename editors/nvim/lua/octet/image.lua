-- Images attached to a prompt with #image:path: read, recognized by their
-- bytes (PNG, JPEG, GIF, WebP, as octet recognizes them) and sent as
-- octet/prompt context {type = "image", mimeType, data} (base64).
local M = {}

--- The most one image may be (octet refuses more: 20 MiB).
M.max_bytes = 20 * 1024 * 1024

--- The MIME type of an image's bytes, or nil.
function M.sniff(data)
  if data:sub(1, 8) == "\137PNG\r\n\26\n" then
    return "image/png"
  elseif data:sub(1, 3) == "\255\216\255" then
    return "image/jpeg"
  elseif data:sub(1, 6) == "GIF87a" or data:sub(1, 6) == "GIF89a" then
    return "image/gif"
  elseif data:sub(1, 4) == "RIFF" and data:sub(9, 12) == "WEBP" then
    return "image/webp"
  end
end

local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

--- Standard base64 of data (vim.base64 where Neovim has it, 0.10 on).
function M.base64(data)
  if vim.base64 then
    return vim.base64.encode(data)
  end
  local out, n = {}, #data
  for i = 1, n, 3 do
    local a, b, c = data:byte(i, i + 2)
    local v = a * 65536 + (b or 0) * 256 + (c or 0)
    local q1, q2 = math.floor(v / 262144), math.floor(v / 4096) % 64
    local q3, q4 = math.floor(v / 64) % 64, v % 64
    out[#out + 1] = alphabet:sub(q1 + 1, q1 + 1) .. alphabet:sub(q2 + 1, q2 + 1)
      .. (b and alphabet:sub(q3 + 1, q3 + 1) or "=") .. (c and alphabet:sub(q4 + 1, q4 + 1) or "=")
  end
  return table.concat(out)
end

--- path, or path without trailing punctuation ("#image:a.png?") when
--- only that names a file.
local function existing(path)
  local uv = vim.uv or vim.loop
  if uv.fs_stat(path) then
    return path
  end
  local bare = path:gsub("[%.,;:!%?%)]+$", "")
  if bare ~= path and uv.fs_stat(bare) then
    return bare
  end
  return path
end

--- The context item of the image file at path, or nil and why not.
function M.attachment(path)
  path = existing(path)
  local f, err = io.open(path, "rb")
  if not f then
    return nil, "cannot read " .. path .. ": " .. tostring(err)
  end
  local data = f:read(M.max_bytes + 1) or ""
  f:close()
  if #data > M.max_bytes then
    return nil, path .. " is over 20 MiB; attach a smaller image"
  end
  local mime = M.sniff(data)
  if not mime then
    return nil, path .. " is not a PNG, JPEG, GIF or WebP image"
  end
  return { type = "image", mimeType = mime, data = M.base64(data) }
end

return M
