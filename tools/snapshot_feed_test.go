//go:build unix

package tools

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/changes"
)

// These tests check the change feed against the walk: whatever happens
// to the workspace, a snapshot brought up to date by the feed must hold
// exactly what a walk of the workspace finds, and record the same
// changes. The feed may only ever cause an extra walk.

// requireFeed skips t where there is no change feed.
func requireFeed(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the change feed is inotify's")
	}
}

// oracle returns a snapshotter of ws that walks every time, with its own
// store: what the feed's snapshots are compared with.
func oracle(t *testing.T, ws string) *snapshotter {
	t.Helper()
	store, err := changes.Open(t.TempDir(), 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	s := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: store}})
	s.racy, s.noFeed = 10*time.Millisecond, true
	t.Cleanup(s.close)
	return s
}

// sameEntries fails t unless the two snapshotters' trees hold the same
// entries (stat fields, hashes and what is not kept).
func sameEntries(t *testing.T, what string, fed, walked *snapshotter) {
	t.Helper()
	a, b := entriesNow(t, fed), entriesNow(t, walked)
	for _, p := range slices.Sorted(maps.Keys(a)) {
		e, f := a[p], b[p]
		e.racy, f.racy = false, false
		if _, ok := b[p]; !ok {
			t.Errorf("%s: the feed's tree has %s, a walk does not: %+v", what, p, e)
		} else if e != f {
			t.Errorf("%s: %s differs:\nfeed %+v\nwalk %+v", what, p, e, f)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[p]; !ok {
			t.Errorf("%s: a walk finds %s, the feed's tree does not: %+v", what, p, b[p])
		}
	}
}

// sameChanges fails t unless both record the same changes.
func sameChanges(t *testing.T, what string, fed, walked []changes.Record) {
	t.Helper()
	show := func(recs []changes.Record) string {
		var b strings.Builder
		for _, r := range recs {
			fmt.Fprintf(&b, "%s %s %q\n", r.Kind, r.Path, r.Diff)
		}
		return b.String()
	}
	if a, b := show(fed), show(walked); a != b {
		t.Errorf("%s: the feed recorded\n%s\na walk\n%s", what, a, b)
	}
}

// workspaceOps changes a workspace at random in every way a command
// could: files written, appended, truncated, rewritten with their mtime
// set back, chmod'ed, renamed, linked from outside and written through
// the link; directories made, renamed, moved out and back, removed, and
// swapped for symbolic links; .gitignore rules and .git written; rename
// storms.
type workspaceOps struct {
	t       *testing.T
	ws, out string
	rng     *rand.Rand
	n       int
}

func (o *workspaceOps) files() []string {
	var out []string
	filepath.WalkDir(o.ws, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Name() == ".git" && d.IsDir() {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(o.ws, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func (o *workspaceOps) dirs() []string {
	out := []string{"."}
	filepath.WalkDir(o.ws, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() && p != o.ws {
			rel, _ := filepath.Rel(o.ws, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func (o *workspaceOps) pick(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[o.rng.IntN(len(list))]
}

func (o *workspaceOps) abs(rel string) string { return filepath.Join(o.ws, rel) }

// step makes one random change and says what it did.
func (o *workspaceOps) step() string {
	o.n++
	name := fmt.Sprintf("n%d", o.n)
	files, dirs := o.files(), o.dirs()
	f, d := o.pick(files), o.pick(dirs)
	switch o.rng.IntN(19) {
	case 0, 1:
		p := filepath.Join(d, name+".txt")
		os.WriteFile(o.abs(p), []byte("new "+p+"\n"), 0o644)
		return "create " + p
	case 2:
		if f == "" {
			return "-"
		}
		os.WriteFile(o.abs(f), []byte(fmt.Sprintf("rewritten %d\n", o.n)), 0o644)
		return "rewrite " + f
	case 3:
		if f == "" {
			return "-"
		}
		fh, err := os.OpenFile(o.abs(f), os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			fmt.Fprintf(fh, "appended %d\n", o.n)
			fh.Close()
		}
		return "append " + f
	case 4:
		if f == "" {
			return "-"
		}
		os.Truncate(o.abs(f), 1)
		return "truncate " + f
	case 5:
		if f == "" {
			return "-"
		}
		st, err := os.Lstat(o.abs(f))
		if err != nil {
			return "-"
		}
		data, _ := os.ReadFile(o.abs(f))
		for i := range data {
			data[i] ^= 0x20
		}
		os.WriteFile(o.abs(f), data, 0o644)
		os.Chtimes(o.abs(f), st.ModTime(), st.ModTime())
		return "same-size rewrite, mtime back " + f
	case 6:
		if f == "" {
			return "-"
		}
		os.Chmod(o.abs(f), os.FileMode(0o600|o.rng.IntN(2)*0o111))
		return "chmod " + f
	case 7:
		if f == "" {
			return "-"
		}
		to := filepath.Join(d, name)
		os.Rename(o.abs(f), o.abs(to))
		return "rename " + f + " " + to
	case 8:
		p := filepath.Join(d, name)
		os.MkdirAll(o.abs(filepath.Join(p, "inner")), 0o755)
		os.WriteFile(o.abs(filepath.Join(p, "inner", "deep.txt")), []byte(p), 0o644)
		return "mkdir " + p
	case 9:
		if d == "." {
			return "-"
		}
		to := filepath.Join(o.pick(dirs), name)
		if strings.HasPrefix(to+"/", d+"/") {
			return "-"
		}
		os.Rename(o.abs(d), o.abs(to))
		return "rename dir " + d + " " + to
	case 10:
		if d == "." {
			return "-"
		}
		os.Rename(o.abs(d), filepath.Join(o.out, name))
		os.WriteFile(filepath.Join(o.out, name, "while-out.txt"), []byte("x"), 0o644)
		return "move out " + d + " as " + name
	case 11:
		ents, _ := os.ReadDir(o.out)
		if len(ents) == 0 || !ents[0].IsDir() {
			return "-"
		}
		to := filepath.Join(d, ents[0].Name()+"-back")
		os.Rename(filepath.Join(o.out, ents[0].Name()), o.abs(to))
		return "move back in " + to
	case 12:
		if d == "." {
			return "-"
		}
		os.RemoveAll(o.abs(d))
		return "rm -r " + d
	case 13:
		if d == "." {
			return "-"
		}
		os.Rename(o.abs(d), o.abs(d+".old"))
		os.Symlink(o.out, o.abs(d))
		return "swap dir for a symlink " + d
	case 14:
		if f == "" {
			return "-"
		}
		link := filepath.Join(o.out, name+".link")
		if err := os.Link(o.abs(f), link); err != nil {
			return "-"
		}
		os.WriteFile(link, []byte(fmt.Sprintf("through a link %d\n", o.n)), 0o644)
		return "write through an outside hard link " + f
	case 15:
		rule := o.pick([]string{"*.txt\n", "n1*\n", "inner/\n", "", "!keep.txt\n*.log\n"})
		p := filepath.Join(d, ".gitignore")
		os.Remove(o.abs(p)) // perhaps a FIFO now
		os.WriteFile(o.abs(p), []byte(rule), 0o644)
		return "gitignore " + p + " " + strings.TrimSpace(rule)
	case 16:
		p := filepath.Join(d, ".git", "objects")
		os.MkdirAll(o.abs(p), 0o755)
		os.WriteFile(o.abs(filepath.Join(p, name)), []byte("git"), 0o644)
		return "write .git " + p
	case 17:
		if f == "" {
			return "-"
		}
		a, b := o.abs(f), o.abs(f)+".tmp"
		for range 200 {
			os.Rename(a, b)
			os.Rename(b, a)
		}
		return "rename storm " + f
	default:
		if f == "" {
			return "-"
		}
		os.Remove(o.abs(f))
		syscall.Mkfifo(o.abs(f), 0o644)
		return "replace a file with a FIFO " + f
	}
}

// randomWorkspace returns a snapshotter of a new workspace with a feed,
// one that walks it every time (oracle), and random changes to make to
// it, seeded by seed and stream.
func randomWorkspace(t *testing.T, seed, stream uint64) (s, walked *snapshotter, o *workspaceOps) {
	s, ws := newTestSnapshotter(t, false)
	return s, oracle(t, ws), &workspaceOps{t: t, ws: ws, out: t.TempDir(), rng: rand.New(rand.NewPCG(seed, stream))}
}

// steps makes one to four random changes and says what they were.
func (o *workspaceOps) steps() []string {
	var did []string
	for range 1 + o.rng.IntN(4) {
		did = append(did, o.step())
	}
	return did
}

// TestSnapshotFeedMatchesWalk makes random changes of every kind and,
// after each few, compares the feed's tree with a walk's, and the changes
// each records between the same two moments.
func TestSnapshotFeedMatchesWalk(t *testing.T) {
	requireFeed(t)
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			fed, walked, o := randomWorkspace(t, seed, 35)
			ws := o.ws
			for i := range 8 {
				put(t, filepath.Join(ws, fmt.Sprintf("d%d/f%d.txt", i%3, i)), fmt.Sprintf("file %d\n", i))
			}
			preF, preW := take(t, fed), take(t, walked)
			walks := 0
			for round := range 40 {
				what := fmt.Sprintf("round %d (%s)", round, strings.Join(o.steps(), "; "))
				postF, postW := take(t, fed), take(t, walked)
				if postF.walked {
					walks++
				}
				sameEntries(t, what, fed, walked)
				sameChanges(t, what, fed.changesBetween(recorder(fed), preF, postF), walked.changesBetween(recorder(walked), preW, postW))
				if t.Failed() {
					return
				}
				preF, preW = postF, postW
			}
			t.Logf("%d of 40 snapshots walked the workspace", walks)
		})
	}
}

// changed takes a snapshot after pre and returns it with the kinds of
// the changes between them.
func changed(t *testing.T, s *snapshotter, pre *snapshot) (*snapshot, map[string]changes.Kind) {
	t.Helper()
	post := take(t, s)
	return post, kindsOf(s.changesBetween(recorder(s), pre, post))
}

// TestSnapshotFeedOverflow: when the kernel's event queue overflows
// (its reader held off), the change whose event was dropped is still
// recorded: the snapshot walks. So is one past the feed's own bound on
// names held between snapshots.
func TestSnapshotFeedOverflow(t *testing.T) {
	requireFeed(t)
	t.Run("kernel queue", func(t *testing.T) {
		feedReads = false
		t.Cleanup(func() { feedReads = true })
		s, ws := newTestSnapshotter(t, false)
		put(t, filepath.Join(ws, "a"), "a\n")
		put(t, filepath.Join(ws, "b"), "b\n")
		put(t, filepath.Join(ws, "target.txt"), "before\n")
		pre := take(t, s)
		limit := 16384
		if data, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
			fmt.Sscan(string(data), &limit)
		}
		for i := range limit + 10 { // an event each at least: its directory's watch (and the file's, once marked)
			os.Chmod(filepath.Join(ws, []string{"a", "b"}[i%2]), os.FileMode(0o600|i%2*0o44))
		}
		put(t, filepath.Join(ws, "target.txt"), "after\n") // its events are dropped
		post, got := changed(t, s, pre)
		if !post.walked || got["target.txt"] != changes.Modify {
			t.Errorf("after an overflow: walked %v, changes %v", post.walked, got)
		}
		put(t, filepath.Join(ws, "target.txt"), "again\n")
		next, got := changed(t, s, post)
		if next.walked || got["target.txt"] != changes.Modify {
			t.Errorf("with the feed back: walked %v, changes %v", next.walked, got)
		}
	})
	t.Run("names held", func(t *testing.T) {
		// Restored after the snapshotter's cleanup has stopped its feed's
		// readers, which read it (cleanups run last first).
		old := feedMaxPending
		t.Cleanup(func() { feedMaxPending = old })
		feedMaxPending = 8
		s, ws := newTestSnapshotter(t, false)
		pre := take(t, s)
		for i := range 20 {
			put(t, filepath.Join(ws, fmt.Sprintf("f%02d", i)), "x\n")
		}
		time.Sleep(50 * time.Millisecond) // the reader takes them in
		post, got := changed(t, s, pre)
		if !post.walked || len(got) != 20 {
			t.Errorf("past the bound: walked %v, %d changes %v", post.walked, len(got), got)
		}
	})
}

// TestSnapshotWatchLimit: past the watch limit — when the feed is set up,
// or when a new directory needs more watches later — snapshots walk, and
// every change is recorded, in the directories that could not be watched
// too.
func TestSnapshotWatchLimit(t *testing.T) {
	requireFeed(t)
	t.Run("at setup", func(t *testing.T) {
		s, ws := newTestSnapshotter(t, false)
		s.maxWatches = 5
		for i := range 10 {
			put(t, filepath.Join(ws, fmt.Sprintf("d%d/f.txt", i)), "x\n")
		}
		pre := take(t, s)
		if s.feed != nil || !strings.Contains(s.feedOff, "watch limit") {
			t.Fatalf("a feed past the limit: %v (%s)", s.feed != nil, s.feedOff)
		}
		put(t, filepath.Join(ws, "d9/f.txt"), "changed\n")
		post, got := changed(t, s, pre)
		if !post.walked || got["d9/f.txt"] != changes.Modify {
			t.Errorf("walked %v, changes %v", post.walked, got)
		}
	})
	t.Run("later", func(t *testing.T) {
		s, ws := newTestSnapshotter(t, false)
		put(t, filepath.Join(ws, "a.txt"), "a\n")
		s.maxWatches = 4 // the root and a.txt, and two more
		pre := take(t, s)
		if s.feed == nil {
			t.Fatalf("no feed: %s", s.feedOff)
		}
		for i := range 5 {
			put(t, filepath.Join(ws, "new", fmt.Sprintf("f%d.txt", i)), "x\n")
		}
		post, got := changed(t, s, pre)
		if !post.walked || len(got) != 6 || got["new/f4.txt"] != changes.Add {
			t.Errorf("walked %v, changes %v", post.walked, got)
		}
		if s.feed != nil {
			t.Error("the feed was kept past the limit")
		}
	})
}

// TestSnapshotHardLinks: a file written through a hard link outside the
// workspace (made before the snapshotter started, or after) is
// recorded, by the feed itself (no walk) — whether the marker has
// watched the file since the walk or the snapshot before the next
// command finishes the marking.
func TestSnapshotHardLinks(t *testing.T) {
	requireFeed(t)
	t.Run("marker", func(t *testing.T) { testSnapshotHardLinks(t, true) })
	t.Run("no marker", func(t *testing.T) { testSnapshotHardLinks(t, false) })
}

// withMarker sets markerRuns to on for t.
func withMarker(t *testing.T, on bool) {
	old := markerRuns
	markerRuns = on
	t.Cleanup(func() { markerRuns = old })
}

func testSnapshotHardLinks(t *testing.T, marker bool) {
	withMarker(t, marker)
	s, ws := newTestSnapshotter(t, false)
	out := t.TempDir()
	put(t, filepath.Join(ws, "old.txt"), "old\n")
	put(t, filepath.Join(ws, "new.txt"), "new\n")
	if err := os.Link(filepath.Join(ws, "old.txt"), filepath.Join(out, "old")); err != nil {
		t.Skip(err)
	}
	pre := take(t, s)
	if err := os.Link(filepath.Join(ws, "new.txt"), filepath.Join(out, "new")); err != nil {
		t.Fatal(err)
	}
	mid := take(t, s)
	for _, name := range []string{"old", "new"} {
		f, err := os.OpenFile(filepath.Join(out, name), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(f, "written through a link")
		f.Close()
	}
	post, got := changed(t, s, mid)
	if post.walked || got["old.txt"] != changes.Modify || got["new.txt"] != changes.Modify || len(got) != 2 {
		t.Errorf("walked %v, changes %v", post.walked, got)
	}
	if _, got := changed(t, s, pre); len(got) != 2 {
		t.Errorf("since the first snapshot: %v", got)
	}
}

// TestSnapshotMarker: a walk watches directories, and files with more
// than one link; the marker watches the rest afterwards. A write through
// the workspace needs no file watch (its directory's reports it); a
// write through a hard link made outside the workspace after the walk is
// seen by a file watch once marked, or — made before its file was marked
// — by the stat the marker compares after watching, and recorded before
// the next command runs. At the watch limit the marker gives up the feed
// and snapshots walk.
func TestSnapshotMarker(t *testing.T) {
	requireFeed(t)
	outsideWrite := func(t *testing.T, file, text string) {
		t.Helper()
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Link(file, link); err != nil {
			t.Skip(err)
		}
		f, err := os.OpenFile(link, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(f, text)
		f.Close()
	}
	watched := func(s *snapshotter, rel string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := lookup(s.tree, rel)
		return n != nil && n.wd >= 0
	}
	t.Run("workspace writes need no file watch", func(t *testing.T) {
		withMarker(t, false)
		s, ws := newTestSnapshotter(t, false)
		put(t, filepath.Join(ws, "d/a.txt"), "a\n")
		pre := take(t, s)
		if watched(s, "d/a.txt") || !watched(s, "d") {
			t.Fatalf("after the walk: file watched %v, directory watched %v", watched(s, "d/a.txt"), watched(s, "d"))
		}
		f, err := os.OpenFile(filepath.Join(ws, "d/a.txt"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(f, "appended") // a write, no close yet
		post, got := changed(t, s, pre)
		f.Close()
		if post.walked || got["d/a.txt"] != changes.Modify {
			t.Errorf("a write: walked %v, changes %v", post.walked, got)
		}
		if err := os.Chmod(filepath.Join(ws, "d/a.txt"), 0o600); err != nil {
			t.Fatal(err)
		}
		if next, got := changed(t, s, post); next.walked || got["d/a.txt"] != changes.Modify {
			t.Errorf("a chmod: walked %v, changes %v", next.walked, got)
		}
	})
	t.Run("marked in the background", func(t *testing.T) {
		withMarker(t, true)
		s, ws := newTestSnapshotter(t, false)
		for i := range 600 { // more than a chunk
			put(t, filepath.Join(ws, fmt.Sprintf("d%d/f%03d.txt", i%3, i)), "x\n")
		}
		pre := take(t, s)
		waitMarked(s)
		for i := range 600 {
			if rel := fmt.Sprintf("d%d/f%03d.txt", i%3, i); !watched(s, rel) {
				t.Fatalf("the marker did not watch %s", rel)
			}
		}
		outsideWrite(t, filepath.Join(ws, "d1/f001.txt"), "through a link")
		post, got := changed(t, s, pre)
		if post.walked || len(got) != 1 || got["d1/f001.txt"] != changes.Modify {
			t.Errorf("walked %v, changes %v", post.walked, got)
		}
	})
	t.Run("finished before the next command", func(t *testing.T) {
		withMarker(t, false)
		s, ws := newTestSnapshotter(t, false)
		put(t, filepath.Join(ws, "a.txt"), "a\n")
		pre := take(t, s) // a command's before, walking
		outsideWrite(t, filepath.Join(ws, "a.txt"), "by the command")
		if after := take(t, s); after.walked { // its after: the file has no watch yet
			t.Error("the snapshot after the command walked")
		}
		next := take(t, s) // the next command's before: marks first
		got := kindsOf(s.changesBetween(recorder(s), pre, next))
		if next.walked || got["a.txt"] != changes.Modify || !watched(s, "a.txt") {
			t.Errorf("walked %v, changes %v, watched %v", next.walked, got, watched(s, "a.txt"))
		}
		if data := entriesNow(t, s)["a.txt"]; string(s.content(data)) != "a\nby the command\n" {
			t.Errorf("the next command's before-image: %q", s.content(data))
		}
	})
	t.Run("a walk keeps the watches", func(t *testing.T) {
		withMarker(t, false)
		s, ws := newTestSnapshotter(t, false)
		put(t, filepath.Join(ws, "a.txt"), "a\n")
		put(t, filepath.Join(ws, "b.txt"), "b\n")
		take(t, s)
		take(t, s)
		take(t, s) // a command's before: marks
		put(t, filepath.Join(ws, "b.txt"), "changed\n")
		s.mu.Lock()
		s.loseFeed("a test")
		s.mu.Unlock()
		if walked := take(t, s); !walked.walked {
			t.Fatal("no walk after the feed was lost")
		}
		if !watched(s, "a.txt") || watched(s, "b.txt") {
			t.Errorf("after the walk: a.txt (unchanged) watched %v, b.txt (changed) watched %v", watched(s, "a.txt"), watched(s, "b.txt"))
		}
	})
	t.Run("watch limit", func(t *testing.T) {
		withMarker(t, false)
		s, ws := newTestSnapshotter(t, false)
		s.maxWatches = 3 // the root and two files of four
		for i := range 4 {
			put(t, filepath.Join(ws, fmt.Sprintf("f%d.txt", i)), "x\n")
		}
		pre := take(t, s)
		if s.feed == nil {
			t.Fatalf("no feed after the walk: %s", s.feedOff)
		}
		take(t, s)
		take(t, s) // marks first, past the limit
		if s.feed != nil || !strings.Contains(s.feedOff, "watch limit") {
			t.Fatalf("the feed kept past the limit: %v (%s)", s.feed != nil, s.feedOff)
		}
		put(t, filepath.Join(ws, "f3.txt"), "changed\n")
		post := take(t, s)
		if got := kindsOf(s.changesBetween(recorder(s), pre, post)); !post.walked || len(got) != 1 || got["f3.txt"] != changes.Modify {
			t.Errorf("walked %v, changes %v", post.walked, got)
		}
	})
}

// TestSnapshotRenamedDirectory: a directory renamed moves its files: they
// are deleted at the old path and added at the new one, however old
// their times (a rename leaves its files' times as they were).
func TestSnapshotRenamedDirectory(t *testing.T) {
	bothModes(t, func(t *testing.T, walk bool) {
		s, ws := newTestSnapshotter(t, walk)
		put(t, filepath.Join(ws, "src/a.go"), "package a\n")
		time.Sleep(3 * s.racy)
		pre := take(t, s)
		if err := os.Rename(filepath.Join(ws, "src"), filepath.Join(ws, "lib")); err != nil {
			t.Fatal(err)
		}
		_, got := changed(t, s, pre)
		want := map[string]changes.Kind{"src": changes.Delete, "src/a.go": changes.Delete, "lib": changes.Add, "lib/a.go": changes.Add}
		if !maps.Equal(got, want) {
			t.Errorf("changes %v, want %v", got, want)
		}
	})
}

// TestSnapshotReplacedBySymlink: a file or directory replaced by a
// symbolic link (to anywhere) is recorded as removed: the link is not
// followed or kept, and a rewind brings the file back.
func TestSnapshotReplacedBySymlink(t *testing.T) {
	bothModes(t, func(t *testing.T, walk bool) {
		s, ws := newTestSnapshotter(t, walk)
		out := t.TempDir()
		put(t, filepath.Join(out, "secret"), "outside\n")
		put(t, filepath.Join(ws, "a.txt"), "a\n")
		put(t, filepath.Join(ws, "dir/b.txt"), "b\n")
		pre := take(t, s)
		os.Remove(filepath.Join(ws, "a.txt"))
		os.Symlink(filepath.Join(out, "secret"), filepath.Join(ws, "a.txt"))
		os.RemoveAll(filepath.Join(ws, "dir"))
		os.Symlink(out, filepath.Join(ws, "dir"))
		post, got := changed(t, s, pre)
		want := map[string]changes.Kind{"a.txt": changes.Delete, "dir": changes.Delete, "dir/b.txt": changes.Delete}
		if !maps.Equal(got, want) || post.special != 2 {
			t.Errorf("changes %v (want %v), %d special", got, want, post.special)
		}
		if _, ok := entriesNow(t, s)["dir/secret"]; ok {
			t.Error("the snapshot followed a symbolic link")
		}
	})
}

// TestSnapshotFirstOfProcess: a new process's first snapshot starts from
// the store's snapshot head: it reads only the files changed since, and
// its manifest builds on the head's. Had blobs expired since the head was
// written, their files are read again.
func TestSnapshotFirstOfProcess(t *testing.T) {
	s, ws := newTestSnapshotter(t, false)
	s.store.SetMaxBytes(1 << 30)
	for i := range 20 {
		put(t, filepath.Join(ws, fmt.Sprintf("d%d/f.txt", i%4)+fmt.Sprint(i)), fmt.Sprintf("file %d\n", i))
	}
	time.Sleep(3 * s.racy)
	first := take(t, s)
	s.close()
	put(t, filepath.Join(ws, "d1/f.txt1"), "changed\n")

	next := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: s.store}})
	next.racy = s.racy
	t.Cleanup(next.close)
	snap := take(t, next)
	if snap.hashed != 1 || !snap.walked {
		t.Errorf("first snapshot of a process: hashed %d (want 1), walked %v", snap.hashed, snap.walked)
	}
	data, _ := s.store.Get(snap.manifest)
	if base, delta := changes.ManifestBase(data); !delta || base != first.manifest {
		t.Errorf("its manifest builds on %q (delta %v), want the head %s", base, delta, first.manifest)
	}
	got := kindsOf(next.changesBetween(recorder(next), first, snap))
	if len(got) != 1 || got["d1/f.txt1"] != changes.Modify {
		t.Errorf("changes since the head: %v", got)
	}
	next.close()

	// A blob expires after the head was written: its file is read again.
	time.Sleep(3 * s.racy) // d1/f.txt1 is no longer racy
	e := entriesNow(t, func() *snapshotter { take(t, next); return next }())
	next.close()
	blob := filepath.Join(s.store.Dir(), "objects", e["d2/f.txt2"].sum[:2], e["d2/f.txt2"].sum[2:])
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	os.WriteFile(filepath.Join(s.store.Dir(), "expired"), []byte("now\n"), 0o600)
	third := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: s.store}})
	t.Cleanup(third.close)
	if snap := take(t, third); snap.hashed != 1 || !s.store.Has(e["d2/f.txt2"].sum, e["d2/f.txt2"].size) {
		t.Errorf("after an expiry: hashed %d (want 1), blob kept again %v", snap.hashed, s.store.Has(e["d2/f.txt2"].sum, e["d2/f.txt2"].size))
	}
}

// TestSnapshotDeltaManifests: a snapshot that changes a few files writes
// a delta manifest naming the previous one; once the deltas add up to the
// whole manifest's size the next is whole again. Every manifest reads
// back as the tree it was written for, and crash recovery finds the
// changes since one.
func TestSnapshotDeltaManifests(t *testing.T) {
	bothModes(t, func(t *testing.T, walk bool) {
		s, ws := newTestSnapshotter(t, walk)
		for i := range 30 {
			put(t, filepath.Join(ws, fmt.Sprintf("f%02d.txt", i)), fmt.Sprintf("file %d\n", i))
		}
		time.Sleep(3 * s.racy)
		first := take(t, s)
		deltas, wholes := 0, 0
		var snaps []*snapshot
		for i := range 40 {
			put(t, filepath.Join(ws, fmt.Sprintf("f%02d.txt", i%30)), fmt.Sprintf("change %d\n", i))
			snap := take(t, s)
			data, err := s.store.Get(snap.manifest)
			if err != nil {
				t.Fatal(err)
			}
			if _, delta := changes.ManifestBase(data); delta {
				deltas++
				if len(data) > 1000 { // a file, and the previous one no longer racy (a walk hashes it again)
					t.Errorf("a delta of one file is %d bytes", len(data))
				}
			} else {
				wholes++
			}
			loaded, err := s.load(snap.manifest)
			if err != nil {
				t.Fatal(err)
			}
			now := entriesNow(t, s)
			for p, e := range now {
				l := loaded.entries[p]
				e.racy, l.racy = false, false
				if l != e {
					t.Fatalf("snapshot %d read back: %s is %+v, the tree has %+v", i, p, l, e)
				}
			}
			if len(loaded.entries) != len(now) {
				t.Fatalf("snapshot %d read back with %d entries, the tree has %d", i, len(loaded.entries), len(now))
			}
			snaps = append(snaps, snap)
		}
		if deltas == 0 || wholes == 0 || deltas < 4*wholes {
			t.Errorf("%d delta manifests and %d whole ones", deltas, wholes)
		}
		// Crash recovery compares a manifest read back with the tree.
		b := &BashTool{snaps: s, cfg: Config{Changes: recorder(s)}}
		recs, _, err := b.RecoverChanges(changes.Intent{Snapshot: snaps[5].manifest})
		if err != nil {
			t.Fatal(err)
		}
		want := kindsOf(s.changesBetween(recorder(s), snaps[5], s.lastSnapshot()))
		if got := kindsOf(recs); !maps.Equal(got, want) || len(got) == 0 {
			t.Errorf("recovered %v, want %v", got, want)
		}
		_ = first
	})
}

// TestSnapshotOddNames: names a JSON string cannot hold as they are (not
// UTF-8), or holds only escaped (quotes, newlines, tabs), survive the
// manifest: read back, they are the same names, so the next process's
// first snapshot reads none of them again and crash recovery finds no
// change.
func TestSnapshotOddNames(t *testing.T) {
	s, ws := newTestSnapshotter(t, false)
	names := []string{"bad\xff\xfe.txt", "new\nline", "quote\"d", "tab\tä", "plain.txt"}
	for _, n := range names {
		put(t, filepath.Join(ws, n), "content of a file\n")
	}
	time.Sleep(3 * s.racy)
	first := take(t, s)
	loaded, err := s.load(first.manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, ok := loaded.entries[n]; !ok {
			t.Errorf("%q is not in the manifest read back: %v", n, slices.Collect(maps.Keys(loaded.entries)))
		}
	}
	s.close()
	next := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: s.store}})
	t.Cleanup(next.close)
	if snap := take(t, next); snap.hashed != 0 {
		t.Errorf("the next process read %d files again", snap.hashed)
	}
	b := &BashTool{snaps: next, cfg: Config{Changes: recorder(next)}}
	if recs, _, err := b.RecoverChanges(changes.Intent{Snapshot: first.manifest}); err != nil || len(recs) != 0 {
		t.Errorf("recovered %v, %v", kindsOf(recs), err)
	}
}

