package server

import (
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// TestSessionCompact: octet/session/compact summarizes the conversation
// now, in a run of its own answered as octet/prompt is (its events are
// octet/event notifications, compaction_started and compaction_finished
// among them); the next prompt's request carries the summary instead of
// the earlier turns. It is refused while a run is active and for an
// unknown session.
func TestSessionCompact(t *testing.T) {
	st := newStack(t, tools.Controlled)
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	st.Provider.Enqueue(providertest.Text("EARLIER ANSWER"), providertest.Text("THE SUMMARY"), providertest.Text("after"))
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "EARLIER QUESTION"}))
	var res promptAnswer
	e.mustCall("octet/session/compact", map[string]any{"sessionId": sid}, &res)
	if res.Outcome != "completed" || res.RunID == "" {
		t.Fatalf("compact answer %+v", res)
	}
	e.await("compaction_finished", func(notes []note) bool {
		var kinds []string
		for _, ev := range eventsIn(notes, res.RunID) {
			kinds = append(kinds, ev.Event["kind"].(string))
		}
		k := strings.Join(kinds, " ")
		return strings.Contains(k, "compaction_started") && strings.Contains(k, "compaction_finished") && strings.Contains(k, "run_finished")
	})
	reqs := st.Provider.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Raw), "EARLIER QUESTION") || strings.Contains(string(reqs[1].Raw), `"tools"`) {
		t.Fatalf("summary request: %d requests", len(reqs))
	}
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "next"}))
	next := string(st.Provider.Requests()[2].Raw)
	if !strings.Contains(next, "THE SUMMARY") || strings.Contains(next, "EARLIER QUESTION") {
		t.Errorf("the prompt after octet/session/compact sent %s", next)
	}
	if err := e.call("octet/session/compact", map[string]any{"sessionId": "nope"}, nil); codeOf(err) != CodeNoSession {
		t.Errorf("compact of an unknown session: %v, want %d", err, CodeNoSession)
	}
	st.Provider.Enqueue(providertest.Stall())
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "long"})
	var runID string
	e.await("the stalled run", func(notes []note) bool {
		started := 0
		for _, ev := range eventsIn(notes, "") {
			if ev.Event["kind"] == "run_started" {
				runID = ev.RunID // the last one
				started++
			}
		}
		return started == 4
	})
	if err := e.call("octet/session/compact", map[string]any{"sessionId": sid}, nil); codeOf(err) != CodeSessionBusy {
		t.Errorf("compact during a run: %v, want %d", err, CodeSessionBusy)
	}
	e.mustCall("octet/cancel", map[string]any{"runId": runID}, nil)
	waitAnswer(t, ch)
}
