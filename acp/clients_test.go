package acp

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/octet-agent/octet/tools"
)

// This file reproduces what real ACP clients do that octet once
// mishandled (docs/protocol.md, "ACP dialect": the clients).

// awaitStray waits for n answers to raw lines and returns them in the
// order they arrived.
func (p *peer) awaitStray(n int) []message {
	p.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if got := p.stray(); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%d answers, want %d: %+v", len(p.stray()), n, p.stray())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawRequest is one request line with id.
func rawRequest(id, method string, params any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return string(b)
}

// TestRequestsBeforeInitializeWait: agentic.nvim sends session/new right
// behind initialize without waiting for its answer; a request that
// arrives before initialize is answered waits for it, in order, and is
// never refused. Here session/new even comes first.
func TestRequestsBeforeInitializeWait(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.raw(rawRequest("early", "session/new", map[string]any{"cwd": p.ws, "mcpServers": []any{}}))
	p.raw(rawRequest("init", "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}))
	got := p.awaitStray(2)
	if string(got[0].ID) != `"init"` || got[0].Error != nil {
		t.Fatalf("first answer %s %+v, want initialize's", got[0].ID, got[0].Error)
	}
	var res struct{ SessionID string }
	if got[1].Error != nil || json.Unmarshal(got[1].Result, &res) != nil || res.SessionID == "" {
		t.Fatalf("session/new sent before initialize answered %s %+v", got[1].Result, got[1].Error)
	}
}

// TestSessionNewBehindInitialize: initialize and session/new in one
// write, as agentic.nvim sends them, start a session every time (it
// failed on 10 of 11 starts when requests were handled concurrently).
func TestSessionNewBehindInitialize(t *testing.T) {
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p := newPeer(t, stackOpts{policy: tools.Controlled})
			p.raw(rawRequest("1", "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}) + "\n" +
				rawRequest("2", "session/new", map[string]any{"cwd": p.ws, "mcpServers": []any{}}))
			for _, m := range p.awaitStray(2) {
				if m.Error != nil {
					t.Fatalf("answer %s: %+v", m.ID, m.Error)
				}
			}
		})
	}
}
