package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// sessionEvents returns the octet/event notes of session id, checking
// their seq counts from 1 without a gap (seq order is wire order, whether
// an event was written from the run's owner goroutine or by the pump).
func sessionEvents(t *testing.T, e *fakeEditor, id string) (evs []eventNote, params []json.RawMessage) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.notes {
		if n.Method != "octet/event" {
			continue
		}
		var ev eventNote
		if err := json.Unmarshal(n.Params, &ev); err != nil {
			t.Fatalf("undecodable octet/event %s: %v", n.Params, err)
		}
		if ev.SessionID != id {
			continue
		}
		if ev.Seq != int64(len(evs)+1) {
			t.Fatalf("event %d (%v) has seq %d", len(evs)+1, ev.Event["kind"], ev.Seq)
		}
		evs = append(evs, ev)
		params = append(params, n.Params)
	}
	return evs, params
}

// TestDeltasKeepOneOrderedStream streams a long answer to an editor that
// now and then is slow to read, so deltas reach the wire both from the
// run's owner goroutine and through the pump: the editor gets every event
// once, seq 1..n in order, the deltas spell the answer, run_finished is
// last, and resume replays exactly the bytes it got.
func TestDeltasKeepOneOrderedStream(t *testing.T) {
	st := newStack(t, tools.Controlled)
	words := strings.TrimSpace(strings.Repeat("word ", 400))
	st.Provider.Enqueue(providertest.Text(words).Pace(200 * time.Microsecond))
	e := st.editor(t, Options{}, map[string]any{"events": true})
	var n atomic.Int64
	e.onNote = func(note) {
		if n.Add(1)%40 == 0 {
			time.Sleep(3 * time.Millisecond) // longer than a direct write may wait
		}
	}
	sid := e.newSession()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "go"}))
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	evs, params := sessionEvents(t, e, sid)
	var text strings.Builder
	for _, ev := range evs {
		if ev.Event["kind"] == "output_delta" {
			text.WriteString(ev.Event["text"].(string))
		}
	}
	if text.String() != words {
		t.Fatalf("the deltas spell %q, want %q", text.String(), words)
	}
	if k := evs[len(evs)-1].Event["kind"]; k != "run_finished" {
		t.Fatalf("last event %v, want run_finished", k)
	}
	var res struct {
		Events []struct {
			Seq    int64           `json:"seq"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"events"`
	}
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid, "afterSeq": 0}, &res)
	if len(res.Events) != len(evs) {
		t.Fatalf("resume replays %d events, the editor got %d", len(res.Events), len(evs))
	}
	for i, b := range res.Events {
		if b.Seq != int64(i+1) || b.Method != "octet/event" || !bytes.Equal(b.Params, params[i]) {
			t.Fatalf("replayed event %d = seq %d %s %s, sent %s", i+1, b.Seq, b.Method, b.Params, params[i])
		}
	}
}

