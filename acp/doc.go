// Package acp serves octet over the Agent Client Protocol (ACP, protocol
// version 1): newline-delimited JSON-RPC 2.0 on a byte stream, the
// dialect Zed, JetBrains IDEs, Emacs agent-shell and several Neovim
// plugins drive coding agents with. It is the only package that knows
// ACP; it is a dialect over package host, as the LSP dialect (package
// server) is: the same sessions, agent, effect broker and ledger, built
// by the same host.Runtime.
//
// It serves all of stable ACP v1's agent side (initialize, authenticate,
// session/new, load, resume, list, close, delete, prompt, cancel,
// set_mode, set_config_option) and octet's slash commands. The mapping of
// each method and session/update to octet's events, and what octet does
// not implement and why, is in docs/protocol.md ("ACP dialect").
package acp
