package tools

import (
	"fmt"
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

// TestDirListerSmallBuffer lists a directory through a buffer that holds
// one or two entries a call: a call that returns only "." and ".." is
// not the end of the listing (a regression: every name was lost when the
// file system returned them alone first: tmpfs lists them first, ext4
// where their hashes fall).
func TestDirListerSmallBuffer(t *testing.T) {
	var fsst unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &fsst); err != nil || fsst.Type != unix.TMPFS_MAGIC {
		t.Skip("no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "octet-dirlister-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for i := range 50 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ents, _ := listAll(t, &dirLister{buf: make([]byte, 48)}, dir) // "." and ".." (24 bytes each), or one name
	seen := map[string]bool{}
	for _, e := range ents {
		seen[e.name] = true
	}
	if len(seen) != 50 {
		t.Errorf("listed %d names, want 50", len(seen))
	}
}
