package session

import (
	"os"
	"strings"
	"testing"
)

// TestUnsettledDispatchIsUncertain: a dispatch its writer never settled
// (the process died with the request in flight) makes usage uncertain for
// a reader at once and durably for a writable Open, which records it as a
// marker with its cause; a settled dispatch leaves usage known.
func TestUnsettledDispatchIsUncertain(t *testing.T) {
	s := newSession(t)
	mustAppend(t, s, Entry{Type: EntryUser, Text: "hi"})
	settled := Dispatch{ID: NewID(), RunID: "run1", Model: "m"}
	if err := s.Append(DispatchRecord(settled)); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(EntryRecord(sampleAssistant()), UsageRecord(Usage{RunID: "run1", Input: 3, Output: 4}),
		SettledRecord(DispatchSettled{ID: settled.ID, RunID: "run1", Outcome: SettledUsage})); err != nil {
		t.Fatal(err)
	}
	inFlight := Dispatch{ID: NewID(), RunID: "run2", Operation: "compaction", Model: "m", Attempt: 2}
	if err := s.Append(DispatchRecord(inFlight)); err != nil {
		t.Fatal(err)
	}
	if tot := s.Totals(); tot.Uncertain || tot.UnsettledDispatches != 0 {
		t.Fatalf("the writer's own in-flight request made usage uncertain: %+v", tot)
	}
	path := s.Path()
	s.Close() // the writer dies without settling

	ro, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	tot := ro.Totals()
	ro.Close()
	want := UsageUncertain{RunID: "run2", Operation: "compaction", Reason: ReasonUnsettledDispatch, Dispatched: true, Attempt: 2}
	if !tot.Uncertain || tot.UnsettledDispatches != 1 || tot.UncertainMarkers != 0 || tot.Cause != want {
		t.Fatalf("Inspect totals = %+v, want one unsettled dispatch with cause %+v", tot, want)
	}

	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tot = w.Totals()
	w.Close()
	if !tot.Uncertain || tot.UnsettledDispatches != 0 || tot.UncertainMarkers != 1 || tot.Cause != want {
		t.Fatalf("Open totals = %+v, want the unsettled dispatch recorded as a marker", tot)
	}
	if !listedUncertainty(t, path) {
		t.Fatal("List does not show the uncertainty recorded by Open")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), `"reason":"unsettled_dispatch"`); n != 1 {
		t.Fatalf("%d unsettled_dispatch markers in the file, want 1:\n%s", n, raw)
	}
	// Reopening records nothing more; the marker is sticky.
	w, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tot = w.Totals()
	w.Close()
	if tot.UncertainMarkers != 1 || !tot.Uncertain || tot.Cause != want {
		t.Fatalf("reopen totals = %+v", tot)
	}
	if raw2, _ := os.ReadFile(path); len(raw2) != len(raw) {
		t.Fatalf("reopen wrote %d more bytes", len(raw2)-len(raw))
	}
}

// TestDispatchRecordsRoundTrip: the new kinds decode to what was encoded
// and the recovered output is kept out of the branch and the totals.
func TestDispatchRecordsRoundTrip(t *testing.T) {
	s := newSession(t)
	mustAppend(t, s, Entry{Type: EntryUser, Text: "hi"})
	d := Dispatch{ID: NewID(), RunID: "run1", Operation: "main", Model: "gpt", Attempt: 1}
	out := RecoveredOutput{RunID: "run1", Channel: "text", Text: "partial \"answer\"\n", Attempt: 1}
	if err := s.Append(DispatchRecord(d)); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(UncertainRecord(UsageUncertain{RunID: "run1", Reason: "stream_interrupted", Dispatched: true, Attempt: 1}),
		SettledRecord(DispatchSettled{ID: d.ID, RunID: "run1", Outcome: SettledUncertain}), RecoveredRecord(out)); err != nil {
		t.Fatal(err)
	}
	for _, open := range []func(string) (*Session, error){Inspect, Open} {
		r, err := open(s.Path())
		if err != nil {
			t.Fatal(err)
		}
		got := r.RecoveredOutputs()
		tot := r.Totals()
		n := len(r.Branch())
		r.Close()
		if len(got) != 1 || got[0] != out {
			t.Fatalf("RecoveredOutputs = %+v, want [%+v]", got, out)
		}
		if n != 1 || tot.UnsettledDispatches != 0 || tot.UncertainMarkers != 1 || tot.Requests != 0 || tot.Cause.Reason != "stream_interrupted" {
			t.Fatalf("branch %d entries, totals %+v", n, tot)
		}
	}
	if err := s.Append(DispatchRecord(d)); err != nil {
		t.Fatal(err) // settled: the id is free again
	}
	if err := s.Append(DispatchRecord(d)); err == nil {
		t.Fatal("a duplicate pending dispatch id was accepted")
	}
}

// TestOpenFileWrittenBeforeDispatchLog: a session written by the code
// before the dispatch log (testdata/before-dispatch-log.jsonl, generated
// by that code) opens for reading and writing without a byte changed and
// with the same totals and cause.
func TestOpenFileWrittenBeforeDispatchLog(t *testing.T) {
	orig, err := os.ReadFile("testdata/before-dispatch-log.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/20261201-204523-dccaa80ada3a.jsonl"
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	want := UsageUncertain{RunID: "run1", Reason: "cancelled_after_dispatch", Dispatched: true, Attempt: 1}
	for _, open := range []func(string) (*Session, error){Inspect, Open} {
		s, err := open(path)
		if err != nil {
			t.Fatal(err)
		}
		tot, n, rec := s.Totals(), len(s.Branch()), s.RecoveredOutputs()
		s.Close()
		if n != 2 || tot.Requests != 1 || tot.Known.Input != 10 || !tot.Uncertain || tot.UnsettledDispatches != 0 || tot.Cause != want || len(rec) != 0 {
			t.Fatalf("branch %d, totals %+v, recovered %v", n, tot, rec)
		}
		if got, _ := os.ReadFile(path); string(got) != string(orig) {
			t.Fatal("opening an old session changed it")
		}
	}
}
