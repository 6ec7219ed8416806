package host_test

import (
	"fmt"
	"testing"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/session"
)

// TestFinalAnswerReadsPages: FinalAnswer finds a run's last answer however
// far back on the branch it is (read a page at a time from a released
// branch), joins its text items, and is "" for a run without one.
func TestFinalAnswerReadsPages(t *testing.T) {
	s, err := session.Create(t.TempDir(), session.Header{Cwd: "/ws"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	add := func(run string, items ...session.Item) {
		t.Helper()
		typ := session.EntryAssistant
		if items == nil {
			typ = session.EntryUser
		}
		if _, err := s.AppendEntry(session.Entry{Type: typ, RunID: run, Text: "u", Items: items}); err != nil {
			t.Fatal(err)
		}
	}
	text := func(s string) session.Item { return session.Item{Type: session.ItemText, Text: s} }
	add("run_a", text("first "), text("answer"))
	add("run_a", session.Item{Type: session.ItemFunctionCall, CallID: "c", Name: "bash", Arguments: "{}"})
	for i := range 300 { // later runs, pages of them
		add(fmt.Sprintf("run_b%d", i))
		add(fmt.Sprintf("run_b%d", i), text(fmt.Sprint("answer ", i)))
	}
	add("run_c")
	s.Release()
	for run, want := range map[string]string{"run_a": "first answer", "run_b299": "answer 299", "run_b7": "answer 7", "run_c": "", "run_none": ""} {
		if got := host.FinalAnswer(s, run); got != want {
			t.Errorf("FinalAnswer(%s) = %q, want %q", run, got, want)
		}
	}
}
