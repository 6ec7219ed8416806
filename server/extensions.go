package server

import (
	"context"
	"encoding/json"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/host"
)

// extensionsOf returns the session's extensions, or nil.
func extensionsOf(h *host.Session) host.Extensions { return h.Extensions() }

// watchExtensions sends the session an extensions_changed octet/event
// (no run; buffered for resume like every event) after each change of
// its extensions, until the session's handle closes them.
func (s *Server) watchExtensions(ss *host.OpenSession) {
	ex := extensionsOf(ss.Session())
	if ex == nil {
		return
	}
	ex.Subscribe(func() {
		s.mu.Lock()
		send := s.caps.sendEvents
		s.mu.Unlock()
		body, _ := json.Marshal(map[string]any{"kind": "extensions_changed"})
		s.emit(ss, "octet/event", send, func(seq int64) json.RawMessage {
			return eventEnvelope(ss.ID(), "", ss.Epoch(), seq, body)
		})
	})
}

// extensionsList handles octet/extensions/list.
func (s *Server) extensionsList(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	ss, err := s.sessionParam(raw)
	if err != nil {
		return nil, err
	}
	ex := extensionsOf(ss.Session())
	if ex == nil {
		return rawResult(map[string]any{"servers": []any{}})
	}
	return rawResult(ex.List())
}

// extensionsEnable handles octet/extensions/enable.
func (s *Server) extensionsEnable(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string   `json:"sessionId"`
		Server    string   `json:"server"`
		Tools     []string `json:"tools"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.Server == "" {
		return nil, invalidParams("server is required: the name of an MCP server in octet/extensions/list")
	}
	ss, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	ex := extensionsOf(ss.Session())
	if ex == nil {
		return nil, invalidParams("session %s has no MCP servers", p.SessionID)
	}
	out, err := ex.Enable(p.Server, p.Tools)
	if err != nil {
		return nil, jsonrpc2.NewError(jsonrpc2.InvalidParams, err.Error())
	}
	return rawResult(out)
}
