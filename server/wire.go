package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
)

// Error codes beyond the JSON-RPC and LSP standard ones.
const (
	// CodeRunEnded answers octet/steer, octet/followUp and octet/finishNow
	// for a run that has already ended (protocol.md fixes -32803).
	CodeRunEnded jsonrpc2.Code = -32803
	// CodeSessionBusy answers octet/prompt (and octet/session/branch) for a
	// session that already has an active run.
	CodeSessionBusy jsonrpc2.Code = -32010
	// CodeNoSession answers a request naming an unknown session.
	CodeNoSession jsonrpc2.Code = -32011
	// CodeNoRun answers a control naming a run this server never started.
	CodeNoRun jsonrpc2.Code = -32012
	// CodeBackend answers a request the runtime could not carry out (the
	// session file could not be written, the agent could not be built).
	CodeBackend jsonrpc2.Code = -32013
)

// lspCodec marshals payloads with the protocol package's codec, so LSP
// types (unions included) encode as the protocol package defines them;
// pre-encoded json.RawMessage values pass through verbatim.
type lspCodec struct{}

var _ jsonrpc2.Codec = lspCodec{}

// Marshal implements jsonrpc2.Codec.
func (lspCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case jsonrpc2.RawMessage:
		if m == nil {
			return []byte("null"), nil
		}
		return m, nil
	case json.RawMessage:
		if m == nil {
			return []byte("null"), nil
		}
		return m, nil
	}
	return protocol.Marshal(v)
}

// Unmarshal implements jsonrpc2.Codec.
func (lspCodec) Unmarshal(data []byte, v any) error {
	switch p := v.(type) {
	case *jsonrpc2.RawMessage:
		*p = bytes.Clone(data)
		return nil
	case *json.RawMessage:
		*p = bytes.Clone(data)
		return nil
	}
	return protocol.Unmarshal(data, v)
}

// decodeParams decodes custom params leniently: absent, empty, null or []
// params leave v at its zero value; anything else must be a JSON object
// that decodes into v.
func decodeParams(raw []byte, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || isEmptyArray(raw) {
		// Neovim encodes an empty Lua table ({}) as [], so [] means {}.
		return nil
	}
	if raw[0] != '{' {
		return jsonrpc2.NewError(jsonrpc2.InvalidParams, "invalid params: expected a JSON object")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return jsonrpc2.NewError(jsonrpc2.InvalidParams, "invalid params: "+err.Error())
	}
	return nil
}

// isEmptyArray reports whether raw is [] (with any inner whitespace).
func isEmptyArray(raw []byte) bool {
	return len(raw) >= 2 && raw[0] == '[' && raw[len(raw)-1] == ']' && len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0
}

// rawResult encodes a result with encoding/json (octet's own payloads).
func rawResult(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, jsonrpc2.NewError(jsonrpc2.InternalError, "encoding result: "+err.Error())
	}
	return b, nil
}

func invalidParams(format string, args ...any) error {
	return jsonrpc2.NewError(jsonrpc2.InvalidParams, fmt.Sprintf(format, args...))
}

// endedRuns remembers the ids of recently ended runs (bounded), so that a
// control for an ended run is answered RunEnded, not "unknown run".
type endedRuns struct {
	mu   sync.Mutex
	max  int
	ids  map[string]struct{}
	fifo []string
}

func newEndedRuns(max int) *endedRuns {
	return &endedRuns{max: max, ids: make(map[string]struct{})}
}

func (e *endedRuns) add(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.ids[id]; ok {
		return
	}
	e.ids[id] = struct{}{}
	e.fifo = append(e.fifo, id)
	if len(e.fifo) > e.max {
		delete(e.ids, e.fifo[0])
		e.fifo = e.fifo[1:]
	}
}

func (e *endedRuns) has(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.ids[id]
	return ok
}

// clientLogHandler forwards records to the configured handler and, when
// the client asked for logs ($/setTrace messages|verbose, or
// initializationOptions.logLevel), also as window/logMessage.
type clientLogHandler struct {
	inner slog.Handler
	srv   *Server
	attrs []slog.Attr
}

var _ slog.Handler = (*clientLogHandler)(nil)

func (h *clientLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l) || h.srv.clientLogLevel(l)
}

func (h *clientLogHandler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.inner.Enabled(ctx, r.Level) {
		err = h.inner.Handle(ctx, r)
	}
	if h.srv.clientLogLevel(r.Level) && h.srv.conn != nil {
		var b bytes.Buffer
		th := slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: dropTime})
		_ = th.WithAttrs(h.attrs).Handle(ctx, r)
		typ := protocol.MessageTypeLog
		switch {
		case r.Level >= slog.LevelError:
			typ = protocol.MessageTypeError
		case r.Level >= slog.LevelWarn:
			typ = protocol.MessageTypeWarning
		case r.Level >= slog.LevelInfo:
			typ = protocol.MessageTypeInfo
		}
		msg := bytes.TrimRight(b.Bytes(), "\n")
		// A failed logMessage is not logged again (no recursion).
		_ = h.srv.conn.Notify(context.WithoutCancel(h.srv.ctx), "window/logMessage",
			&protocol.LogMessageParams{Type: typ, Message: string(msg)})
	}
	return err
}

func (h *clientLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &clientLogHandler{inner: h.inner.WithAttrs(as), srv: h.srv, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *clientLogHandler) WithGroup(name string) slog.Handler {
	return &clientLogHandler{inner: h.inner.WithGroup(name), srv: h.srv, attrs: h.attrs}
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
