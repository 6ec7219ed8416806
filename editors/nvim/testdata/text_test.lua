-- octet.text, the helper every untrusted string goes through: the cases
-- in $OCTET_TEST_INPUT (function, hex input, max) and every code point
-- from U+0080 up, reporting the ones shown as ⟨U+XXXX⟩. Driven by
-- TestTextShowsWhatADisplayHides.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
local text = require("octet.text")

local function unhex(h)
  return (h:gsub("%x%x", function(b)
    return string.char(tonumber(b, 16))
  end))
end

-- The UTF-8 encoding of code point cp.
local function utf8(cp)
  local bit = require("bit")
  if cp < 0x800 then
    return string.char(0xC0 + bit.rshift(cp, 6), 0x80 + bit.band(cp, 0x3F))
  elseif cp < 0x10000 then
    return string.char(0xE0 + bit.rshift(cp, 12), 0x80 + bit.band(bit.rshift(cp, 6), 0x3F), 0x80 + bit.band(cp, 0x3F))
  end
  return string.char(0xF0 + bit.rshift(cp, 18), 0x80 + bit.band(bit.rshift(cp, 12), 0x3F),
    0x80 + bit.band(bit.rshift(cp, 6), 0x3F), 0x80 + bit.band(cp, 0x3F))
end

T.run(function()
  local f = assert(io.open(os.getenv("OCTET_TEST_INPUT")))
  local cases = vim.json.decode(f:read("*a"))
  f:close()
  local out = {}
  for _, c in ipairs(cases) do
    table.insert(out, text[c.fn](unhex(c.hex), c.max ~= 0 and c.max or nil))
  end
  T.fact("out", out)
  local escaped = {}
  for cp = 0x80, 0x10FFFF do
    if cp < 0xD800 or cp > 0xDFFF then
      local s = text.line(utf8(cp))
      if s:sub(1, #"⟨U+") == "⟨U+" then
        if s ~= string.format("⟨U+%04X⟩", cp) then
          T.fail(string.format("U+%04X is shown as %s", cp, s))
        end
        table.insert(escaped, cp)
      end
    end
  end
  T.fact("escaped", escaped)
  T.done()
end)
