//go:build unix

package osfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// renamers runs fn with the platform's exclusive rename and with the
// link+unlink fallback (the path macOS and Linux take on file systems
// without renameat2/renamex_np), selected explicitly.
func renamers(t *testing.T, fn func(t *testing.T)) {
	for _, forced := range []bool{false, true} {
		name := "native"
		if forced {
			name = "link+unlink"
		}
		t.Run(name, func(t *testing.T) {
			old := forceLinkUnlink
			forceLinkUnlink = forced
			t.Cleanup(func() { forceLinkUnlink = old })
			fn(t)
		})
	}
}

func TestRenameNoReplace(t *testing.T) {
	renamers(t, func(t *testing.T) {
		dir := t.TempDir()
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		write(t, src, "new")
		write(t, dst, "old")
		err := RenameNoReplace(src, dst)
		if !errors.Is(err, fs.ErrExist) {
			t.Fatalf("rename over an existing file: %v, want fs.ErrExist", err)
		}
		if got := read(t, dst); got != "old" {
			t.Fatalf("target replaced: %q", got)
		}
		if got := read(t, src); got != "new" {
			t.Fatalf("source lost: %q", got)
		}
		if err := os.Remove(dst); err != nil {
			t.Fatal(err)
		}
		if err := RenameNoReplace(src, dst); err != nil {
			t.Fatalf("rename to a free name: %v", err)
		}
		if got := read(t, dst); got != "new" {
			t.Fatalf("target %q, want new", got)
		}
		if _, err := os.Lstat(src); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("source still there: %v", err)
		}
		var le *os.LinkError
		if err := RenameNoReplace(src, dst); !errors.As(err, &le) || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("rename of a missing source: %v, want an *os.LinkError for ErrNotExist", err)
		}
	})
}

// TestTryLock: TryLock refuses at once, without an error, a lock that
// conflicts with one held through another open file, and takes it once
// that is released.
func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	write(t, path, "x")
	a, b := open(t, path), open(t, path)
	if err := Lock(a, false); err != nil {
		t.Fatal(err)
	}
	if ok, err := TryLock(b, false); !ok || err != nil {
		t.Fatalf("shared beside shared: %v %v", ok, err)
	}
	Unlock(b)
	if ok, err := TryLock(b, true); ok || err != nil {
		t.Fatalf("exclusive beside shared: %v %v", ok, err)
	}
	Unlock(a)
	if ok, err := TryLock(b, true); !ok || err != nil {
		t.Fatalf("exclusive alone: %v %v", ok, err)
	}
	if ok, err := TryLock(a, false); ok || err != nil {
		t.Fatalf("shared beside exclusive: %v %v", ok, err)
	}
}

// TestLockExcludes: an exclusive lock excludes a second exclusive and a
// shared lock taken through another open file description; shared locks
// coexist.
func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	write(t, path, "x")
	a, b := open(t, path), open(t, path)
	if err := Lock(a, false); err != nil {
		t.Fatal(err)
	}
	if err := Lock(b, false); err != nil {
		t.Fatalf("second shared lock: %v", err)
	}
	if err := Unlock(b); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- Lock(b, true) }()
	select {
	case err := <-got:
		t.Fatalf("exclusive lock granted beside a shared one (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := Unlock(a); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("exclusive lock not granted after the shared one was released")
	}
	if err := Unlock(b); err != nil {
		t.Fatal(err)
	}
}

func TestSyncAndSyncDir(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("data"); err != nil {
		t.Fatal(err)
	}
	if err := Sync(f); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatalf("SyncDir: %v", err)
	}
	f.Close()
	if err := Sync(f); err == nil {
		t.Fatal("Sync of a closed file succeeded")
	}
}

func TestOpenNoFollow(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	write(t, target, "secret")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenNoFollow(link, os.O_RDONLY, 0); !errors.Is(err, ErrSymlink) {
		t.Fatalf("open of a link: %v, want ErrSymlink", err)
	}
	if _, err := OpenNoFollow(link, os.O_WRONLY|os.O_CREATE, 0o600); !errors.Is(err, ErrSymlink) {
		t.Fatalf("create through a link: %v, want ErrSymlink", err)
	}
	f, err := OpenNoFollow(target, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, err := FileID(f)
	if err != nil || id == 0 {
		t.Fatalf("FileID = %d, %v", id, err)
	}
	g := open(t, target)
	if id2, _ := FileID(g); id2 != id {
		t.Fatalf("FileID differs for the same file: %d vs %d", id, id2)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
