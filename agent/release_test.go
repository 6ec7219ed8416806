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

// TestReleasedSessionSendsTheSameRequest: a session that gave back its
// typed branch (the host releases an idle one; the next run types it
// again from the file) gives the agent the same request, byte for byte,
// as the kept branch.
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
	// A run on the released branch sends it whole.
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
