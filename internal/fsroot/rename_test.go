//go:build unix

package fsroot

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRenameNoReplace runs the exclusive commit rename natively and with
// the link+unlink fallback (selected explicitly): an existing target is
// EEXIST and untouched, an absent one receives the temporary, which is
// gone afterwards.
func TestRenameNoReplace(t *testing.T) {
	for _, forced := range []bool{false, true} {
		t.Run(map[bool]string{false: "native", true: "link+unlink"}[forced], func(t *testing.T) {
			old := forceLinkRename
			forceLinkRename = forced
			t.Cleanup(func() { forceLinkRename = old })
			dir := t.TempDir()
			for name, data := range map[string]string{"tmp": "new", "target": "old"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			pfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(pfd)
			if err := renameNoReplace(pfd, "tmp", "target"); !errors.Is(err, unix.EEXIST) {
				t.Fatalf("over an existing target: %v, want EEXIST", err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "target")); string(b) != "old" {
				t.Fatalf("target replaced: %q", b)
			}
			if err := renameNoReplace(pfd, "tmp", "fresh"); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "fresh")); string(b) != "new" {
				t.Fatalf("fresh = %q", b)
			}
			if _, err := os.Lstat(filepath.Join(dir, "tmp")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("temporary left behind: %v", err)
			}
		})
	}
}
