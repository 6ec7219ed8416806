package agent

import (
	"testing"
	"time"

	pt "github.com/octet-agent/octet/provider/providertest"
)

// TestCancelledStreamLeavesTransportUsable: a run whose request stalls
// after response.created is cancelled; the next prompt's request reaches
// the provider and the run completes, on every transport.
func TestCancelledStreamLeavesTransportUsable(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   bool
	}{{"http", false}, {"websocket", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpt{websocket: tc.ws})
			h.srv.Enqueue(pt.Stall(), pt.Text("second answer"))
			r := h.prompt("first", PromptOptions{})
			waitFor(t, func() bool { return len(h.srv.Requests()) == 1 })
			time.Sleep(50 * time.Millisecond) // response.created read: the stream is open
			r.Cancel()
			checkRunEvents(t, drain(t, r), OutcomeCancelled)
			r2 := h.prompt("second", PromptOptions{})
			evs := drain(t, r2)
			checkRunEvents(t, evs, OutcomeCompleted)
			if n := len(h.srv.Requests()); n != 2 {
				t.Fatalf("the provider saw %d requests, want 2", n)
			}
		})
	}
}
