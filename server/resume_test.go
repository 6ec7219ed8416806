package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// resumeResult is the decoded octet/session/resume answer.
type resumeResult struct {
	Epoch            string
	LastSeq          int64
	Events           []host.Event
	ReplayTruncated  bool
	PendingApprovals []confirmParams
	ActiveRunID      string
}

// stopEditor ends e's connection and waits for its server to return.
func stopEditor(t *testing.T, e *fakeEditor) {
	t.Helper()
	_ = e.raw.Close()
	select {
	case err := <-e.served:
		e.served <- err
	case <-time.After(editorTimeout):
		t.Fatal("server did not stop")
	}
}

// TestResumeEpochAcrossProcesses: seq counts per process, so after a
// restart "afterSeq: 8" named different events, and resume replayed the new
// process's seq 9… as if nothing were missing. Every event carries the
// epoch of its session's opening; a cursor of another epoch gets the whole
// buffer and replayTruncated: true.
func TestResumeEpochAcrossProcesses(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text("first process answer"), providertest.Text("second process answer"))
	e1 := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e1.newSession()
	first := waitAnswer(t, e1.promptAsync(map[string]any{"sessionId": sid, "text": "one"}))
	evs1 := e1.eventsOf(first.RunID)
	var env1 struct{ Epoch string }
	e1.mu.Lock()
	for _, n := range e1.notes {
		if n.Method == "octet/event" {
			_ = json.Unmarshal(n.Params, &env1)
		}
	}
	e1.mu.Unlock()
	if env1.Epoch == "" || len(evs1) < 3 {
		t.Fatalf("first process: epoch %q, %d events", env1.Epoch, len(evs1))
	}
	stopEditor(t, e1)

	e2 := st.editor(t, Options{}, map[string]any{"events": true})
	var r resumeResult
	e2.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, &r)
	if r.Epoch == "" || r.Epoch == env1.Epoch || r.LastSeq != 0 {
		t.Fatalf("resume in the new process: epoch %q (old %q), lastSeq %d", r.Epoch, env1.Epoch, r.LastSeq)
	}
	second := waitAnswer(t, e2.promptAsync(map[string]any{"sessionId": sid, "text": "two"}))
	evs2 := e2.eventsOf(second.RunID)
	e2.mustCall("octet/session/resume", map[string]any{"sessionId": sid, "afterSeq": 2, "epoch": env1.Epoch}, &r)
	if !r.ReplayTruncated || len(r.Events) != len(evs2) || r.Events[0].Seq != evs2[0].Seq {
		t.Errorf("cursor of the old process: truncated %v, %d events from seq %d, want truncated and all %d of the new epoch",
			r.ReplayTruncated, len(r.Events), r.Events[0].Seq, len(evs2))
	}
	// The new process's first resume took seq 1 (session_state, never
	// buffered): the run's events follow it.
	cursor := evs2[1].Seq
	e2.mustCall("octet/session/resume", map[string]any{"sessionId": sid, "afterSeq": cursor, "epoch": r.Epoch}, &r)
	if r.ReplayTruncated || len(r.Events) != len(evs2)-2 || r.Events[0].Seq != cursor+1 {
		t.Errorf("cursor of this epoch: truncated %v, %d events", r.ReplayTruncated, len(r.Events))
	}
	for _, ev := range r.Events {
		var p struct{ Epoch string }
		if json.Unmarshal(ev.Params, &p); p.Epoch != r.Epoch {
			t.Errorf("replayed event seq %d has epoch %q, want %q", ev.Seq, p.Epoch, r.Epoch)
		}
	}
	// afterSeq -1 ("from the start") with everything still buffered.
	e2.mustCall("octet/session/resume", map[string]any{"sessionId": sid, "afterSeq": -1}, &r)
	if r.ReplayTruncated || len(r.Events) != len(evs2) {
		t.Errorf("afterSeq -1: truncated %v, %d of %d events", r.ReplayTruncated, len(r.Events), len(evs2))
	}
}

// TestResumeResendsApprovalOnce: every resume used to send every pending
// approval again, so an editor resuming repeatedly stacked up prompts.
// The first resume sends it again (the client may have lost its prompt);
// later ones do not while that copy is unanswered.
func TestResumeResendsApprovalOnce(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	writeFile(t, st.Workspace+"/a.txt", "hello world\n")
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	e.respond("octet/confirmEffect", func(json.RawMessage) (any, error) { <-never; return nil, nil })
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"})
	e.awaitRequest("octet/confirmEffect")
	var r resumeResult
	for range 3 {
		e.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, &r)
		if len(r.PendingApprovals) != 1 {
			t.Fatalf("pending %+v", r.PendingApprovals)
		}
	}
	time.Sleep(200 * time.Millisecond) // let any re-send arrive
	e.mu.Lock()
	asked := 0
	for _, req := range e.requests {
		if req.Method == "octet/confirmEffect" {
			asked++
		}
	}
	e.mu.Unlock()
	if asked != 2 {
		t.Errorf("octet/confirmEffect sent %d times after three resumes, want 2 (the request and one re-send)", asked)
	}
	e.mustCall("octet/cancel", map[string]any{"runId": r.ActiveRunID}, nil)
	if ans := waitAnswer(t, ch); ans.Outcome != "cancelled" {
		t.Errorf("answer %+v", ans)
	}
}
