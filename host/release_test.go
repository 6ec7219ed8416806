package host_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/internal/heaptest"
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

// TestDiffRefusesChangedFile: the diff of a session whose file was
// rewritten in place behind it (its branch released) is the ChangedError,
// not a diff of a branch read as empty.
func TestDiffRefusesChangedFile(t *testing.T) {
	s, err := session.Create(t.TempDir(), session.Header{Cwd: "/ws"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AppendEntry(session.Entry{Type: session.EntryUser, RunID: "run_a", Text: "hello there"}); err != nil {
		t.Fatal(err)
	}
	s.Release()
	b, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path(), bytes.Replace(b, []byte("hello there"), []byte("HELLO there"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	var ce *session.ChangedError
	if _, _, err := host.Diff(s, nil, ""); !errors.As(err, &ce) {
		t.Fatalf("Diff of a changed session file: %v, want a *session.ChangedError", err)
	}
}

// TestEndedActivityReleasesBranch: when an open session's activity (a
// run, a rewind) ends, the session gives back its typed branch — the
// live heap falls by about the branch — where it used to keep it until
// the session closed (an idle open session held a typed copy of its
// file).
func TestEndedActivityReleasesBranch(t *testing.T) {
	if !heaptest.OwnProcess(t) {
		return
	}
	th := newTestHost(t, hosttest.Options{})
	hs := th.create(t, host.Spec{})
	o := host.NewOpenSession(hs, 0, 0)
	led := hs.Ledger()
	out := strings.Repeat("a line of a tool's output, as long as lines get\n", 50)
	const size = 2 << 20
	for i := 0; i*len(out) < size; i++ {
		if _, err := led.AppendEntry(session.Entry{Type: session.EntryUser, Text: fmt.Sprint(i, out)}); err != nil {
			t.Fatal(err)
		}
	}
	// Kept as a run keeps it: typed from the file by an append.
	led.Release()
	run := newFakeRun()
	if err := o.Begin(run); err != nil {
		t.Fatal(err)
	}
	if _, err := led.AppendEntry(session.Entry{Type: session.EntryUser, Text: "go on"}); err != nil {
		t.Fatal(err)
	}
	heap := heaptest.Live
	before := heap()
	o.End(run)
	grew := heap() - before
	t.Logf("live heap when the activity on a %d-byte branch ended: %+d bytes", size, grew)
	if grew > -size/2 {
		t.Errorf("the live heap changed by %+d bytes when the activity on a %d-byte branch ended: the idle session keeps its branch", grew, size)
	}
	if got := len(led.Branch()); got == 0 {
		t.Error("the released branch reads back empty")
	}
}