// TestSnapshotFeedsPerProcess: a process keeps at most maxFeeds inotify
// instances (the kernel's limit on them is per user): the snapshots of a
// further workspace walk it, and record its changes as well.
func TestSnapshotFeedsPerProcess(t *testing.T) {
	requireFeed(t)
	var fed []*snapshotter
	for range maxFeeds - int(feeds.Load()) {
		s, _ := newTestSnapshotter(t, false)
		take(t, s)
		if s.feed == nil {
			t.Fatalf("no feed below the bound: %s", s.feedOff)
		}
		fed = append(fed, s)
	}
	s, ws := newTestSnapshotter(t, false)
	pre := take(t, s)
	if s.feed != nil || !strings.Contains(s.feedOff, "already watches") {
		t.Fatalf("a feed past the bound: %v (%s)", s.feed != nil, s.feedOff)
	}
	put(t, filepath.Join(ws, "a.txt"), "a\n")
	if post, got := changed(t, s, pre); !post.walked || got["a.txt"] != changes.Add {
		t.Errorf("walked %v, changes %v", post.walked, got)
	}
	fed[0].close()
	s.retry = time.Time{}
	put(t, filepath.Join(ws, "b.txt"), "b\n")
	take(t, s)
	if s.feed == nil {
		t.Errorf("no feed once one was given back: %s", s.feedOff)
	}
}

