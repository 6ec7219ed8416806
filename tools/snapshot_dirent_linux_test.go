package tools

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDirentUnknownType checks that an entry whose file system gives no
// type (DT_UNKNOWN) is lstat-ed for it: a file, a directory, a symbolic
// link to a directory (not followed) and a name gone since the listing.
func TestDirentUnknownType(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name string
		typ  fs.FileMode
		ok   bool
	}{{"f", 0, true}, {"d", fs.ModeDir, true}, {"l", fs.ModeIrregular, true}, {"gone", 0, false}} {
		typ, ok := direntMode(f, c.name, unix.DT_UNKNOWN)
		if typ != c.typ || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", c.name, typ, ok, c.typ, c.ok)
		}
	}
}
