package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestOpenRecordsRunsLeftWithoutCheckpoint: a run that made a request
// and has no checkpoint (its writer died, or could not write the
// checkpoint: a full disk) is an open run for Inspect, which writes
// nothing; the next writable Open records its end once, as failed with
// ReasonRunUnrecorded, after the marker of its unsettled request. A run
// with its checkpoint, and one closed by a later checkpoint, are not
// touched. On the old code nothing ever wrote that checkpoint.
func TestOpenRecordsRunsLeftWithoutCheckpoint(t *testing.T) {
	s := newSession(t)
	mustAppend(t, s, Entry{Type: EntryUser, Text: "hi", RunID: "done"})
	d := Dispatch{ID: NewID(), RunID: "done", Model: "m"}
	if err := s.Append(DispatchRecord(d)); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(SettledRecord(DispatchSettled{ID: d.ID, RunID: "done", Outcome: SettledNoUsage}), CheckpointRecord(Checkpoint{RunID: "done", Outcome: "completed"})); err != nil {
		t.Fatal(err)
	}
	// Settled, but its checkpoint was never written (a full disk).
	settled := Dispatch{ID: NewID(), RunID: "nospace", Model: "m"}
	if err := s.Append(DispatchRecord(settled)); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(UsageRecord(Usage{RunID: "nospace", Input: 1}), SettledRecord(DispatchSettled{ID: settled.ID, RunID: "nospace", Outcome: SettledUsage})); err != nil {
		t.Fatal(err)
	}
	// In flight when its writer died.
	if err := s.Append(DispatchRecord(Dispatch{ID: NewID(), RunID: "killed", Model: "m"})); err != nil {
		t.Fatal(err)
	}
	if got := s.OpenRuns(); fmt.Sprint(got) != "[nospace killed]" {
		t.Fatalf("the writer's open runs = %v", got)
	}
	path := s.Path()
	s.Close()

	ro, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := ro.OpenRuns(); fmt.Sprint(got) != "[nospace killed]" {
		t.Fatalf("Inspect's open runs = %v", got)
	}
	ro.Close()
	before := fileSize(t, path)
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	cps := w.Checkpoints()
	open := w.OpenRuns()
	w.Close()
	if len(open) != 0 {
		t.Errorf("open runs after Open: %v", open)
	}
	var got []string
	for _, c := range cps {
		got = append(got, c.RunID+":"+c.Outcome)
		if c.RunID != "done" && c.Error != ReasonRunUnrecorded {
			t.Errorf("checkpoint of %s says %q", c.RunID, c.Error)
		}
	}
	if strings.Join(got, " ") != "done:completed nospace:failed killed:failed" {
		t.Fatalf("checkpoints after Open: %v", got)
	}
	after := fileSize(t, path)
	if after == before {
		t.Fatal("Open wrote nothing")
	}
	w, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if n := fileSize(t, path); n != after {
		t.Fatalf("a second Open wrote %d more bytes", n-after)
	}
}

// TestWriteFailureAdvice names the real cause of a failed write: a full
// disk is not a read-only file system (whose advice used to be "free disk
// space").
func TestWriteFailureAdvice(t *testing.T) {
	wrap := func(errno syscall.Errno) error {
		return fmt.Errorf("append to session x: %w", &fs.PathError{Op: "write", Path: "x", Err: errno})
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{wrap(syscall.ENOSPC), "full"},
		{wrap(syscall.EROFS), "read-only"},
		{wrap(syscall.EACCES), "permissions"},
		{&LimitError{Limit: "file bytes"}, "start a new session"},
		{errors.New("something else"), ""},
	} {
		got := WriteFailureAdvice(tc.err)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("advice for %v = %q, want it to say %q", tc.err, got, tc.want)
		}
		if tc.want == "read-only" && strings.Contains(got, "free disk space") {
			t.Errorf("read-only advice says to free disk space: %q", got)
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
