-- Text that octet, the model or the repository wrote, made safe to show.
-- Every such string goes through here before it reaches a place that
-- interprets it: a buffer line (a newline would split it, or fail), a
-- statusline (where "%" starts an item, and "%{…}" runs an expression
-- when the component is used as one), a picker label or a notification.
--
-- The notation follows octet's approval previews (tools/approval_text.go):
-- C0 controls and DEL in caret notation (^[, ^J, ^?), invalid UTF-8 as
-- \xNN, and characters a display hides or that reorder the text around
-- them (C1 controls, bidirectional controls, zero-width and other format
-- characters, unusual spaces, variation selectors, tag characters) as
-- ⟨U+XXXX⟩; a literal ⟨ is escaped too, so octet's marks are told apart
-- from the text's own. Nothing is dropped unless a maximum is given.
local M = {}

-- Code points shown as ⟨U+XXXX⟩, as sorted {first, last} ranges: the
-- Unicode Cf, Zs (but the ASCII space), Zl and Zp categories, variation
-- selectors, C1 controls and the invisible fillers tools/approval_text.go
-- names.
local hidden = {
  { 0x0080, 0x00A0 }, -- C1 controls, no-break space
  { 0x00AD, 0x00AD }, -- soft hyphen
  { 0x034F, 0x034F }, -- combining grapheme joiner
  { 0x0600, 0x0605 },
  { 0x061C, 0x061C }, -- Arabic letter mark
  { 0x06DD, 0x06DD },
  { 0x070F, 0x070F },
  { 0x0890, 0x0891 },
  { 0x08E2, 0x08E2 },
  { 0x115F, 0x1160 }, -- Hangul fillers
  { 0x1680, 0x1680 },
  { 0x17B4, 0x17B5 }, -- Khmer inherent vowels
  { 0x180B, 0x180F }, -- Mongolian variation selectors and vowel separator
  { 0x2000, 0x200F }, -- spaces, zero-width characters, LRM, RLM
  { 0x2028, 0x202F }, -- line and paragraph separators, bidi embeddings and overrides
  { 0x205F, 0x206F }, -- word joiner, invisible operators, bidi isolates
  { 0x27E8, 0x27E8 }, -- ⟨, which starts octet's own notation
  { 0x2800, 0x2800 }, -- braille pattern blank
  { 0x3000, 0x3000 },
  { 0x3164, 0x3164 },
  { 0xFE00, 0xFE0F }, -- variation selectors
  { 0xFEFF, 0xFEFF }, -- byte-order mark
  { 0xFFA0, 0xFFA0 },
  { 0xFFF9, 0xFFFB },
  { 0x110BD, 0x110BD },
  { 0x110CD, 0x110CD },
  { 0x13430, 0x1343F },
  { 0x1BCA0, 0x1BCA3 },
  { 0x1D173, 0x1D17A },
  { 0xE0000, 0xE0FFF }, -- tag characters, variation selectors supplement
}

local function is_hidden(cp)
  local lo, hi = 1, #hidden
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local r = hidden[mid]
    if cp < r[1] then
      hi = mid - 1
    elseif cp > r[2] then
      lo = mid + 1
    else
      return true
    end
  end
  return false
end

-- The code point of the UTF-8 sequence at byte i of s and the index after
-- it, or nil and i + 1 for a byte that starts no valid sequence.
local function decode(s, i)
  local c = s:byte(i)
  if c < 0x80 then
    return c, i + 1
  end
  local n, cp, min
  if c >= 0xC2 and c <= 0xDF then
    n, cp, min = 1, c - 0xC0, 0x80
  elseif c >= 0xE0 and c <= 0xEF then
    n, cp, min = 2, c - 0xE0, 0x800
  elseif c >= 0xF0 and c <= 0xF4 then
    n, cp, min = 3, c - 0xF0, 0x10000
  else
    return nil, i + 1
  end
  for j = i + 1, i + n do
    local b = s:byte(j)
    if not b or b < 0x80 or b > 0xBF then
      return nil, i + 1
    end
    cp = cp * 64 + b - 0x80
  end
  if cp < min or cp > 0x10FFFF or (cp >= 0xD800 and cp <= 0xDFFF) then
    return nil, i + 1
  end
  return cp, i + n + 1
end

-- The visible form of one character (bytes i..j-1 of s, code point cp).
local function visible(s, i, j, cp)
  if cp == nil then
    return string.format("\\x%02X", s:byte(i))
  elseif cp == 0x09 then
    return " "
  elseif cp < 0x20 then
    return "^" .. string.char(cp + 64)
  elseif cp == 0x7F then
    return "^?"
  elseif cp >= 0x80 and is_hidden(cp) then
    return string.format("⟨U+%04X⟩", cp)
  end
  return s:sub(i, j - 1)
end

--- s (any value; nil is "") as one line a display shows as it is: every
--- control (newlines included) and invisible character in a visible
--- notation, a tab a space. With max, at most max characters are shown:
--- a longer s ends in "…".
function M.line(s, max)
  if s == nil or s == vim.NIL then
    return ""
  end
  s = tostring(s)
  if not s:find("[%z\1-\31\127-\255]") and (not max or #s <= max) then
    return s -- printable ASCII that fits: the common case, unchanged
  end
  local out, i = {}, 1
  while i <= #s do
    local cp, j = decode(s, i)
    if max and #out == max - 1 and j <= #s then
      table.insert(out, "…") -- more than one character is left
      break
    end
    table.insert(out, visible(s, i, j, cp))
    i = j
  end
  return table.concat(out)
end

--- The first line of s (trimmed) as M.line, with " …" when more lines
--- follow; at most max characters.
function M.first_line(s, max)
  if s == nil or s == vim.NIL then
    return ""
  end
  s = vim.trim(tostring(s))
  local first = s:match("^([^\n]*)\n")
  if first then
    s = vim.trim(first) .. " …"
  end
  return M.line(s, max)
end

--- s as lines shown as they are (for a message): each line as M.line.
function M.lines(s)
  local out = {}
  for _, l in ipairs(vim.split(tostring(s or ""), "\n", { plain = true })) do
    table.insert(out, M.line(l))
  end
  return table.concat(out, "\n")
end

--- s as a 'statusline' format that shows s itself: "%" doubled, so no
--- item of s is interpreted (a component used as an expression, by
--- lualine or "%{%…%}", has its result interpreted as a format). s must
--- already be visible text (M.line).
function M.statusline(s)
  return (s:gsub("%%", "%%%%"))
end

-- A duration in words, as octet's VS Code extension says it: whole
-- seconds rounded up ("1 s", "4 s"), then minutes ("6 min"), then hours.
local function duration(ms)
  local s = math.max(0, math.ceil((tonumber(ms) or 0) / 1000))
  if s < 60 then
    return s .. " s"
  end
  local m = math.ceil(s / 60)
  if m < 60 then
    return m .. " min"
  end
  return math.floor(m / 60) .. " h" .. (m % 60 == 0 and "" or (" " .. m % 60 .. " min"))
end

local function nn(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

--- A provider_retry event in the words both editors use: "retrying 3/29
--- in 4 s: <cause>" ("retrying 3 in 4 s: …" while octet waits for the
--- network with no attempt limit; "retrying compaction 1/5 …" for an
--- auxiliary operation; "(gives up in 6 min)" when octet knows). done:
--- the run went on or ended: "retried 3 times: <cause>".
function M.retry(e, done)
  local op = nn(e.operation)
  local what = op and (" " .. M.line(op, 40)) or ""
  local cause = M.line(nn(e.cause) or nn(e.reason) or "", 300)
  local attempt = tonumber(nn(e.attempt)) or 0
  if done then
    return string.format("retried%s %d %s: %s", what, attempt, attempt == 1 and "time" or "times", cause)
  end
  local max = tonumber(nn(e.maxAttempts))
  local give = tonumber(nn(e.giveUpInMs))
  return string.format("retrying%s %s in %s: %s%s", what, max and (attempt .. "/" .. max) or tostring(attempt),
    duration(e.delayMs), cause, give and (" (gives up in " .. duration(give) .. ")") or "")
end

--- vim.notify of msg with the "octet: " prefix, its text shown as it is.
function M.notify(msg, level)
  vim.notify("octet: " .. M.lines(msg), level or vim.log.levels.INFO)
end

return M
