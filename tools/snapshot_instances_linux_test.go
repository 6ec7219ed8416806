package tools

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestSnapshotFeedInstances: a feed spreads the watches a walk adds per
// file (new directories, read by a snapshot from the feed) over its
// inotify instances — an instance adds one watch at a time, however many
// walk workers add them — and a change that any of them sees is recorded
// by the feed's next snapshot, without a walk.
func TestSnapshotFeedInstances(t *testing.T) {
	withMarker(t, false)
	s, ws := newTestSnapshotter(t, false)
	put(t, filepath.Join(ws, "a.txt"), "a\n")
	take(t, s)
	const dirs = 40
	for d := range dirs {
		for f := range 5 {
			put(t, filepath.Join(ws, fmt.Sprintf("d%02d/f%d.txt", d, f)), fmt.Sprintf("file %d/%d\n", d, f))
		}
	}
	time.Sleep(3 * s.racy)
	pre := take(t, s)
	if pre.walked {
		t.Fatalf("the new directories were walked with the rest: %s", s.stale)
	}
	per := map[int]int{}
	s.mu.Lock()
	for wd, n := range s.wds {
		if n.kind == nodeFile && n.parent.parent != nil {
			i, _ := instanceOf(wd)
			per[i]++
		}
	}
	s.mu.Unlock()
	if len(per) != feedInstances || per[0]+per[1] != dirs*5 {
		t.Fatalf("file watches by instance %v: want all %d files' over all %d instances", per, dirs*5, feedInstances)
	}
	for d := range dirs {
		put(t, filepath.Join(ws, fmt.Sprintf("d%02d/f3.txt", d)), "changed\n")
	}
	post, kinds := changed(t, s, pre)
	if post.walked || len(kinds) != dirs {
		t.Fatalf("after changing a file in each of %d directories: walked %v, %d changes %v", dirs, post.walked, len(kinds), kinds)
	}
}