// TestSnapshotImagesHeldDuringCalls: while a bash call runs, the images
// its snapshots name do not expire, however much is written to the store;
// between calls they expire like any image no checkpoint needs, and the
// next snapshot finds it (the store's expiry) and reads the file again,
// recording no change.
func TestSnapshotImagesHeldDuringCalls(t *testing.T) {
	bothModes(t, func(t *testing.T, walk bool) {
		s, ws := newTestSnapshotter(t, walk)
		s.store.SetMaxBytes(2000)
		put(t, filepath.Join(ws, "a.txt"), strings.Repeat("a", 600))
		time.Sleep(3 * s.racy)
		first := take(t, s)
		sum := entriesNow(t, s)["a.txt"].sum
		fill := func(c byte) {
			for i := range 3 {
				if _, _, err := s.store.Put([]byte(strings.Repeat(string(c+byte(i)), 600))); err != nil {
					t.Fatal(err)
				}
			}
		}
		end := s.beginCall()
		fill('A')
		if !s.store.Has(sum, 600) {
			t.Fatal("a snapshot's image expired while a call ran")
		}
		end()
		time.Sleep(20 * time.Millisecond) // the expiry marker's time moves
		fill('K')
		if s.store.Has(sum, 600) {
			t.Fatal("a snapshot's image held between calls")
		}
		next := take(t, s)
		if next.hashed != 1 || !s.store.Has(sum, 600) {
			t.Errorf("after the expiry: hashed %d, image kept again %v", next.hashed, s.store.Has(sum, 600))
		}
		if got := kindsOf(s.changesBetween(recorder(s), first, next)); len(got) != 0 {
			t.Errorf("changes: %v", got)
		}
	})
}
