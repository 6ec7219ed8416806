//go:build unix

package session

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests in this file each guard one rule of the ledger that no other
// test noticed when it was removed (mutation testing; see
// internal/mutants/mutants.txt).

// holdLock takes a flock of mode (unix.LOCK_SH or LOCK_EX) on path through
// its own open file description, as another process would, until the test
// calls the returned release.
func holdLock(t *testing.T, path string, mode int) (release func()) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), mode); err != nil {
		t.Fatal(err)
	}
	var done bool
	release = func() {
		if !done {
			done = true
			unix.Flock(int(f.Fd()), unix.LOCK_UN)
			f.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// waitsForLock runs op, which must not finish while another holder keeps
// a shared lock on path, and must finish once it is released.
func waitsForLock(t *testing.T, path, what string, op func() error) {
	t.Helper()
	release := holdLock(t, path, unix.LOCK_SH)
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		t.Fatalf("%s finished (%v) while a reader held a shared lock: it did not take the exclusive lock", what, err)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s after the reader released its lock: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still waiting after the lock was released", what)
	}
}

// TestWritersTakeTheExclusiveLock: opening for writing (which may repair)
// and appending both wait for a reader's shared lock to go.
func TestWritersTakeTheExclusiveLock(t *testing.T) {
	path, _ := sessionWith(t, 1)
	var w *Session
	waitsForLock(t, path, "Open", func() (err error) { w, err = Open(path); return err })
	defer w.Close()
	waitsForLock(t, path, "Append", func() error {
		_, err := w.AppendEntry(Entry{Type: EntryUser, Text: "x"})
		return err
	})
	// A reader does not wait for another reader.
	release := holdLock(t, path, unix.LOCK_SH)
	done := make(chan error, 1)
	go func() {
		r, err := Inspect(path)
		if err == nil {
			r.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		release() // let it finish before the test ends
		<-done
		t.Fatal("Inspect waited for another reader's shared lock")
	}
}

// TestCreateRefusesOversizedHeader: a header over the record limit is
// refused and leaves no file behind.
func TestCreateRefusesOversizedHeader(t *testing.T) {
	lowerLimits(t, MaxFileBytes, MaxRecords, 256)
	dir := t.TempDir()
	if s, err := Create(dir, Header{ID: "big", Title: strings.Repeat("t", 300)}); err == nil {
		s.Close()
		t.Fatal("a header over the record limit was created")
	}
	if _, err := os.Lstat(filepath.Join(dir, "big.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused session's file exists: %v", err)
	}
}

// TestAppendCutsLongForeignTornTail: a torn tail another writer left after
// this session's last fold is cut before the append, so the append lands
// where the tail began and nothing of the tail survives after it.
func TestAppendCutsLongForeignTornTail(t *testing.T) {
	path, ids := sessionWith(t, 2)
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	good := readFile(t, path)
	torn, err := appendRecord(nil, EntryRecord(Entry{ID: "torn", Type: EntryUser, Text: strings.Repeat("t", 4000)}), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	appendRaw(t, path, torn[:len(torn)-100]) // a dead writer's partial line
	e, err := w.AppendEntry(Entry{Type: EntryUser, Text: "after"})
	if err != nil {
		t.Fatal(err)
	}
	line, err := appendRecord(nil, EntryRecord(e), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); !bytes.Equal(got, append(good, line...)) {
		t.Fatalf("file after the append holds %d bytes, want the %d of the good prefix and the new record", len(got), len(good)+len(line))
	}
	r, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := branchIDs(r.Branch()); len(got) != 3 || got[1] != ids[1] || got[2] != e.ID || r.TornBytes() != 0 {
		t.Errorf("branch %v torn %d", got, r.TornBytes())
	}
}

// TestTornTailRepairIsSynced: the truncation of a torn tail is made
// durable; a sync failure fails the open rather than appending after an
// unsynced repair.
func TestTornTailRepairIsSynced(t *testing.T) {
	path, _ := sessionWith(t, 1)
	appendRaw(t, path, []byte(`{"kind":"entry","id":"half`))
	orig := syncData
	t.Cleanup(func() { syncData = orig })
	syncData = func(*os.File) error { return errors.New("EIO") }
	if s, err := Open(path); err == nil {
		s.Close()
		t.Fatal("Open repaired a torn tail although the sync failed")
	}
}

// TestReadOnlyNeverRepairs: Inspect of a torn file leaves it byte for byte.
func TestReadOnlyNeverRepairs(t *testing.T) {
	path, _ := sessionWith(t, 1)
	appendRaw(t, path, []byte(`{"kind":"entry","id":"half`))
	before := readFile(t, path)
	r, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !bytes.Equal(readFile(t, path), before) {
		t.Fatal("Inspect changed the file")
	}
}

// TestOpenRefusesSymlink: a session path that is a symbolic link is not
// opened, for reading or writing.
func TestOpenRefusesSymlink(t *testing.T) {
	path, _ := sessionWith(t, 1)
	link := filepath.Join(t.TempDir(), "link.jsonl")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string) (*Session, error){"Open": Open, "Inspect": Inspect} {
		if s, err := open(link); err == nil {
			s.Close()
			t.Errorf("%s followed a symbolic link", name)
		}
	}
}

// TestFileShrankBehindWriter: a file cut behind a writer's back is an
// error for the next append, which writes nothing.
func TestFileShrankBehindWriter(t *testing.T) {
	path, _ := sessionWith(t, 2)
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()-10); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, path)
	done := make(chan error, 1)
	go func() { _, err := w.AppendEntry(Entry{Type: EntryUser, Text: "x"}); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "shrank") {
			t.Fatalf("append after the file shrank: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("append after the file shrank hung")
	}
	if !bytes.Equal(readFile(t, path), before) {
		t.Fatal("the append wrote to a shrunken file")
	}
}

// TestAppendRefusals: invalid records, duplicate ids within one batch and
// a closed session are refused with nothing written.
func TestAppendRefusals(t *testing.T) {
	s := newSession(t)
	first := mustAppend(t, s, Entry{Type: EntryUser, Text: "first"})
	if err := s.Append(DispatchRecord(Dispatch{ID: "pending"})); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, s.Path())
	cases := map[string][]Record{
		"entry without type":          {EntryRecord(Entry{Text: "x"})},
		"entry record without entry":  {{Kind: KindEntry}},
		"unknown kind":                {{Kind: "bogus"}},
		"duplicate id in a batch":     {EntryRecord(Entry{ID: "dup", Type: EntryUser}), EntryRecord(Entry{ID: "dup", Type: EntryUser})},
		"duplicate of an earlier id":  {EntryRecord(Entry{ID: first.ID, Type: EntryUser})},
		"duplicate dispatch in batch": {DispatchRecord(Dispatch{ID: "d1"}), DispatchRecord(Dispatch{ID: "d1"})},
		"pending dispatch id again":   {DispatchRecord(Dispatch{ID: "pending"})},
	}
	for name, recs := range cases {
		if err := s.Append(recs...); err == nil {
			t.Errorf("%s: appended", name)
		}
	}
	if !bytes.Equal(readFile(t, s.Path()), before) {
		t.Fatal("a refused append reached the file")
	}
	s.Close()
	if err := s.Append(EntryRecord(Entry{Type: EntryUser})); !errors.Is(err, ErrClosed) {
		t.Errorf("append after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Refresh(); !errors.Is(err, ErrClosed) {
		t.Errorf("refresh after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestRecordByteLimitExact: a record of exactly the limit is written, one
// byte more is refused.
func TestRecordByteLimitExact(t *testing.T) {
	at := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	rec := func(n int) Record {
		return EntryRecord(Entry{ID: "x", Type: EntryUser, Time: at, Text: strings.Repeat("y", n)})
	}
	line, err := appendRecord(nil, rec(100), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	lowerLimits(t, MaxFileBytes, MaxRecords, len(line))
	s := newSession(t)
	if err := s.Append(rec(101)); err == nil {
		t.Error("a record one byte over the limit was appended")
	}
	if err := s.Append(rec(100)); err != nil {
		t.Errorf("a record of exactly the limit: %v", err)
	}
}

// TestFileByteLimitExact: an append that brings the file to exactly the
// limit is written; one byte more is refused.
func TestFileByteLimitExact(t *testing.T) {
	at := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	rec := EntryRecord(Entry{ID: "x", Type: EntryUser, Time: at, Text: "exact"})
	line, err := appendRecord(nil, rec, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, over := range []int64{1, 0} {
		s := newSession(t)
		lowerLimits(t, s.Size()+int64(len(line))-over, MaxRecords, MaxRecordBytes)
		err := s.Append(rec)
		if over == 1 && err == nil {
			t.Error("an append one byte past the file limit was written")
		}
		if over == 0 && err != nil {
			t.Errorf("an append reaching exactly the file limit: %v", err)
		}
		s.Close()
	}
}

// TestShortWriteWithoutError: a write that stores fewer bytes than asked
// and reports no error is still a failed append, undone.
func TestShortWriteWithoutError(t *testing.T) {
	s := newSession(t)
	mustAppend(t, s, Entry{Type: EntryUser, Text: "kept"})
	before := readFile(t, s.Path())
	orig := writeAt
	t.Cleanup(func() { writeAt = orig })
	writeAt = func(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b[:len(b)/2], off) }
	if _, err := s.AppendEntry(Entry{Type: EntryUser, Text: "half"}); err == nil {
		t.Fatal("a short write was taken for a whole one")
	}
	if !bytes.Equal(readFile(t, s.Path()), before) {
		t.Fatal("the short write was not undone")
	}
}

// TestSessionIDShape: an id is at most 128 characters of [A-Za-z0-9._-],
// not starting with a dot (no hidden or traversing file names).
func TestSessionIDShape(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o700); err != nil { // so "a/b" could be created
		t.Fatal(err)
	}
	for id, ok := range map[string]bool{
		strings.Repeat("a", 128): true, strings.Repeat("a", 129): false,
		".hidden": false, "a/b": false, "..": false, "ok-1_2.x": true,
	} {
		s, err := Create(dir, Header{ID: id})
		if (err == nil) != ok {
			t.Errorf("Create(id %q): %v, want ok=%v", id, err, ok)
		}
		if err == nil {
			s.Close()
		}
	}
}

// TestEmptyFileIsCorrupt: a session file without even a header is
// refused, never opened as an empty session.
func TestEmptyFileIsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.jsonl")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string) (*Session, error){"Open": Open, "Inspect": Inspect} {
		var ce *CorruptError
		if s, err := open(path); !errors.As(err, &ce) || ce.Line != 1 {
			if err == nil {
				s.Close()
			}
			t.Errorf("%s of an empty file: %v, want a CorruptError at line 1", name, err)
		}
	}
}

// TestReaderSeesTornTailRepaired: a reader that noted a torn tail learns
// on Refresh that a writer cut it.
func TestReaderSeesTornTailRepaired(t *testing.T) {
	path, _ := sessionWith(t, 1)
	appendRaw(t, path, []byte(`{"kind":"entry","id":"half`))
	r, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.TornBytes() == 0 {
		t.Fatal("the reader did not note the torn tail")
	}
	w, err := Open(path) // repairs
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := r.Refresh(); err != nil {
		t.Fatal(err)
	}
	if n := r.TornBytes(); n != 0 {
		t.Errorf("TornBytes = %d after a writer cut the tail", n)
	}
}

// TestHeaderWithoutNewlineRefused: a header cut before its newline is
// damage, not a torn tail: the file is refused and left as it is (cutting
// it would leave no header).
func TestHeaderWithoutNewlineRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cut.jsonl")
	data := []byte(`{"kind":"header","version":1,"id":"cut","created":"2026-12-05T00:00:00Z"`)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if s, err := Open(path); !errors.As(err, &ce) || ce.Line != 1 {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open = %v, want a CorruptError at line 1", err)
	}
	if !bytes.Equal(readFile(t, path), data) {
		t.Fatal("the file was modified")
	}
}

// TestBatchMembersOutOfPlaceRefused: a batch whose members are not in
// their numbered places is damage, not a batch.
func TestBatchMembersOutOfPlaceRefused(t *testing.T) {
	path, _ := sessionWith(t, 1)
	var b []byte
	for _, r := range []struct {
		rec   Record
		index int
	}{{EntryRecord(Entry{ID: "b1", Type: EntryUser, Text: "x"}), 0}, {UsageRecord(Usage{Input: 1}), 2}, {UsageRecord(Usage{Input: 2}), 1}} {
		var err error
		if b, err = appendRecord(b, r.rec, r.index, 3); err != nil {
			t.Fatal(err)
		}
	}
	appendRaw(t, path, append(b, `{"kind":"usage","input":3}`+"\n"...))
	var ce *CorruptError
	if s, err := Inspect(path); !errors.As(err, &ce) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Inspect = %v, want a CorruptError", err)
	}
}

