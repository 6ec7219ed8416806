package session

import (
	"os"
	"testing"
)

// TestTitleRecordRenames: a session could not be renamed (the title was
// only in the header, which an append-only ledger never rewrites). A
// title record renames it: Title, a reopened session and List (through
// the listing cache, past it, and without it) all show the new title;
// the header is unchanged.
func TestTitleRecordRenames(t *testing.T) {
	s := newSession(t)
	path := s.Path()
	hdrTitle := s.Header().Title
	if err := s.SetTitle("first \"name\""); err != nil {
		t.Fatal(err)
	}
	if got := s.Title(); got != "first \"name\"" {
		t.Fatalf("Title after SetTitle = %q", got)
	}
	if got := listedInfo(t, path).Title; got != "first \"name\"" {
		t.Fatalf("List (no cache) title = %q", got)
	}
	s.Close() // writes the cache, naming the title record
	if l := readListing(t, path); l.titleOff == 0 {
		t.Fatalf("listing cache %+v names no title record", l)
	}
	if got := listedInfo(t, path).Title; got != "first \"name\"" {
		t.Fatalf("List (through the cache) title = %q", got)
	}
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, h := w.Title(), w.Header().Title; got != "first \"name\"" || h != hdrTitle {
		t.Fatalf("reopened: Title %q, header title %q (want %q)", got, h, hdrTitle)
	}
	if err := w.SetTitle("second"); err != nil {
		t.Fatal(err)
	}
	if got := listedInfo(t, path).Title; got != "second" {
		t.Fatalf("List (cache, then the tail) title = %q", got)
	}
	w.Close()
	if err := os.Remove(listingPath(path)); err != nil {
		t.Fatal(err)
	}
	if got := listedInfo(t, path).Title; got != "second" {
		t.Fatalf("List (cache removed) title = %q", got)
	}
	// A cache that points at something else is not believed.
	r, err := Open(path) // rebuilds the cache
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Append(TitleRecord("")); err == nil {
		t.Error("an empty title record was appended")
	}
	r.Close()
	l := readListing(t, path)
	l.titleOff = 1
	if err := os.WriteFile(listingPath(path), l.encode(), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := listedInfo(t, path).Title; got != "second" {
		t.Fatalf("List (cache names a wrong offset) title = %q", got)
	}
}
