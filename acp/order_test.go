package acp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// TestPermissionFollowsItsToolCall: session/request_permission reaches the
// client only after the call's tool_call update (and the answer's text
// before it), even when a long answer keeps the update stream busy as the
// broker asks.
func TestPermissionFollowsItsToolCall(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	var sawCall, asked bool
	p.onRequest = func(m message) (any, *rpcError) {
		if m.Method != "session/request_permission" {
			return nil, &rpcError{Code: codeMethodNotFound, Message: m.Method}
		}
		p.mu.Lock()
		for _, n := range p.notes {
			var u struct {
				Update struct{ SessionUpdate, ToolCallID string }
			}
			if n.Method == "session/update" && json.Unmarshal(n.Params, &u) == nil &&
				u.Update.SessionUpdate == "tool_call" && u.Update.ToolCallID == "call_1" {
				sawCall = true
			}
		}
		asked = true
		p.mu.Unlock()
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow_once"}}, nil
	}
	p.prov.Enqueue(
		providertest.Reply(
			providertest.Message(strings.Repeat("word ", 3000)+"done"),
			providertest.FunctionCall("call_1", "bash", `{"command":"touch one"}`),
		),
		providertest.Text("done"),
	)
	p.initialize(false)
	id := p.newSession()
	if stop := p.prompt(id, "go"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	if !asked || !sawCall {
		t.Fatalf("asked %v; the client had the call's tool_call then: %v", asked, sawCall)
	}
}
