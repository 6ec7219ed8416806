//go:build unix

package fsroot

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRemove: Remove compares before it unlinks, never removes through a
// symlink or a non-regular file, and an absent file expected absent is a
// success.
func TestRemove(t *testing.T) {
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var ce *ChangedError
	if err := r.Remove("f", PriorOf([]byte("other"))); !errors.As(err, &ce) {
		t.Errorf("remove of a changed file: %v", err)
	}
	if err := r.Remove("link", Prior{Any: true}); !errors.Is(err, ErrSymlink) {
		t.Errorf("remove of a symlink: %v", err)
	}
	var nr *NotRegularError
	if err := r.Remove("d", Prior{Any: true}); !errors.As(err, &nr) {
		t.Errorf("remove of a directory: %v", err)
	}
	if err := r.Remove("f", PriorOf([]byte("data"))); err != nil {
		t.Errorf("remove: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "f")); !os.IsNotExist(err) {
		t.Errorf("f after remove: %v", err)
	}
	if err := r.Remove("f", Absent); err != nil {
		t.Errorf("remove of an absent file expected absent: %v", err)
	}
	if err := r.Remove("missing/f", Absent); err != nil {
		t.Errorf("remove under a missing directory: %v", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the symlink's target was removed: %v", err)
	}
}

// TestWriteMode: WriteOptions.Mode sets the permission bits with the
// content in one commit; zero keeps the replaced file's.
func TestWriteMode(t *testing.T) {
	ws := t.TempDir()
	r, err := Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.WriteFile("x", []byte("a"), Absent, WriteOptions{Mode: 0o751}); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile("x", []byte("b"), PriorOf([]byte("a")), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if m, err := r.Mode("x"); err != nil || m != 0o751 {
		t.Errorf("mode after a write without Mode = %v, %v; want 0751", m, err)
	}
	if err := r.WriteFile("x", []byte("c"), PriorOf([]byte("b")), WriteOptions{Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if m, err := r.Mode("x"); err != nil || m != 0o600 {
		t.Errorf("mode = %v, %v; want 0600", m, err)
	}
}
