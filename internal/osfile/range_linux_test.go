package osfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRangeLock: holder locks of two open files of one file coexist when
// shared and exclude an exclusive one, which succeeds once they are
// closed; an exclusive flock is granted beside them (the two kinds of
// lock are independent).
func TestRangeLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	write(t, path, "x")
	a, b, c := open(t, path), open(t, path), open(t, path)
	if !RangeLockable(a) {
		t.Skip("not a local file system")
	}
	for _, f := range []*os.File{a, b} {
		if ok, err := RangeLock(f, false); !ok || err != nil {
			t.Fatalf("shared: %v %v", ok, err)
		}
	}
	if ok, err := RangeLock(c, true); ok || err != nil {
		t.Fatalf("exclusive beside shared: %v %v", ok, err)
	}
	if ok, err := TryLock(c, true); !ok || err != nil {
		t.Fatalf("flock beside range locks: %v %v", ok, err)
	}
	Unlock(c)
	a.Close()
	b.Close()
	if ok, err := RangeLock(c, true); !ok || err != nil {
		t.Fatalf("exclusive alone: %v %v", ok, err)
	}
}
