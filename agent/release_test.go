package agent

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestReleasedSessionSendsTheSameRequest: an idle agent's session gives
// back its typed branch (the next run types it again from the file), and
// the request built from the branch typed again is byte for byte the
// request built from the kept one.
func TestReleasedSessionSendsTheSameRequest(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	longBranch(t, h.sess, 256<<10)
	if _, err := h.sess.AppendEntry(session.Entry{Type: session.EntryAssistant, Items: []session.Item{
		{Type: session.ItemReasoning, Text: "why", EncryptedContent: strings.Repeat("gAAAAB\u00e9+/=", 900)},
		{Type: session.ItemText, Text: "<done> & \u2028 \"quoted\"\n"},
	}}); err != nil {
		t.Fatal(err)
	}
	fresh := func() *Agent {
		a, err := New(h.agent.cfg)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	kept := buildAndEncode(t, fresh())
	h.sess.Release()
	if again := buildAndEncode(t, fresh()); !bytes.Equal(again, kept) {
		t.Fatalf("the request from the released branch typed again differs (%d vs %d bytes)", len(again), len(kept))
	}
	// A run keeps its branch and gives it back when it ends.
	h.srv.Enqueue(pt.Text("ok"))
	r := h.prompt("go on", PromptOptions{})
	drain(t, r)
	res := r.Wait()
	reqs := h.completed(t, res)
	if got := h.sess.Branch(); len(got) == 0 || got[len(got)-1].Type != session.EntryAssistant {
		t.Fatalf("branch after the run ends with %+v", got[len(got)-1])
	}
	if in := reqs[len(reqs)-1].Input(); len(in) < 3 {
		t.Fatalf("the run's request has %d input items", len(in))
	}
}

// TestPromptRefusedWhenSessionFileChanged: a session file rewritten in
// place behind an idle agent (its branch released) is found out before
// anything is sent: the prompt fails saying the file changed and what to
// do, and the provider gets no request.
func TestPromptRefusedWhenSessionFileChanged(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	longBranch(t, h.sess, 64<<10)
	h.sess.Release()
	b, err := os.ReadFile(h.sess.Path())
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndex(b, []byte("hello, <world>"))
	copy(b[i:], "HELLO, <world>")
	if err := os.WriteFile(h.sess.Path(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	h.srv.Enqueue(pt.Text("never asked"))
	_, err = h.agent.Prompt(context.Background(), "go on", PromptOptions{})
	if err == nil || !strings.Contains(err.Error(), "changed on disk") || !strings.Contains(err.Error(), "open it again") {
		t.Fatalf("prompt on a changed session file: %v, want the change named with what to do", err)
	}
	if n := len(h.srv.Requests()); n != 0 {
		t.Fatalf("%d requests sent from a changed session file", n)
	}
}

// TestIdleAgentReleasesItsBranch: when its run ends an agent's session
// gives back its typed branch (the file holds it): the live heap after a
// run on a 2 MB branch falls by most of the branch, where it used to stay
// (an idle session kept a typed copy of its file). The provider is a
// loopback server that keeps nothing of the requests.
func TestIdleAgentReleasesItsBranch(t *testing.T) {
	h := loopbackHarness(t)
	const size = 2 << 20
	longBranch(t, h.sess, size)
	// Kept as a resumed session's is: typed from the file (the appended
	// entries share the caller's strings), then kept by an append.
	h.sess.Release()
	if _, err := h.sess.AppendEntry(session.Entry{Type: session.EntryUser, Text: "and now"}); err != nil {
		t.Fatal(err)
	}
	before := liveHeap()
	if res := h.prompt("go on", PromptOptions{}).Wait(); res.Outcome != OutcomeCompleted {
		t.Fatalf("run: %+v", res)
	}
	grew := int64(liveHeap()) - int64(before)
	t.Logf("live heap after a run on a %d-byte branch: %+d bytes", size, grew)
	if grew > -size/2 {
		t.Errorf("the live heap changed by %+d bytes after a run on a %d-byte branch: the idle session keeps its branch", grew, size)
	}
}
