//go:build unix

package session

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCreateInFollowsNoSwappedDirectory: a session directory held open as
// an os.Root and then replaced by a link to another directory: CreateIn
// creates the file, its appends and its listing cache in the directory
// that was opened, and RemoveIn removes them there; nothing reaches the
// link's target.
func TestCreateInFollowsNoSwappedDirectory(t *testing.T) {
	base, outside := t.TempDir(), t.TempDir()
	dir := filepath.Join(base, "team")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	moved := filepath.Join(base, "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	s, err := CreateIn(root, dir, Header{Cwd: "/w", Title: "child"})
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(s.Path())
	if s.Path() != filepath.Join(dir, name) {
		t.Errorf("Path() = %s, want it in %s", s.Path(), dir)
	}
	mustAppend(t, s, Entry{Type: EntryUser, Text: "hi"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, outside); len(got) != 0 {
		t.Fatalf("the link's target got %v", got)
	}
	want := []string{name, listingPath(name)}
	slices.Sort(want)
	if got := entries(t, moved); !slices.Equal(got, want) {
		t.Fatalf("the opened directory holds %v, want %v", got, want)
	}
	// A file of the same name at the link's target is not removed.
	if err := os.WriteFile(filepath.Join(outside, name), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemoveIn(root, name); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, moved); len(got) != 0 {
		t.Errorf("RemoveIn left %v", got)
	}
	if got := entries(t, outside); len(got) != 1 {
		t.Errorf("the link's target holds %v, want only the file put there", got)
	}
}

// entries lists dir's names, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}
