package session

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// readListing decodes the listing cache of the session at path, checking
// that it is a valid cache file of mode 0600.
func readListing(t *testing.T, path string) listing {
	t.Helper()
	p := listingPath(path)
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode() != 0o600 {
		t.Fatalf("listing cache %s: %v, %v (want a regular file, mode 0600)", p, fi, err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := decodeListing(b)
	if !ok {
		t.Fatalf("listing cache %q does not decode", b)
	}
	return l
}

// listedUncertainty returns List's UsageUncertain for the session at path.
func listedUncertainty(t *testing.T, path string) bool {
	t.Helper()
	infos, err := List(filepath.Dir(path))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, in := range infos {
		if in.Path == path {
			return in.UsageUncertain
		}
	}
	t.Fatalf("List does not show %s (%+v)", path, infos)
	return false
}

var marker = UncertainRecord(UsageUncertain{RunID: "r", Operation: "main", Reason: "cancelled_after_dispatch", Dispatched: true})

// TestUncertaintySurvivesBlockedCache: the cache's path is taken by a
// directory (so is the older marker file's), which fails for root too.
// Appends and Open succeed, List reads the ledger, and once the obstacle
// is gone the writer rebuilds the cache (at the latest on Close).
func TestUncertaintySurvivesBlockedCache(t *testing.T) {
	s := newSession(t)
	mustAppend(t, s, Entry{Type: EntryUser, Text: "a"})
	for _, p := range []string{listingPath(s.Path()), legacySidecarPath(s.Path())} {
		os.Remove(p)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Append(marker); err != nil {
		t.Fatalf("the marker did not reach the ledger: %v", err)
	}
	s.Close()
	// The legacy marker path is a directory, which List would take as
	// "uncertain"; leave only the cache blocked for List's check.
	os.Remove(legacySidecarPath(s.Path()))
	if !listedUncertainty(t, s.Path()) {
		t.Fatal("List lost the uncertainty the ledger holds")
	}
	w, err := Open(s.Path())
	if err != nil {
		t.Fatalf("Open with a blocked cache: %v", err)
	}
	if !w.Totals().Uncertain {
		t.Fatal("totals not uncertain")
	}
	if err := os.Remove(listingPath(s.Path())); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, w, Entry{Type: EntryUser, Text: "b"})
	w.Close()
	if l := readListing(t, s.Path()); !l.uncertain || l.size != w.Size() {
		t.Fatalf("cache after the obstacle went: %+v", l)
	}
}

// TestListReadsOnlyWhatTheCacheDoesNotCover: a cache that vouches for the
// whole file decides alone; one that covers a prefix is completed from the
// ledger; a cache of another file (inode) or a damaged one is ignored.
func TestListReadsOnlyWhatTheCacheDoesNotCover(t *testing.T) {
	s := newSession(t)
	mustAppend(t, s, Entry{Type: EntryUser, Text: "a"})
	clean := s.Size()
	if err := s.Append(marker); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ino := readListing(t, s.Path()).ino
	cases := []struct {
		name string
		l    []byte
		want bool
	}{
		{"current", listing{ino: ino, size: s.Size(), uncertain: true}.encode(), true},
		{"prefix", listing{ino: ino, size: clean}.encode(), true},
		// A clean cache for the whole file is believed: List reads
		// nothing after it.
		{"whole file clean", listing{ino: ino, size: s.Size()}.encode(), false},
		{"other inode", listing{ino: ino + 1, size: s.Size()}.encode(), true},
		{"longer than the file", listing{ino: ino, size: s.Size() + 1}.encode(), true},
		{"damaged", append(listing{ino: ino, size: s.Size()}.encode()[:listingLen-2], 'x', '\n'), true},
		{"empty", nil, true},
	}
	for _, c := range cases {
		if err := os.WriteFile(listingPath(s.Path()), c.l, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := listedUncertainty(t, s.Path()); got != c.want {
			t.Errorf("%s: listed uncertain %v, want %v", c.name, got, c.want)
		}
	}
}

// TestListingCacheFollowsLiveWriter: Create writes no cache; a writable
// Open does, and it is rewritten when the session becomes uncertain and
// once listingEvery bytes were appended, so List never reads more than
// that of a live session.
func TestListingCacheFollowsLiveWriter(t *testing.T) {
	var err error
	s := newSession(t)
	defer func() { s.Close() }()
	if _, err := os.Lstat(listingPath(s.Path())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Create wrote a listing cache (%v); a header-only file needs none", err)
	}
	if listedUncertainty(t, s.Path()) {
		t.Fatal("a new session listed uncertain")
	}
	mustAppend(t, s, Entry{Type: EntryUser, Text: "a"})
	s.Close()
	if s, err = Open(s.Path()); err != nil {
		t.Fatal(err)
	}
	start := readListing(t, s.Path())
	if start.size != s.Size() || start.uncertain {
		t.Fatalf("cache after Open %+v, want clean at %d", start, s.Size())
	}
	big := Entry{Type: EntryUser, Text: string(make([]byte, listingEvery/4))}
	for s.Size()-start.size < listingEvery {
		if got := readListing(t, s.Path()); got != start {
			t.Fatalf("cache rewritten after %d bytes: %+v", s.Size()-start.size, got)
		}
		mustAppend(t, s, big)
	}
	if got := readListing(t, s.Path()); got.size != s.Size() {
		t.Fatalf("cache %+v not rewritten after %d bytes", got, s.Size()-start.size)
	}
	if err := s.Append(marker); err != nil {
		t.Fatal(err)
	}
	if got := readListing(t, s.Path()); !got.uncertain || got.size != s.Size() {
		t.Fatalf("cache %+v not rewritten when the session became uncertain", got)
	}
}

// listedInfo returns List's Info for the session at path.
func listedInfo(t *testing.T, path string) Info {
	t.Helper()
	infos, err := List(filepath.Dir(path))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, in := range infos {
		if in.Path == path {
			return in
		}
	}
	t.Fatalf("List does not show %s (%+v)", path, infos)
	return Info{}
}

// TestListSumsUsageThroughTheCache: List's usage is Totals' (own and
// delegated), taken from the cache for the prefix it covers and from the
// ledger after it, so listing costs no full read of a long session.
func TestListSumsUsageThroughTheCache(t *testing.T) {
	s := newSession(t)
	u := Usage{RunID: "r", Operation: "main", Model: "m", Input: 10, CachedInput: 4, Output: 3, Reasoning: 1, CostPicodollars: 7}
	if err := s.Append(UsageRecord(u), UsageRecord(u)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	w, err := Open(s.Path()) // writes the cache for the two records
	if err != nil {
		t.Fatal(err)
	}
	covered := readListing(t, s.Path())
	if err := w.Append(DelegatedRecord(DelegatedUsage{ChildSession: "c", Usage: u})); err != nil {
		t.Fatal(err)
	}
	want := w.Totals()
	path := w.Path()
	w.Close()
	if err := os.WriteFile(listingPath(path), covered.encode(), 0o600); err != nil {
		t.Fatal(err)
	}
	in := listedInfo(t, path)
	if in.UsageRecords != want.Requests+want.DelegatedRecords || in.Known != want.Known || in.UsageRecords != 3 {
		t.Fatalf("List: %d records, known %+v; Totals: %d+%d, known %+v", in.UsageRecords, in.Known, want.Requests, want.DelegatedRecords, want.Known)
	}
	// The cache is believed for its prefix: a cache claiming more usage
	// there shows in the listing, so List did not re-read those records.
	forged := covered
	forged.records, forged.known.Input = 100, 1000
	if err := os.WriteFile(listingPath(path), forged.encode(), 0o600); err != nil {
		t.Fatal(err)
	}
	if in := listedInfo(t, path); in.UsageRecords != 101 || in.Known.Input != 1010 {
		t.Fatalf("List with a prefix cache: %d records, input %d; want the cache's 100/1000 plus the tail's 1/10", in.UsageRecords, in.Known.Input)
	}
}

// TestListSeesUnsettledDispatch: a dispatch no record settles makes the
// listing uncertain at once, as it makes a reader's totals (sessions
// show), whether its writer died or is streaming the request now; the
// settlement makes it known again, also when the dispatch is in the
// prefix the cache covers and the settlement after it. A settlement in a
// torn final batch settles nothing.
func TestListSeesUnsettledDispatch(t *testing.T) {
	s := newSession(t)
	mustAppend(t, s, Entry{Type: EntryUser, Text: "hi"})
	s.Close()
	w, err := Open(s.Path()) // the cache now covers the file
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	path := w.Path()
	agree := func(step string, want bool) {
		t.Helper()
		ro, err := Inspect(path)
		if err != nil {
			t.Fatal(err)
		}
		shown := ro.Totals().Uncertain
		ro.Close()
		var lister Lister
		defer lister.Close()
		infos, err := lister.List(filepath.Dir(path))
		if err != nil || len(infos) != 1 {
			t.Fatalf("%s: Lister: %v, %+v", step, err, infos)
		}
		if listed := listedUncertainty(t, path); listed != want || shown != want || infos[0].UsageUncertain != want {
			t.Fatalf("%s: List says uncertain %v, Lister %v, Inspect's totals %v; want %v", step, listed, infos[0].UsageUncertain, shown, want)
		}
	}
	agree("no request", false)

	d := Dispatch{ID: NewID(), RunID: "r1", Operation: "main", Model: "m"}
	if err := w.Append(DispatchRecord(d)); err != nil {
		t.Fatal(err)
	}
	agree("request in flight", true)
	dispatchAt := w.Size() - int64(len(mustEncode(t, DispatchRecord(d))))
	// A cache written while the request is in flight names it.
	w.mu.Lock()
	w.writeListing()
	w.mu.Unlock()
	if l := readListing(t, path); l.pendingOff != dispatchAt || l.size != w.Size() {
		t.Fatalf("cache %+v, want the pending dispatch at %d", l, dispatchAt)
	}
	agree("cache written in flight", true)

	settle := []Record{UsageRecord(Usage{RunID: "r1", Input: 3, Output: 4}), SettledRecord(DispatchSettled{ID: d.ID, RunID: "r1", Outcome: SettledUsage})}
	if err := w.Append(settle...); err != nil {
		t.Fatal(err)
	}
	agree("settled after the cache's prefix", false)

	// A second request whose settlement batch is torn.
	d2 := Dispatch{ID: NewID(), RunID: "r2", Operation: "main", Model: "m"}
	if err := w.Append(DispatchRecord(d2)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	torn, _ := appendRecord(nil, UsageRecord(Usage{RunID: "r2", Input: 1}), 0, 3)
	torn, _ = appendRecord(torn, SettledRecord(DispatchSettled{ID: d2.ID, RunID: "r2", Outcome: SettledUsage}), 1, 3)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()
	agree("settlement in a torn batch", true)
}

func mustEncode(t *testing.T, r Record) []byte {
	t.Helper()
	b, err := appendRecord(nil, r, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
