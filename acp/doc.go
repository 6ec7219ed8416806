// Package acp serves octet over the Agent Client Protocol (ACP, protocol
// version 1): newline-delimited JSON-RPC 2.0 on a byte stream, the
// dialect Zed, JetBrains IDEs, Emacs agent-shell and several Neovim
// plugins drive coding agents with. It is the only package that knows
// ACP; it is a dialect over package host, as the LSP dialect (package
// server) is: the same sessions, agent, effect broker and ledger, built
// by the same host.Runtime.
//
// The mapping of each ACP method and session/update to octet's events is
// in docs/protocol.md ("ACP dialect").
package acp
