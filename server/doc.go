// Package server is octet's editor protocol server: the LSP base protocol
// (Content-Length framed JSON-RPC 2.0 over stdio) carrying the standard
// lifecycle plus the octet/* methods documented in docs/protocol.md. It is
// a dialect over package host, which owns the sessions and their
// operations: a handler decodes its params, calls the host and encodes the
// answer; this package keeps what is LSP's own (message order, progress,
// approvals as server→client requests, the document overlay, the event
// envelopes with their seq and replay buffers). It never writes anything
// but protocol bytes to its output stream.
//
// # Message order
//
// Incoming messages are handled in wire order on one reader. A long request
// (octet/prompt, shutdown) first registers what later messages need (its
// run, so that $/cancelRequest finds it), then releases the reader with
// jsonrpc2.Async and continues on its own goroutine, which owns the run until
// it ends. Notification handlers never fail: an error from one would end the
// connection in jsonrpc2 v1.0.1, so they log instead.
//
// # Delivery contract of the streams the server emits
//
//   - octet/event and octet/recoveredOutput: every event of a run, in order,
//     each with a per-session seq that grows by one for the life of the
//     session's opening in this process, named by its epoch, sent to every
//     client except one that sets
//     experimental.octet.events (recoveredOutput respectively) to false
//     (run_started is how a client learns the runId). Delivery is must-deliver with
//     back-pressure: a client that stops reading stalls the run rather than
//     losing events. The last Options.EventBuffer events of each session
//     are kept for octet/session/resume whether or not they were sent.
//   - $/progress: begin at run start, human-level reports (coalesced: a
//     report equal to the previous one is not repeated), end exactly once
//     when the run ends, sent even when the request was cancelled.
//   - Server→client requests (octet/confirmEffect, window/showMessageRequest,
//     window/workDoneProgress/create) always carry a timeout, and a run's
//     end never waits for one; an approval that fails or is answered with a
//     different digest is a denial, one unanswered at its expiresAt expires.
//
// A write to the client that fails means the client is gone, as when its
// input ends: runs are cancelled and settled, then Serve returns. Open
// sessions are bounded (octet/session/close, an idle release, MaxSessions).
//
// Bad input — a malformed frame, invalid JSON, an unknown method, bad
// params, a panic in a handler — is answered with a JSON-RPC error and
// logged; it never ends the server.
package server
