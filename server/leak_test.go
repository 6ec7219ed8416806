package server

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// TestSessionsConcurrentlyAndNoLeaks runs two sessions at once (each with
// its own seq from 1), leaves a third run streaming, then shuts down and
// checks that shutdown settled every run and no server goroutine outlives
// Serve.
func TestSessionsConcurrentlyAndNoLeaks(t *testing.T) {
	st := newStack(t, tools.Controlled)
	ignore := goleak.IgnoreCurrent()
	st.Provider.Enqueue(
		providertest.Text("answer one"),
		providertest.Text("answer two"),
		providertest.Text(strings.Repeat("slow ", 40)).StallAfter(5),
	)
	e := st.editor(t, Options{}, map[string]any{"events": true})
	s1, s2 := e.newSession(), e.newSession()
	c1 := e.promptAsync(map[string]any{"sessionId": s1, "text": "one"})
	c2 := e.promptAsync(map[string]any{"sessionId": s2, "text": "two"})
	a1, a2 := waitAnswer(t, c1), waitAnswer(t, c2)
	if a1.Outcome != "completed" || a2.Outcome != "completed" {
		t.Fatalf("answers %+v %+v", a1, a2)
	}
	for _, run := range []string{a1.RunID, a2.RunID} {
		evs := e.eventsOf(run)
		if len(evs) == 0 || evs[0].Seq != 1 || evs[len(evs)-1].Seq != int64(len(evs)) {
			t.Errorf("run %s: seqs not 1..n per session: %d events", run, len(evs))
		}
	}
	c3 := e.promptAsync(map[string]any{"sessionId": s1, "text": "three"})
	e.await("streaming", func(notes []note) bool {
		n := 0
		for _, ev := range eventsIn(notes, "") {
			if ev.SessionID == s1 && ev.Event["kind"] == "output_delta" {
				n++
			}
		}
		return n > 2
	})
	var out json.RawMessage
	e.mustCall("shutdown", nil, &out)
	// shutdown answers only after the run settled, so its answer is here.
	select {
	case a3 := <-c3:
		if a3.Outcome != "cancelled" {
			t.Errorf("run during shutdown: %+v, want cancelled", a3)
		}
	case <-time.After(time.Second):
		t.Error("shutdown answered before the active run's prompt was answered")
	}
	e.notify("exit", nil)
	select {
	case err := <-e.served:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
		e.served <- err
	case <-time.After(editorTimeout):
		t.Fatal("Serve did not return")
	}
	_ = e.raw.Close()
	_ = e.conn.Close()
	goleak.VerifyNone(t, ignore,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		// The loopback provider's own HTTP server connections.
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
	)
}

// TestServeContextCancelSettlesRuns cancels Serve's context (SIGTERM in
// octet lsp) during a streaming run: the run is cancelled and its prompt
// answered before Serve returns context.Canceled.
func TestServeContextCancelSettlesRuns(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text(strings.Repeat("slow ", 40)).StallAfter(5))
	ctx, cancel := context.WithCancel(context.Background())
	e := newEditorCtx(t, ctx, Options{Runtime: st.Runtime})
	e.initialize(st.Workspace, map[string]any{"events": true})
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "go"})
	e.await("streaming", hasEvent("output_delta", ""))
	cancel()
	if ans := waitAnswer(t, ch); ans.Outcome != "cancelled" {
		t.Errorf("answer %+v, want cancelled", ans)
	}
	select {
	case err := <-e.served:
		if err != context.Canceled {
			t.Errorf("Serve = %v, want context.Canceled", err)
		}
		e.served <- err
	case <-time.After(editorTimeout):
		t.Fatal("Serve did not return")
	}
}

// TestClientDiesMidRun closes the editor's end during a streaming run: the
// server cancels and settles the run and Serve returns promptly (it does
// not wait for an answer nobody can read).
func TestClientDiesMidRun(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text(strings.Repeat("slow ", 40)).StallAfter(5))
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	e.promptAsync(map[string]any{"sessionId": sid, "text": "go"})
	e.await("streaming", hasEvent("output_delta", ""))
	start := time.Now()
	_ = e.raw.Close()
	select {
	case err := <-e.served:
		if err != nil {
			t.Errorf("Serve = %v after the client went away", err)
		}
		e.served <- err
	case <-time.After(editorTimeout):
		t.Fatal("Serve did not return after the client went away")
	}
	if d := time.Since(start); d > replyTimeout {
		t.Errorf("Serve took %v to notice the client was gone", d)
	}
	// The run was settled: its durable checkpoint says cancelled.
	sess, err := session.Inspect(filepath.Join(st.Runtime.SessionsDir, sid+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	cps := sess.Checkpoints()
	if len(cps) != 1 || cps[0].Outcome != "cancelled" {
		t.Errorf("checkpoints %+v, want one cancelled", cps)
	}
}

// TestParentProcessGone starts the server for a "parent" process, kills
// that process, and checks the server stops by itself.
func TestParentProcessGone(t *testing.T) {
	parent := exec.Command("sleep", "60")
	if err := parent.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	e := newEditor(t, Options{Runtime: &host.Runtime{SessionsDir: t.TempDir()}, parentPoll: 20 * time.Millisecond})
	e.mustCall("initialize", map[string]any{"processId": parent.Process.Pid, "capabilities": map[string]any{}}, nil)
	select {
	case <-e.served:
		t.Fatal("server stopped while its parent was alive")
	case <-time.After(100 * time.Millisecond):
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	select {
	case err := <-e.served:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
		e.served <- err
	case <-time.After(editorTimeout):
		t.Fatal("server kept running after its parent died")
	}
}
