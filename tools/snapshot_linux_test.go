package tools

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/octet-agent/octet/changes"
)

// TestSnapshotBindMount: a file system mounted over a workspace directory
// changes what its paths hold without an event; the mount table's change
// makes the next snapshot walk, and it records the difference.
func TestSnapshotBindMount(t *testing.T) {
	requireFeed(t)
	s, ws := newTestSnapshotter(t, false)
	other := t.TempDir()
	put(t, filepath.Join(ws, "sub/mine.txt"), "mine\n")
	put(t, filepath.Join(other, "theirs.txt"), "theirs\n")
	pre := take(t, s)
	if err := unix.Mount(other, filepath.Join(ws, "sub"), "", unix.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(ws, "sub"), unix.MNT_DETACH) })
	post := take(t, s)
	got := kindsOf(s.changesBetween(recorder(s), pre, post))
	if !post.walked || got["sub/mine.txt"] != changes.Delete || got["sub/theirs.txt"] != changes.Add {
		t.Errorf("after a bind mount: walked %v, changes %v", post.walked, got)
	}
}
