package session

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// sameAsFullScan fails the test unless l's listing of dir equals a full
// scan's, session for session.
func sameAsFullScan(t *testing.T, l *Lister, dir, step string) []Info {
	t.Helper()
	got, gotErr := l.List(dir)
	want, wantErr := List(dir)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%s: Lister error %v, full scan error %v", step, gotErr, wantErr)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: Lister has %d sessions, a full scan %d", step, len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("%s: session %d\nLister    %+v\nfull scan %+v", step, i, got[i], want[i])
		}
	}
	return got
}

// TestListerFeed checks the Linux Lister's change feed: after a first
// scan it reads only what the feed names, and every way a sessions
// directory changes — appends, titles, new and removed files, a legacy
// sidecar, an atomic replace, a symlink, a file that cannot be read yet,
// the kernel's queue overflowing, the directory itself replaced — still
// gives a full scan's result.
func TestListerFeed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	ids := makeSessions(t, dir, 20)
	var l Lister
	defer l.Close()
	sameAsFullScan(t, &l, dir, "first listing")
	if l.feed == nil {
		t.Fatal("no change feed after the first listing on Linux")
	}
	path := func(i int) string { return filepath.Join(dir, ids[i]+".jsonl") }

	s, err := Open(path(3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEntry(Entry{Type: EntryUser, Text: "more"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTitle("renamed by the feed test"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := sameAsFullScan(t, &l, dir, "append and title"); got[0].Title != "renamed by the feed test" {
		t.Fatalf("the appended session is not first: %+v", got[0])
	}

	if err := os.WriteFile(filepath.Join(dir, ids[5]+".uncertain"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sameAsFullScan(t, &l, dir, "sidecar created")
	if err := os.Remove(filepath.Join(dir, ids[5]+".uncertain")); err != nil {
		t.Fatal(err)
	}
	sameAsFullScan(t, &l, dir, "sidecar removed")

	if err := os.Remove(path(7)); err != nil {
		t.Fatal(err)
	}
	fresh, err := Create(dir, Header{Title: "created after the scan", Cwd: "/c"})
	if err != nil {
		t.Fatal(err)
	}
	fresh.Close()
	sameAsFullScan(t, &l, dir, "removed and created")

	// An atomic replace: a new inode under an existing name.
	data, err := os.ReadFile(path(9))
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".replace.tmp")
	if err := os.WriteFile(tmp, append(data, []byte(`{"type":"title","title":"replaced"}`+"\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path(9)); err != nil {
		t.Fatal(err)
	}
	sameAsFullScan(t, &l, dir, "atomic replace")

	// A symlink named like a session is not one; a file whose header is
	// not written yet is an error until it is.
	if err := os.Symlink(path(1), filepath.Join(dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(dir, "20261201-000000-partial.jsonl")
	if err := os.WriteFile(partial, []byte(`{"type":"header"`), 0o600); err != nil {
		t.Fatal(err)
	}
	sameAsFullScan(t, &l, dir, "symlink and partial header")
	if err := os.Remove(partial); err != nil {
		t.Fatal(err)
	}
	sameAsFullScan(t, &l, dir, "partial removed")
	if l.scans != 1 {
		t.Fatalf("%d full scans before the overflow, want the first one only", l.scans)
	}

	// More events than the kernel queues (16,384 by default): the feed
	// is lost, and the Lister scans in full.
	for i := range 17_000 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("noise-%d.tmp", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	s, err = Open(path(11))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetTitle("after the overflow"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := sameAsFullScan(t, &l, dir, "queue overflow"); got[0].Title != "after the overflow" {
		t.Fatalf("the change after the overflow is not listed first: %+v", got[0])
	}
	if l.scans != 2 {
		t.Fatalf("%d full scans after the overflow, want 2", l.scans)
	}

	// The directory replaced by another one.
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	makeSessions(t, dir, 4)
	if got := sameAsFullScan(t, &l, dir, "directory replaced"); len(got) != 4 {
		t.Fatalf("listed %d sessions of the new directory, want 4", len(got))
	}
	if l.feed == nil {
		t.Fatal("no change feed on the new directory")
	}
}
