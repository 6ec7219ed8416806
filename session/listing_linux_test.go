package session

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUncertaintySurvivesUnwritableSessionsDir: the sessions directory is
// read-only while the session file is writable (a read-only bind mount of
// the directory with the file bind-mounted writable over it, which denies
// even root). The marker still reaches the ledger, Open still opens the
// file, and List reads the uncertainty from the ledger; once the file is
// back in a writable directory whose cache is stale, List still says so
// and a writable Open rebuilds the cache.
func TestUncertaintySurvivesUnwritableSessionsDir(t *testing.T) {
	home := t.TempDir()
	s, err := Create(home, Header{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, Entry{Type: EntryUser, Text: "a"})
	real := s.Path()
	s.Close()

	ro := t.TempDir()
	path := filepath.Join(ro, filepath.Base(real))
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(ro, ro, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mounts need CAP_SYS_ADMIN (root in CI): %v", err)
	}
	mounted := []string{ro}
	t.Cleanup(func() {
		for i := len(mounted) - 1; i >= 0; i-- {
			if err := unix.Unmount(mounted[i], unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", mounted[i], err)
			}
		}
	})
	if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	if err := unix.Mount(real, path, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind the session file: %v", err)
	}
	mounted = append(mounted, path)
	if err := os.WriteFile(filepath.Join(ro, "probe"), nil, 0o600); !errors.Is(err, unix.EROFS) {
		t.Fatalf("the sessions directory is writable (%v); the test needs it read-only", err)
	}

	w, err := Open(path)
	if err != nil {
		t.Fatalf("Open with an unwritable sessions directory: %v", err)
	}
	if err := w.Append(marker); err != nil {
		t.Fatalf("the marker did not reach the ledger: %v", err)
	}
	if !w.Totals().Uncertain {
		t.Fatal("totals not uncertain after the marker")
	}
	w.Close()
	if !listedUncertainty(t, path) {
		t.Fatal("List lost the uncertainty the ledger holds")
	}
	r, err := Open(path) // a writer reopening it (resume)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if !r.Totals().Uncertain {
		t.Fatal("reopened totals not uncertain")
	}
	r.Close()

	// The file back where it was: its cache is from before the marker.
	for i := len(mounted) - 1; i >= 0; i-- {
		if err := unix.Unmount(mounted[i], 0); err != nil {
			t.Fatal(err)
		}
	}
	mounted = nil
	if l := readListing(t, real); l.uncertain {
		t.Fatalf("cache %+v already uncertain; the test needs a stale one", l)
	}
	if !listedUncertainty(t, real) {
		t.Fatal("List trusted a stale cache over the ledger")
	}
	if w, err = Open(real); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if l := readListing(t, real); !l.uncertain {
		t.Fatalf("writable Open did not rebuild the cache: %+v", l)
	}
}