// TestStalledEditorDoesNotHoldCancelledRun: an editor stops reading in
// the middle of a streamed answer (its reader blocks) and cancels the
// run. The run settles, its checkpoint durable, while the editor still
// reads nothing: a delta written from the run's owner goroutine does not
// hold the run past directWriteBound. Once the editor reads again it gets
// every event in order and the cancelled answer.
func TestStalledEditorDoesNotHoldCancelledRun(t *testing.T) {
	st := newStack(t, tools.Controlled)
	words := strings.TrimSpace(strings.Repeat("word ", 60))
	st.Provider.Enqueue(providertest.Text(words).StallAfter(40))
	e := st.editor(t, Options{}, map[string]any{"events": true})
	stalled := make(chan struct{})
	var deltas atomic.Int64
	e.onNote = func(n note) {
		if n.Method == "octet/event" && bytes.Contains(n.Params, []byte(`"output_delta"`)) && deltas.Add(1) == 3 {
			e.reading.Lock() // read nothing more
			close(stalled)
		}
	}
	var once sync.Once
	release := func() { once.Do(e.reading.Unlock) }
	defer release()
	sid := e.newSession()
	answer := e.promptAsync(map[string]any{"sessionId": sid, "text": "go"})
	select {
	case <-stalled:
	case <-time.After(editorTimeout):
		t.Fatal("the third delta never arrived")
	}
	// The editor's reader is blocked (it can still write). Give the run
	// the moment it needs to reach its next delta's write, then cancel.
	time.Sleep(50 * time.Millisecond)
	go func() { _ = e.call("octet/cancel", map[string]any{"runId": runIDOf(t, e, sid)}, nil) }()
	deadline := time.Now().Add(editorTimeout)
	for !checkpointed(t, st, sid) {
		if time.Now().After(deadline) {
			release()
			t.Fatal("the cancelled run did not write its checkpoint while the editor was not reading")
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	if ans := waitAnswer(t, answer); ans.Outcome != "cancelled" {
		t.Fatalf("answer %+v, want cancelled", ans)
	}
	e.await("run_finished", hasEvent("run_finished", ""))
	evs, _ := sessionEvents(t, e, sid)
	if k := evs[len(evs)-1].Event["kind"]; k != "run_finished" {
		t.Fatalf("last event %v, want run_finished", k)
	}
}

// runIDOf is the run id of the session's run_started the editor has.
func runIDOf(t *testing.T, e *fakeEditor, sid string) string {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range eventsIn(e.notes, "") {
		if ev.SessionID == sid && ev.Event["kind"] == "run_started" {
			return ev.RunID
		}
	}
	t.Fatal("no run_started")
	return ""
}

// checkpointed reports whether session sid's file holds a checkpoint.
func checkpointed(t *testing.T, st *stack, sid string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(st.Home, "sessions", "*"+sid+"*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && bytes.Contains(b, []byte(`"kind":"checkpoint"`)) {
			return true
		}
	}
	return false
}

// TestWriteDirectIsBounded: a direct write to a client that reads nothing
// returns after about directWriteBound; the rest of its frame is written
// once the client reads, whole, before a frame written after it.
func TestWriteDirectIsBounded(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := newTolerantStream(a, testLogger(t))
	if !s.lockDirect() {
		t.Fatal("lockDirect refused an idle net.Pipe stream")
	}
	params := json.RawMessage(`{"text":"` + strings.Repeat("x", 200<<10) + `"}`)
	done := make(chan struct{})
	go func() { s.writeDirect("octet/event", params); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("writeDirect waited for a client that reads nothing")
	}
	if s.lockDirect() {
		t.Fatal("lockDirect took the writer while the rest of a frame is still to be written")
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := s.Write(context.Background(), jsonrpc2.NewNotification("after", nil))
		wrote <- err
	}()
	rd := jsonrpc2.NewHeaderStream(b)
	first, _, err := rd.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := first.(*jsonrpc2.Notification); !ok || n.Method() != "octet/event" || !bytes.Equal(n.Params(), params) {
		t.Fatalf("first frame %#v, want the whole direct one", first)
	}
	second, _, err := rd.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := second.(*jsonrpc2.Notification); !ok || n.Method() != "after" {
		t.Fatalf("second frame %#v, want the one written after", second)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !s.lockDirect() {
		t.Fatal("the writer was not released")
	}
	s.wmu.Unlock()
}

// TestNoDirectWriteWithoutDeadlines: a transport whose writes cannot be
// given a deadline (an *os.File the runtime cannot poll, like a blocking
// stdout) never takes a direct write; events take the pump.
func TestNoDirectWriteWithoutDeadlines(t *testing.T) {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	if f.SetWriteDeadline(time.Time{}) == nil {
		t.Skip(os.DevNull + " is pollable here")
	}
	s := newTolerantStream(rwc{strings.NewReader(""), f}, testLogger(t))
	if s.lockDirect() {
		t.Fatal("lockDirect took a writer that cannot bound a write")
	}
}
