package agent

import (
	"sync"
	"testing"

	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// warmingTool is a tool that is a tools.Warmer: it notes, at each
// WarmUp, how many requests the model server had received.
type warmingTool struct {
	*probeTool
	served func() int
	mu     sync.Mutex
	at     []int
}

func (w *warmingTool) WarmUp() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at = append(w.at, w.served())
}

// TestToolsWarmUpOnceRequestIsOut: each model request, once sent, lets
// the tools start what their next call needs (the bash tool's first
// snapshot) — once it is sent, never before.
func TestToolsWarmUpOnceRequestIsOut(t *testing.T) {
	for _, ws := range []bool{false, true} {
		checkLeaks(t)
		w := &warmingTool{probeTool: &probeTool{name: "probe", effect: tools.Pure}}
		h := newHarness(t, harnessOpt{extra: []tools.Tool{w}, websocket: ws})
		w.served = func() int { return len(h.srv.Requests()) }
		h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "probe", `{"n":1}`)), pt.Text("done"))
		checkRunEvents(t, drain(t, h.prompt("go", PromptOptions{})), OutcomeCompleted)
		w.mu.Lock()
		at := w.at
		w.mu.Unlock()
		// Over HTTP the request is out once the response's head is back;
		// over the WebSocket once its frame is written, which the server
		// may not have read yet.
		want := func(i, n int) bool { return n == i+1 || ws && n == i }
		if len(at) != 2 || !want(0, at[0]) || !want(1, at[1]) {
			t.Errorf("websocket %v: requests the server had at each WarmUp %v, want [1 2] (one warm-up per request, once it is out)", ws, at)
		}
	}
}
