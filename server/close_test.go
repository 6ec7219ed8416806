package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/heaptest"
	"github.com/octet-agent/octet/internal/proc"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// isOpen reports whether the server holds session id open.
func isOpen(s *Server, id string) bool {
	_, ok := s.sessions.Get(id)
	return ok
}

// pendingApprovals counts the server's pending approvals.
func pendingApprovals(s *Server) int {
	n := 0
	for _, ss := range s.sessions.All() {
		n += len(ss.Pending())
	}
	return n
}

// awaitClosed waits until the server no longer holds id open.
func awaitClosed(t *testing.T, s *Server, id string) {
	t.Helper()
	deadline := time.Now().Add(editorTimeout)
	for isOpen(s, id) {
		if time.Now().After(deadline) {
			t.Fatalf("session %s was never released", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSessionClose: sessions were never closed (every session/new or
// resume kept its file, agent and replay buffer for the life of the
// process). octet/session/close cancels the running run and waits for it
// to settle, releases the session, and resume opens it again.
func TestSessionClose(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text(strings.Repeat("slow ", 40)).StallAfter(5))
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "go"})
	e.await("streaming", hasEvent("output_delta", ""))
	e.mustCall("octet/session/close", map[string]any{"sessionId": sid}, nil)
	if ans := waitAnswer(t, ch); ans.Outcome != "cancelled" {
		t.Errorf("prompt answer %+v, want cancelled", ans)
	}
	if isOpen(e.srv, sid) {
		t.Error("the session is still open after octet/session/close")
	}
	if err := e.call("octet/policy", map[string]any{"sessionId": sid}, nil); codeOf(err) != CodeNoSession {
		t.Errorf("octet/policy on a closed session: %v, want -32011", err)
	}
	e.mustCall("octet/session/close", map[string]any{"sessionId": sid}, nil) // idempotent
	var r resumeResult
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid, "afterSeq": 3}, &r)
	if !r.ReplayTruncated || r.LastSeq != 0 || !isOpen(e.srv, sid) {
		t.Errorf("resume after close: truncated %v lastSeq %d open %v", r.ReplayTruncated, r.LastSeq, isOpen(e.srv, sid))
	}
}

