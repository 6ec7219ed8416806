//go:build linux && (amd64 || arm64 || riscv64)

package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLstatAt checks the stack-copied newfstatat against unix.Fstatat:
// the same result for a file, a directory and a symbolic link (not
// followed), the same error for a missing name, a name too long and a
// name holding a NUL.
func TestLstatAt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("data"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("y", 255)
	if err := os.WriteFile(filepath.Join(dir, long), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, name := range []string{"f", "d", "l", long, "missing", strings.Repeat("z", 256), strings.Repeat("z", 300), "f\x00d", ""} {
		var got, want unix.Stat_t
		gotErr := lstatAt(fd, name, &got)
		wantErr := unix.Fstatat(fd, name, &want, unix.AT_SYMLINK_NOFOLLOW)
		if gotErr != wantErr || got != want {
			t.Errorf("%.20q: lstatAt = %v %+v, want %v %+v", name, gotErr, got, wantErr, want)
		}
	}
}
