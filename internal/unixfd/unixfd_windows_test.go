package unixfd

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/octet-agent/octet/internal/winat"
	"golang.org/x/sys/windows"
)

// TestWindowsHandles: the search walker's calls work on handles: a
// directory opened relative to its parent lists and opens its files, a
// file is S_IFREG with its size and reads to the end, a file opened as a
// directory is ENOTDIR, and a name that is not one component is refused.
func TestWindowsHandles(t *testing.T) {
	dir, err := os.MkdirTemp("", "unixfd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(filepath.Join(dir, "sub", "f.txt"))
		os.Remove(filepath.Join(dir, "sub"))
		os.Remove(dir)
	})
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	rfd, err := Dup(int(root.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer Close(rfd)
	sub, err := Openat(rfd, "sub", O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(sub)
	var st Stat_t
	if err := Fstat(sub, &st); err != nil || st.Mode&S_IFMT == S_IFREG {
		t.Errorf("Fstat(dir) = %#o, %v", st.Mode, err)
	}
	fd, err := Openat(sub, "f.txt", O_RDONLY|O_NOFOLLOW|O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(fd)
	if err := Fstat(fd, &st); err != nil || st.Mode&S_IFMT != S_IFREG || st.Size != 5 {
		t.Errorf("Fstat(file) = %#o %d, %v", st.Mode, st.Size, err)
	}
	buf := make([]byte, 16)
	n, err := Read(fd, buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Errorf("Read = %q, %v", buf[:n], err)
	}
	if n, err := Read(fd, buf); n != 0 || err != nil {
		t.Errorf("Read at EOF = %d, %v", n, err)
	}
	if _, err := Openat(sub, "f.txt", O_RDONLY|O_DIRECTORY, 0); !errors.Is(err, ENOTDIR) {
		t.Errorf("Openat(file, O_DIRECTORY) = %v, want ENOTDIR", err)
	}
	for _, bad := range []string{`sub\f.txt`, "sub/f.txt", ".."} {
		if h, err := Openat(rfd, bad, O_RDONLY, 0); err == nil {
			Close(h)
			t.Errorf("Openat(%q) opened more than one component", bad)
		}
	}
	if _, _, err := winat.Open(windows.Handle(rfd), "missing", windows.FILE_GENERIC_READ, windows.FILE_OPEN, 0, 0); !os.IsNotExist(err) {
		t.Errorf("winat.Open(missing) = %v, want not-exist", err)
	}
}
