package session

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestCreateFromChain: a session can be created already holding a chain
// of entries (a fork), whole or not at all, with its origin in the
// header; only the entries are written.
func TestCreateFromChain(t *testing.T) {
	src := newSession(t)
	u := mustAppend(t, src, Entry{Type: EntryUser, Text: "one"})
	if err := src.Append(EntryRecord(sampleAssistant()), UsageRecord(Usage{RunID: "r", Model: "m", Input: 5})); err != nil {
		t.Fatal(err)
	}
	branch := src.Branch()
	dir := filepath.Dir(src.Path())
	f, err := CreateFrom(dir, Header{Cwd: "/w", Title: "copy", ForkOf: src.Header().ID, ForkEntry: branch[1].ID}, branch)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if h := f.Header(); h.ForkOf != src.Header().ID || h.ForkEntry != branch[1].ID || h.Title != "copy" {
		t.Errorf("fork header %+v", h)
	}
	got := f.Branch()
	if len(got) != 2 || got[0].ID != u.ID || got[1].ID != branch[1].ID || got[1].Items[0].EncryptedContent != branch[1].Items[0].EncryptedContent {
		t.Errorf("fork branch %+v", got)
	}
	if tot := f.Totals(); tot.Requests != 0 {
		t.Errorf("fork copied usage: %+v", tot)
	}
	r, err := Inspect(f.Path())
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Header(); h.ForkOf != src.Header().ID {
		t.Errorf("reopened fork header %+v", h)
	}
	r.Close()

	// Not a chain: refused, nothing written.
	before, _ := os.ReadDir(dir)
	if _, err := CreateFrom(dir, Header{}, []Entry{branch[1]}); err == nil {
		t.Error("a chain not starting at a root was accepted")
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("a refused CreateFrom left files: %d → %d", len(before), len(after))
	}
}

// TestRemove deletes the file with its listing cache.
func TestRemove(t *testing.T) {
	s := newSession(t)
	mustAppend(t, s, Entry{Type: EntryUser, Text: "x"})
	path := s.Path()
	s.Close()
	w, err := Open(path) // writes the listing cache
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := os.Stat(listingPath(path)); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, listingPath(path)} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after Remove: %v", p, err)
		}
	}
	if err := Remove(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove of a removed session: %v", err)
	}
}
