//go:build linux

package session

import (
	"testing"
	"time"
)

// TestOpenLeavesLiveWritersDispatch: a writable Open while another
// writer is live (its Session open, a request in flight) records
// nothing: the in-flight request is the live writer's to settle, and
// once it does, usage is known for both. Only after that writer is gone
// (closed without settling, as a killed process's descriptors are) does
// a writable Open record the dispatch as uncertain. On the old code the
// concurrent Open marked the live request uncertain for good.
func TestOpenLeavesLiveWritersDispatch(t *testing.T) {
	live := newSession(t)
	mustAppend(t, live, Entry{Type: EntryUser, Text: "hi"})
	d := Dispatch{ID: NewID(), RunID: "run1", Model: "m"}
	if err := live.Append(DispatchRecord(d)); err != nil {
		t.Fatal(err)
	}
	path := live.Path()
	before := fileSize(t, path)

	other, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := fileSize(t, path); n != before {
		t.Fatalf("a writable Open beside a live writer wrote %d bytes", n-before)
	}
	if tot := other.Totals(); !tot.Uncertain || tot.UnsettledDispatches != 1 || tot.UncertainMarkers != 0 {
		t.Fatalf("the other writer's totals = %+v, want the request in flight counted, not recorded", tot)
	}
	// The live writer settles its request.
	if err := live.Append(EntryRecord(sampleAssistant()), UsageRecord(Usage{RunID: "run1", Input: 3, Output: 4}),
		SettledRecord(DispatchSettled{ID: d.ID, RunID: "run1", Outcome: SettledUsage})); err != nil {
		t.Fatal(err)
	}
	if tot := live.Totals(); tot.Uncertain {
		t.Fatalf("the live writer's usage became uncertain: %+v", tot)
	}
	if _, err := other.Refresh(); err != nil {
		t.Fatal(err)
	}
	if tot := other.Totals(); tot.Uncertain || tot.UnsettledDispatches != 0 {
		t.Fatalf("after the settlement the other writer's totals = %+v", tot)
	}
	other.Close()

	// A second request is in flight when the live writer goes away; the
	// next writable Open, alone now, records it.
	d2 := Dispatch{ID: NewID(), RunID: "run2", Model: "m"}
	if err := live.Append(DispatchRecord(d2)); err != nil {
		t.Fatal(err)
	}
	live.Close()
	after, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if tot := after.Totals(); !tot.Uncertain || tot.UncertainMarkers != 1 || tot.UnsettledDispatches != 0 || tot.Cause.RunID != "run2" {
		t.Fatalf("Open after the writer went away: totals %+v, want run2's request recorded", tot)
	}
}

// TestOpenWaitsForAWriterGoingAway: the "other writer" a writable Open
// meets may be on its way out (a killed process's child between fork and
// exec keeps the descriptor for a few milliseconds). Open waits briefly,
// without holding the file lock, and once it is alone records what was
// left unsettled. Without the wait, a resume right after a crash left it
// to the next open.
func TestOpenWaitsForAWriterGoingAway(t *testing.T) {
	s := newSession(t)
	if err := s.Append(DispatchRecord(Dispatch{ID: NewID(), RunID: "killed", Model: "m"})); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	s.Close()
	lingering, err := Open(path) // settles, then stays open as the lingering holder
	if err != nil {
		t.Fatal(err)
	}
	if err := lingering.Append(DispatchRecord(Dispatch{ID: NewID(), RunID: "killed2", Model: "m"})); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(3 * aloneWait)
		lingering.Close()
	}()
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.Alone() || len(w.OpenRuns()) != 0 || w.Totals().UnsettledDispatches != 0 {
		t.Fatalf("after the other writer went away: alone %v, open runs %v, totals %+v", w.Alone(), w.OpenRuns(), w.Totals())
	}
}
