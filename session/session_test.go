package session

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func newSession(t *testing.T) *Session {
	t.Helper()
	s, err := Create(filepath.Join(t.TempDir(), "sessions"), Header{Cwd: "/work", Title: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustAppend(t *testing.T, s *Session, e Entry) Entry {
	t.Helper()
	out, err := s.AppendEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func branchIDs(b []Entry) []string {
	var ids []string
	for _, e := range b {
		ids = append(ids, e.ID)
	}
	return ids
}

func sampleAssistant() Entry {
	return Entry{Type: EntryAssistant, RunID: "run1", StopReason: "completed", Items: []Item{
		{Type: ItemReasoning, ID: "rs_1", Text: "thinking \"hard\"\n", EncryptedContent: "gAAAAB\u00e9\x01opaque=="},
		{Type: ItemText, ID: "msg_1", Text: "Hello, <world> \u2028 ✓"},
		{Type: ItemFunctionCall, ID: "fc_1", CallID: "call_1", Name: "read", Arguments: `{"path":"a.go"}`},
	}}
}

func TestCreateAppendReopen(t *testing.T) {
	s := newSession(t)
	h := s.Header()
	if h.ID == "" || h.Created.IsZero() || h.Version != FormatVersion || h.Cwd != "/work" {
		t.Fatalf("header not completed: %+v", h)
	}
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
	}
	di, _ := os.Stat(filepath.Dir(s.Path()))
	if di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", di.Mode().Perm())
	}
	if s.Head() != "" || len(s.Branch()) != 0 {
		t.Fatal("new session not empty")
	}

	img := Image{MimeType: "image/png", SHA256: strings.Repeat("ab", 32), Bytes: 1234}
	u := mustAppend(t, s, Entry{Type: EntryUser, Text: "read a.go", RunID: "run1", Attached: &Attached{Images: []Image{img, img}}})
	if u.Parent != "" || u.ID == "" || u.Time.IsZero() {
		t.Fatalf("first entry: %+v", u)
	}
	asst := sampleAssistant()
	asst.ID = "a1"
	if err := s.Append(EntryRecord(asst), UsageRecord(Usage{RunID: "run1", RequestID: "resp_1", Model: "gpt-5", Input: 100, CachedInput: 20, Output: 30, Reasoning: 10, CostPicodollars: 12345})); err != nil {
		t.Fatal(err)
	}
	tr := mustAppend(t, s, Entry{Type: EntryToolResult, RunID: "run1", Result: &ToolResult{CallID: "call_1", Tool: "read", Text: "package a", Details: map[string]any{"lines": 1.0, "path": "a.go"}, Attached: &Attached{Images: []Image{img}}}})
	if tr.Parent != "a1" {
		t.Fatalf("tool result parent %q, want a1", tr.Parent)
	}
	comp := mustAppend(t, s, Entry{Type: EntryCompaction, Compaction: &Compaction{Summary: "did stuff", FirstKept: tr.ID, Skills: []string{"go"}, ReadFiles: []string{"a.go"}, ModifiedFiles: []string{"b.go"}, TokensBefore: 9000}})
	if err := s.Append(UncertainRecord(UsageUncertain{RunID: "run1", Operation: "compaction", Reason: "http_5xx", Dispatched: true, Attempt: 2}),
		DelegatedRecord(DelegatedUsage{ChildSession: "child1", Usage: Usage{Input: 5, Output: 6, CostPicodollars: 7}}),
		CheckpointRecord(Checkpoint{RunID: "run1", Outcome: OutcomeCompleted})); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Checkpoint{{RunID: "run1", Outcome: OutcomeCompleted}}, s.Checkpoints()); d != "" {
		t.Errorf("writer checkpoints: %s", d)
	}
	want := s.Branch()
	if got := branchIDs(want); !cmp.Equal(got, []string{u.ID, "a1", tr.ID, comp.ID}) {
		t.Fatalf("branch %v", got)
	}
	if s.Head() != comp.ID {
		t.Fatalf("head %q want %q", s.Head(), comp.ID)
	}
	wantTotals := Totals{
		Known:     Usage{Input: 105, CachedInput: 20, Output: 36, Reasoning: 10, CostPicodollars: 12352},
		Own:       Usage{Input: 100, CachedInput: 20, Output: 30, Reasoning: 10, CostPicodollars: 12345},
		Requests:  1,
		Delegated: Usage{Input: 5, Output: 6, CostPicodollars: 7}, DelegatedRecords: 1,
		Uncertain: true, UncertainMarkers: 1,
		Cause: UsageUncertain{RunID: "run1", Operation: "compaction", Reason: "http_5xx", Dispatched: true, Attempt: 2},
	}
	if d := cmp.Diff(wantTotals, s.Totals()); d != "" {
		t.Errorf("totals (-want +got):\n%s", d)
	}
	if l := readListing(t, s.Path()); !l.uncertain || l.size != s.Size() {
		t.Errorf("listing cache %+v, want uncertain at size %d", l, s.Size())
	}
	s.Close()

	for name, open := range map[string]func(string) (*Session, error){"Open": Open, "Inspect": Inspect} {
		r, err := open(s.Path())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := cmp.Diff(want, r.Branch()); d != "" {
			t.Errorf("%s branch (-want +got):\n%s", name, d)
		}
		if d := cmp.Diff(wantTotals, r.Totals()); d != "" {
			t.Errorf("%s totals (-want +got):\n%s", name, d)
		}
		if d := cmp.Diff([]Checkpoint{{RunID: "run1", Outcome: OutcomeCompleted}}, r.Checkpoints()); d != "" {
			t.Errorf("%s checkpoints: %s", name, d)
		}
		if d := cmp.Diff(s.Header(), r.Header()); d != "" {
			t.Errorf("%s header: %s", name, d)
		}
		e, ok := r.Entry("a1")
		if !ok || !cmp.Equal(e.Items, sampleAssistant().Items) {
			t.Errorf("%s Entry(a1) = %+v, %v", name, e, ok)
		}
		r.Close()
	}
}

func TestBranchingHeadRecord(t *testing.T) {
	s := newSession(t)
	a := mustAppend(t, s, Entry{Type: EntryUser, Text: "a"})
	b := mustAppend(t, s, Entry{Type: EntryUser, Text: "b"})
	c := mustAppend(t, s, Entry{Type: EntryUser, Text: "c"})
	old := s.Branch()
	if err := s.SetHead(a.ID); err != nil {
		t.Fatal(err)
	}
	if got := branchIDs(s.Branch()); !cmp.Equal(got, []string{a.ID}) {
		t.Fatalf("after SetHead: %v", got)
	}
	// The branch a caller already holds is not disturbed.
	if got := branchIDs(old); !cmp.Equal(got, []string{a.ID, b.ID, c.ID}) {
		t.Fatalf("held branch changed: %v", got)
	}
	d := mustAppend(t, s, Entry{Type: EntryUser, Text: "d"})
	if d.Parent != a.ID {
		t.Fatalf("d.Parent = %q", d.Parent)
	}
	if got := branchIDs(old); !cmp.Equal(got, []string{a.ID, b.ID, c.ID}) {
		t.Fatalf("held branch changed: %v", got)
	}
	if err := s.SetHead("nope"); !errors.Is(err, ErrUnknownEntry) {
		t.Fatalf("SetHead(unknown) = %v", err)
	}
	if _, err := s.AppendEntry(Entry{Type: EntryUser, Parent: "nope"}); !errors.Is(err, ErrUnknownEntry) {
		t.Fatalf("unknown parent = %v", err)
	}
	if _, err := s.AppendEntry(Entry{ID: b.ID, Type: EntryUser}); err == nil {
		t.Fatal("duplicate id accepted")
	}
	// Old ancestry stays reachable: branch back to c.
	if err := s.SetHead(c.ID); err != nil {
		t.Fatal(err)
	}
	wantIDs := []string{a.ID, b.ID, c.ID}
	if got := branchIDs(s.Branch()); !cmp.Equal(got, wantIDs) {
		t.Fatalf("after SetHead(c): %v", got)
	}
	s.Close()
	r, err := Inspect(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := branchIDs(r.Branch()); !cmp.Equal(got, wantIDs) {
		t.Fatalf("reopened branch %v", got)
	}
	if r.Len() != 4 {
		t.Fatalf("Len = %d", r.Len())
	}
	if _, err := r.AppendEntry(Entry{Type: EntryUser}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only append = %v", err)
	}
}

func TestUnknownKindsKept(t *testing.T) {
	s := newSession(t)
	a := mustAppend(t, s, Entry{Type: EntryUser, Text: "a"})
	s.Close()
	f, err := os.OpenFile(s.Path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	future := `{"kind":"future_thing","id":"zz","nested":{"a":[1,2,{"b":null}]},"n":-1.5e3}` + "\n"
	f.WriteString(future)
	f.Close()
	r, err := Open(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if r.UnknownRecords() != 1 {
		t.Fatalf("UnknownRecords = %d", r.UnknownRecords())
	}
	b := mustAppend(t, r, Entry{Type: EntryUser, Text: "b", Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)})
	if got := branchIDs(r.Branch()); !cmp.Equal(got, []string{a.ID, b.ID}) {
		t.Fatalf("branch %v", got)
	}
	r.Close()
	data, _ := os.ReadFile(s.Path())
	if !strings.Contains(string(data), future) {
		t.Fatal("unknown record not kept in the file")
	}
}

func TestRefreshFollowsWriter(t *testing.T) {
	w := newSession(t)
	a := mustAppend(t, w, Entry{Type: EntryUser, Text: "a"})
	r, err := Inspect(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if fa, err := r.Refresh(); err != nil || fa.Records != 0 {
		t.Fatalf("idle Refresh = %+v, %v", fa, err)
	}
	b := mustAppend(t, w, Entry{Type: EntryUser, Text: "b"})
	if err := w.Append(UsageRecord(Usage{Input: 7})); err != nil {
		t.Fatal(err)
	}
	fa, err := r.Refresh()
	if err != nil {
		t.Fatal(err)
	}
	if fa.Records != 2 || fa.Entries != 1 || !fa.HeadMoved || fa.Bytes <= 0 {
		t.Fatalf("Refresh = %+v", fa)
	}
	if got := branchIDs(r.Branch()); !cmp.Equal(got, []string{a.ID, b.ID}) || r.Totals().Own.Input != 7 || r.ForeignAppends() != 2 {
		t.Fatalf("after Refresh: %v %+v", got, r.Totals())
	}
	// The writer is told about appends made through another handle.
	w2, err := Open(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	var told []ForeignAppend
	w.SetForeignAppendHook(func(fa ForeignAppend) { told = append(told, fa) })
	c := mustAppend(t, w2, Entry{Type: EntryUser, Text: "c"})
	d := mustAppend(t, w, Entry{Type: EntryUser, Text: "d"})
	if len(told) != 1 || told[0].Records != 1 || d.Parent != c.ID {
		t.Fatalf("told %+v, d.Parent %q want %q", told, d.Parent, c.ID)
	}
}
