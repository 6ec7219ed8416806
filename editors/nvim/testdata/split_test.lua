-- octet.attach.split on the recorded prompts in $OCTET_TEST_INPUT (made
-- by host.WithAttachments): reports, per case, the prompt and titles it
-- found, or the error it raised. Driven by TestAttachmentSplit.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  local attach = require("octet.attach")
  local f = assert(io.open(os.getenv("OCTET_TEST_INPUT")))
  local cases = vim.json.decode(f:read("*a"))
  f:close()
  local out = {}
  for i, c in ipairs(cases) do
    local ok, prompt, titles = pcall(attach.split, c)
    out[i] = ok and { prompt = prompt, titles = titles } or { error = tostring(prompt) }
  end
  T.fact("out", out)
  T.done()
end)
