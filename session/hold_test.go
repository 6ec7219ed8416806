package session

import (
	"errors"
	"os"
	"slices"
	"testing"
)

// TestRemoveRefusesOpenSession: a session a writer has open is not
// removed (an *InUseError, whichever open file descriptions hold it); a
// reader does not keep it; once closed it goes with all its files.
func TestRemoveRefusesOpenSession(t *testing.T) {
	t.Run("range lock", testRemoveRefusesOpenSession)
	t.Run("holder file", func(t *testing.T) {
		defer func(f func(*os.File) bool) { rangeLockable = f }(rangeLockable)
		rangeLockable = func(*os.File) bool { return false }
		testRemoveRefusesOpenSession(t)
	})
}

func testRemoveRefusesOpenSession(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, Header{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, Entry{Type: EntryUser, Text: "a"})
	path := s.Path()
	if err := Remove(path); !errors.As(err, new(*InUseError)) {
		t.Fatalf("Remove of an open session = %v, want an InUseError", err)
	}
	s.Close()
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); !errors.As(err, new(*InUseError)) {
		t.Fatalf("Remove of a reopened session = %v, want an InUseError", err)
	}
	w.Close()
	r, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := Remove(path); err != nil {
		t.Fatalf("Remove beside a reader: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("Remove left %v", left)
	}
	if _, err := Open(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open after Remove = %v", err)
	}
}

// TestEntryIDs: every entry of the tree, on every branch, in append order,
// random-hex and other ids alike.
func TestEntryIDs(t *testing.T) {
	s, err := Create(t.TempDir(), Header{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := mustAppend(t, s, Entry{Type: EntryUser, Text: "a"})
	b := mustAppend(t, s, Entry{Type: EntryUser, Text: "b", Parent: a.ID})
	if err := s.SetHead(a.ID); err != nil {
		t.Fatal(err)
	}
	c := mustAppend(t, s, Entry{ID: "custom-id", Type: EntryUser, Text: "c", Parent: a.ID})
	got := s.EntryIDs()
	if want := []string{a.ID, b.ID, c.ID}; !slices.Equal(got, want) {
		t.Errorf("EntryIDs = %v, want %v", got, want)
	}
}
