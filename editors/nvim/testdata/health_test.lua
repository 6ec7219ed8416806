-- :checkhealth octet, healthy and with a missing binary
-- ($OCTET_TEST_MISSING set). Driven by TestCheckhealth.
local T = dofile(os.getenv("OCTET_TEST_LIB"))
T.run(function()
  if os.getenv("OCTET_TEST_MISSING") then
    T.setup({ cmd = { T.ws .. "/no-such-octet", "lsp" } })
  else
    T.setup()
  end
  vim.cmd("checkhealth octet")
  T.fact("report", T.text(vim.api.nvim_get_current_buf()))
  T.done()
end)
