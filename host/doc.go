// Package host is the host of octet's sessions for every front door: the
// LSP dialect (package server), the ACP dialect (package acp) and the
// CLI's session commands. It knows no wire protocol. It turns
// configuration (a [Runtime]) into sessions with their agents, tools,
// broker, change recorder and MCP servers, and owns the operations on
// them: create, open, list, transcript pages, rename, fork, delete,
// branch, rewind and diff; standing approval rules and each session's
// effect policy (kept in its ledger); the model catalog; context
// attachments; delegated children as child sessions; and the sessions a
// front door holds open ([Registry] of [OpenSession]: the bound and idle
// release, each session's event stream, its one [Activity] and the
// approvals it waits for).
//
// The dialects decode a request, call the host and encode its answer.
// Errors a caller branches on are typed: [ErrNoSession], [ErrNoRule],
// [*AgentError] for an agent the runtime could not build, [*InputError]
// for a request the caller must change, and for open sessions
// [ErrClosed], [ErrReleased], [ErrNotOpen], [*BusyError] and
// [*LimitError].
// gopls's split between protocol (the wire) and cache/golang (the work)
// is the model.
package host
