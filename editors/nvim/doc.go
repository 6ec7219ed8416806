// Package nvim holds the tests of octet.nvim, the Neovim plugin whose Lua
// runtime files live in this directory (lua/octet, plugin, doc). The tests
// build octet and drive real headless Neovim with the plugin on its
// runtimepath against the real `octet lsp` and the scripted provider.
package nvim