// TestWriterReportsNoTornTail: a writable session repaired its torn tail,
// so it reports none.
func TestWriterReportsNoTornTail(t *testing.T) {
	path, _ := sessionWith(t, 1)
	appendRaw(t, path, []byte(`{"kind":"entry","id":"half`))
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if n := w.TornBytes(); n != 0 {
		t.Errorf("TornBytes = %d after Open repaired the tail", n)
	}
}

// TestEntryLinksMustMatchTheIndex: an entry line whose id or parent is
// given twice (the scanner reads the first, the decoder the last) is
// refused when it is typed, at open or when a reader folds it in.
func TestEntryLinksMustMatchTheIndex(t *testing.T) {
	t.Run("id", func(t *testing.T) {
		path, ids := sessionWith(t, 2)
		appendRaw(t, path, []byte(`{"kind":"entry","id":"dup","parent":"`+ids[1]+`","type":"user","text":"x","id":"other"}`+"\n"+`{"kind":"usage","input":1}`+"\n"))
		var ce *CorruptError
		if s, err := Inspect(path); !errors.As(err, &ce) || ce.Line != 4 {
			if err == nil {
				s.Close()
			}
			t.Fatalf("Inspect = %v, want a CorruptError at line 4", err)
		}
	})
	t.Run("parent", func(t *testing.T) {
		path, ids := sessionWith(t, 2)
		r, err := Inspect(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		appendRaw(t, path, []byte(`{"kind":"entry","id":"dup","parent":"`+ids[1]+`","type":"user","text":"x","parent":"`+ids[0]+`"}`+"\n"+`{"kind":"usage","input":1}`+"\n"))
		var ce *CorruptError
		if _, err := r.Refresh(); !errors.As(err, &ce) {
			t.Fatalf("Refresh = %v (branch %v), want a CorruptError", err, branchIDs(r.Branch()))
		}
	})
}

// TestDispatchRecordsNeedIDs: a dispatch or settlement without an id is
// refused on append, and a dispatch line without one in the file is
// damage.
func TestDispatchRecordsNeedIDs(t *testing.T) {
	s := newSession(t)
	before := readFile(t, s.Path())
	for name, r := range map[string]Record{"dispatch": DispatchRecord(Dispatch{RunID: "r"}), "settlement": SettledRecord(DispatchSettled{RunID: "r", Outcome: SettledFailed})} {
		if err := s.Append(r); err == nil {
			t.Errorf("%s without an id appended", name)
		}
	}
	if !bytes.Equal(readFile(t, s.Path()), before) {
		t.Error("a refused record reached the file")
	}
	s.Close()
	path, _ := sessionWith(t, 1)
	appendRaw(t, path, []byte(`{"kind":"dispatch","run_id":"r"}`+"\n"+`{"kind":"usage","input":1}`+"\n"))
	var ce *CorruptError
	if r, err := Inspect(path); !errors.As(err, &ce) {
		if err == nil {
			r.Close()
		}
		t.Fatalf("Inspect of a dispatch line without id = %v, want a CorruptError", err)
	}
}

// TestUnsettledDispatchesOfOthers: dispatches other writers left
// unsettled are found in file order, never this writer's own in-flight
// one; a writable open settles them "uncertain" durably, or fails.
func TestUnsettledDispatchesOfOthers(t *testing.T) {
	raw := func(id, run string) []byte {
		return []byte(`{"kind":"dispatch","id":"` + id + `","run_id":"` + run + `","operation":"","model":"m","attempt":0}` + "\n")
	}
	t.Run("duplicate id is damage", func(t *testing.T) {
		path, _ := sessionWith(t, 1)
		appendRaw(t, path, append(append(raw("d1", "r1"), raw("d1", "r2")...), `{"kind":"usage","input":1}`+"\n"...))
		var ce *CorruptError
		if r, err := Inspect(path); !errors.As(err, &ce) {
			if err == nil {
				r.Close()
			}
			t.Fatalf("Inspect = %v, want a CorruptError", err)
		}
	})
	t.Run("file order, not own", func(t *testing.T) {
		path, _ := sessionWith(t, 1)
		w, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.Append(DispatchRecord(Dispatch{ID: "own", RunID: "rA"})); err != nil {
			t.Fatal(err)
		}
		appendRaw(t, path, append(raw("d1", "r1"), raw("d2", "r2")...))
		if _, err := w.Refresh(); err != nil {
			t.Fatal(err)
		}
		if tot := w.Totals(); tot.UnsettledDispatches != 2 || !tot.Uncertain || tot.Cause.RunID != "r1" {
			t.Fatalf("totals %+v; want the two foreign dispatches, the cause the first in the file", tot)
		}
	})
	t.Run("settled uncertain on open", func(t *testing.T) {
		path, _ := sessionWith(t, 1)
		appendRaw(t, path, raw("d1", "r1"))
		w, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		if got := string(readFile(t, path)); !strings.Contains(got, `"id":"d1","run_id":"r1","outcome":"uncertain"}`) {
			t.Fatalf("no uncertain settlement of d1 in:\n%s", got)
		}
	})
	t.Run("settlement unwritable", func(t *testing.T) {
		path, _ := sessionWith(t, 1)
		appendRaw(t, path, raw("d1", "r1"))
		orig := syncData
		t.Cleanup(func() { syncData = orig })
		syncData = func(*os.File) error { return errors.New("EIO") }
		if w, err := Open(path); err == nil {
			w.Close()
			t.Fatal("Open succeeded without recording the unsettled dispatch")
		}
	})
}

// TestDispatchLogRecordsRoundTrip: every field of the dispatch-log and
// recovered-output records survives encoding and decoding.
func TestDispatchLogRecordsRoundTrip(t *testing.T) {
	for _, r := range []Record{
		DispatchRecord(Dispatch{ID: "d", RunID: "r", Operation: "compaction", Model: "m", Attempt: 3}),
		SettledRecord(DispatchSettled{ID: "d", RunID: "r", Outcome: SettledNoUsage}),
		RecoveredRecord(RecoveredOutput{RunID: "r", Channel: "text", Text: "partial", Attempt: 2}),
	} {
		line, err := appendRecord(nil, r, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		var a strAlloc
		got, err := decodeRecord(bytes.TrimSuffix(line, []byte("\n")), &a)
		if err != nil {
			t.Fatalf("decode %s: %v", line, err)
		}
		if fmt.Sprint(got.Dispatch, got.Settled, got.Recovered) != fmt.Sprint(r.Dispatch, r.Settled, r.Recovered) {
			t.Errorf("round trip of %s: %+v %+v %+v", line, got.Dispatch, got.Settled, got.Recovered)
		}
	}
}

// TestUncertaintyCauseIsTheFirst: an unsettled dispatch found later does
// not replace the reason usage first became uncertain.
func TestUncertaintyCauseIsTheFirst(t *testing.T) {
	s := newSession(t)
	if err := s.Append(UncertainRecord(UsageUncertain{RunID: "r0", Reason: "cancelled_after_dispatch", Dispatched: true})); err != nil {
		t.Fatal(err)
	}
	s.Close()
	appendRaw(t, s.Path(), []byte(`{"kind":"dispatch","id":"d1","run_id":"r1","operation":"","model":"m","attempt":0}`+"\n"))
	r, err := Inspect(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if c := r.Totals().Cause; c.Reason != "cancelled_after_dispatch" || c.RunID != "r0" {
		t.Fatalf("cause %+v, want the first marker's", c)
	}
}