// TestIdleSessionReleased: a session without a run is released after the
// idle bound; one waiting for an approval is not; the default session of
// octet.prompt comes back as the same session.
func TestIdleSessionReleased(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	writeFile(t, st.Workspace+"/a.txt", "hello world\n")
	e := st.editor(t, Options{SessionIdleTimeout: 150 * time.Millisecond}, map[string]any{"confirmEffect": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	release := make(chan struct{})
	e.respond("octet/confirmEffect", func(p json.RawMessage) (any, error) {
		<-release
		return confirmAnswer("approve", "")(p)
	})
	idle := e.newSession()
	busy := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": busy, "text": "edit a.txt"})
	e.awaitRequest("octet/confirmEffect")
	awaitClosed(t, e.srv, idle)
	time.Sleep(300 * time.Millisecond) // twice the bound
	if !isOpen(e.srv, busy) {
		t.Error("a session waiting for an approval was released as idle")
	}
	close(release)
	if ans := waitAnswer(t, ch); ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	awaitClosed(t, e.srv, busy)
	var r resumeResult
	e.mustCall("octet/session/resume", map[string]any{"sessionId": busy}, &r)

	// A session the server released by itself comes back on the next
	// request naming it: the editor never sees it vanish.
	st.Provider.Enqueue(providertest.Text("back again"))
	if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": idle, "text": "still there?"})); ans.Outcome != "completed" {
		t.Fatalf("prompt on a released session: %+v\n%s", ans, e.dump())
	}
	// One the client closed stays closed until resumed.
	e.mustCall("octet/session/close", map[string]any{"sessionId": idle}, nil)
	if err := e.call("octet/prompt", map[string]any{"sessionId": idle, "text": "gone?"}, nil); err == nil || !strings.Contains(err.Error(), "octet/session/resume") {
		t.Errorf("prompt on a closed session: %v, want -32011 naming octet/session/resume", err)
	}

	// octet.prompt's default session, released, comes back as itself.
	st.Provider.Enqueue(providertest.Text("one"), providertest.Text("two"))
	var first, second promptAnswer
	e.mustCall("workspace/executeCommand", map[string]any{"command": "octet.prompt", "arguments": []any{"one"}}, &first)
	e.srv.mu.Lock()
	def := e.srv.defaultID
	e.srv.mu.Unlock()
	awaitClosed(t, e.srv, def)
	e.mustCall("workspace/executeCommand", map[string]any{"command": "octet.prompt", "arguments": []any{"two"}}, &second)
	if evs := e.eventsOf(second.RunID); second.Outcome != "completed" || len(evs) == 0 || evs[0].SessionID != def {
		t.Errorf("octet.prompt after the default session was released: %+v in %v, want session %s", second, evs, def)
	}
}

// TestOpenSessionBound: opening one session more than MaxSessions releases
// the least recently used idle one; with every open session running, the
// new one is refused and leaves no session file.
func TestOpenSessionBound(t *testing.T) {
	st := newStack(t, tools.Controlled)
	call := providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"goodbye"}`))
	st.Provider.Enqueue(call, call, providertest.Text("Denied."), providertest.Text("Denied."))
	writeFile(t, st.Workspace+"/a.txt", "hello world\n")
	e := st.editor(t, Options{MaxSessions: 2}, map[string]any{"confirmEffect": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	release := make(chan struct{})
	e.respond("octet/confirmEffect", func(p json.RawMessage) (any, error) {
		<-release
		return confirmAnswer("deny", "")(p)
	})
	first, second := e.newSession(), e.newSession()
	e.mustCall("octet/policy", map[string]any{"sessionId": first}, nil) // first is now the more recent
	third := e.newSession()
	if isOpen(e.srv, second) || !isOpen(e.srv, first) || !isOpen(e.srv, third) {
		t.Errorf("open after a third session/new with MaxSessions 2: first %v second %v third %v",
			isOpen(e.srv, first), isOpen(e.srv, second), isOpen(e.srv, third))
	}
	ch := e.promptAsync(map[string]any{"sessionId": third, "text": "edit a.txt"})
	e.awaitRequest("octet/confirmEffect")
	e.mustCall("octet/session/close", map[string]any{"sessionId": first}, nil)
	if err := e.call("octet/session/resume", map[string]any{"sessionId": second}, nil); err != nil {
		t.Fatalf("resume into the free slot: %v", err)
	}
	// Both slots taken: second is idle, so it makes room; with both
	// running a new session would be refused.
	ch2 := e.promptAsync(map[string]any{"sessionId": second, "text": "edit a.txt"})
	for deadline := time.Now().Add(editorTimeout); pendingApprovals(e.srv) != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never two pending approvals:\n%s", e.dump())
		}
	}
	files, _ := filepath.Glob(filepath.Join(st.Runtime.SessionsDir, "*.jsonl"))
	err := e.call("octet/session/new", map[string]any{}, nil)
	if codeOf(err) != CodeBackend || !strings.Contains(err.Error(), "octet/session/close") {
		t.Errorf("session/new with every open session running: %v, want -32013 saying how to free one", err)
	}
	if after, _ := filepath.Glob(filepath.Join(st.Runtime.SessionsDir, "*.jsonl")); len(after) != len(files) {
		t.Errorf("the refused session/new left a session file: %d files, %d before", len(after), len(files))
	}
	close(release)
	waitAnswer(t, ch)
	waitAnswer(t, ch2)
}

// TestOpenSessionCost measures what an open idle session holds (the
// figures docs/protocol.md states: one file descriptor, ~300 KB) and checks
// that octet/session/close gives the descriptors back.
func TestOpenSessionCost(t *testing.T) {
	st := newStack(t, tools.Controlled)
	e := st.editor(t, Options{MaxSessions: 1000}, nil)
	feeds := inotifyFDs()
	e.newSession() // warm up
	// The workspace's change feed (its inotify instances, opened by the
	// first snapshot 200 ms after the first bash tool) and the bash
	// tool's spare process guard (a socket and a pidfd) are the
	// process's, not a session's: the feed is opened before counting, and
	// no spare is counted.
	for deadline := time.Now().Add(5 * time.Second); inotifyFDs() <= feeds && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	fds := func() int { proc.StopSpares(); es, _ := os.ReadDir("/proc/self/fd"); return len(es) }
	heap := heaptest.Live
	const n = 40
	h0, f0 := heap(), fds()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.newSession()
	}
	h1, f1 := heap(), fds()
	perFD := float64(f1-f0) / n
	t.Logf("per open session: %d KB heap, %.2f fds", (h1-h0)/n/1000, perFD)
	if perFD > 1.5 {
		t.Errorf("%.2f file descriptors per open session, want 1", perFD)
	}
	for _, id := range ids {
		e.mustCall("octet/session/close", map[string]any{"sessionId": id}, nil)
	}
	if f2 := fds(); f2 > f0 {
		t.Errorf("%d file descriptors still open after closing %d sessions", f2-f0, n)
	}
}

// inotifyFDs counts this process's inotify instances.
func inotifyFDs() int {
	n := 0
	fds, _ := filepath.Glob("/proc/self/fd/*")
	for _, fd := range fds {
		if l, _ := os.Readlink(fd); l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}
