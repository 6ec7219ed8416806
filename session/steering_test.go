package session

import (
	"reflect"
	"testing"
)

// TestNativeSteeringRecords: a native steering intent (a dispatch of
// operation native_steering with its local id and input) and the
// steering entry linked to it survive a reopen; an intent its writer
// left unsettled is unresolved for a reader, is settled as unresolved
// (with a usage_uncertain marker) by the next writable open, and stays
// unresolved for every later open.
func TestNativeSteeringRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, Header{Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	intent := Dispatch{ID: "op_1", RunID: "run_1", Operation: OperationNativeSteering, Model: "m", LocalID: "run_1-m1", Input: "keep it short"}
	if err := s.Append(DispatchRecord(intent)); err != nil {
		t.Fatal(err)
	}
	link := &NativeSteering{Operation: "op_1", LocalID: "run_1-m1"}
	if _, err := s.AppendEntry(Entry{Type: EntrySteering, RunID: "run_1", Text: "keep it short", NativeSteering: link}); err != nil {
		t.Fatal(err)
	}
	if un := s.UnresolvedSteering(); len(un) != 0 {
		t.Fatalf("the writer's own pending intent is unresolved: %v", un)
	}
	path := s.Path()
	s.Close()

	r, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	b := r.Branch()
	if len(b) != 1 || b[0].NativeSteering == nil || *b[0].NativeSteering != *link {
		t.Fatalf("entry %+v", b)
	}
	if un := r.UnresolvedSteering(); len(un) != 1 || un[0].ID != "op_1" || !r.Totals().Uncertain {
		t.Fatalf("reader: unresolved %v, uncertain %v", un, r.Totals().Uncertain)
	}
	r.Close()

	for i := range 2 { // the first open settles it; the second reads the settlement
		w, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		un := w.UnresolvedSteering()
		if len(un) != 1 || un[0].ID != "op_1" || un[0].Outcome != SettledUnresolved || !w.Totals().Uncertain {
			t.Fatalf("open %d: unresolved %v, uncertain %v", i, un, w.Totals().Uncertain)
		}
		w.Close()
	}
}

// TestNativeCompactionItems: a compaction entry's provider items (the
// user messages a native compaction kept, its opaque item) survive a
// reopen exactly.
func TestNativeCompactionItems(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, Header{Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	items := []Item{{Type: ItemUserText, Text: "first \"question\"\n"}, {Type: ItemCompaction, ID: "cmp_1", EncryptedContent: "gAAAA=="}}
	c := &Compaction{Items: items, TokensBefore: 1234, ReadFiles: []string{"a.go"}}
	if _, err := s.AppendEntry(Entry{Type: EntryCompaction, RunID: "run_1", Compaction: c}); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	s.Close()
	r, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := r.Branch()
	if len(b) != 1 || b[0].Compaction == nil || !reflect.DeepEqual(b[0].Compaction.Items, items) || b[0].Compaction.Summary != "" || b[0].Compaction.TokensBefore != 1234 {
		t.Fatalf("compaction after reopen: %+v", b[0].Compaction)
	}
}
