//go:build unix

package tools

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/octet-agent/octet/changes"
)

// bigWorkspace writes n small files in directories of 200.
func bigWorkspace(t testing.TB, n int) string {
	t.Helper()
	ws := t.TempDir()
	for d := range (n + 199) / 200 {
		dir := filepath.Join(ws, fmt.Sprintf("d%03d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range min(200, n-d*200) {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", f)), fmt.Appendf(nil, "file %d/%d\n", d, f), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ws
}

// storeBash returns a bash tool of ws with its own change store.
func storeBash(t *testing.T, ws string) *BashTool {
	t.Helper()
	store, err := changes.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return newBash(t, Config{Root: ws, Changes: &changes.Recorder{Store: store}})
}

// TestBashCheckpointCancelAndProgress: a first checkpoint of a large
// workspace, cancelled, stops promptly and its command never starts; the
// next call's checkpoint says what it is doing as tool output once it
// takes longer than half a second (waiting for a snapshot under way),
// and records what its command did.
func TestBashCheckpointCancelAndProgress(t *testing.T) {
	ws := bigWorkspace(t, 10_000)
	b := storeBash(t, ws)
	ctx, cancel := context.WithCancel(context.Background())
	var cancelled time.Time
	time.AfterFunc(150*time.Millisecond, func() { cancelled = time.Now(); cancel() })
	res := runBash(t, b, ctx, "touch ran", 0)
	latency := time.Since(cancelled)
	if !strings.Contains(res.Text, "cancelled before the command started") {
		t.Fatalf("result: %q", res.Text)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Fatal("a cancelled call started its command")
	}
	if n := guardsOf(os.Getpid()); n != 0 {
		t.Errorf("%d process guards left after the cancelled call, alive or unreaped (its guard, started with the checkpoint, must be gone)", n)
	}
	t.Logf("returned %v after the cancel", latency)
	if latency > 250*time.Millisecond {
		t.Errorf("returned %v after the cancel (want well within 100 ms; 250 ms allowed for a loaded machine)", latency)
	}

	// The next call waits for a snapshot under way (here one that lasts
	// 800 ms, whatever the machine's speed: a walk of 10,000 files can
	// take less than the progress delay) and says so once it has waited
	// longer than that delay.
	b.snaps.takes <- struct{}{}
	time.AfterFunc(800*time.Millisecond, func() { <-b.snaps.takes })
	var mu sync.Mutex
	var lines []string
	var first time.Duration
	start := time.Now()
	raw := argsJSON(t, map[string]any{"command": "echo hi > d007/f007"})
	res, err := b.Execute(context.Background(), Invocation{CallID: "c", Arguments: raw, Progress: func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if len(lines) == 0 {
			first = time.Since(start)
		}
		lines = append(lines, s)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 || res.Changes[0].Path != "d007/f007" {
		t.Errorf("the next call's changes: %+v", res.Changes)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "[checkpointing ") || !strings.Contains(lines[0], " files") || !strings.HasSuffix(lines[0], "…]\n") {
		t.Fatalf("progress: %q", lines)
	}
	if first < checkpointProgressDelay {
		t.Errorf("the first progress came %v after the call started, before %v", first, checkpointProgressDelay)
	}
	t.Logf("progress after %v: %q", first, lines)
}

// TestBashSharedSnapshotter: the bash tools of one workspace and change
// store share one snapshotter (one tree, one feed); it closes with the
// last of them, and a checkpoint of one sees what another's command did.
func TestBashSharedSnapshotter(t *testing.T) {
	ws := t.TempDir()
	store, err := changes.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Root: ws, Changes: &changes.Recorder{Store: store}}
	a, b := newBash(t, cfg), newBash(t, cfg)
	if a.snaps != b.snaps {
		t.Fatal("two bash tools of one workspace and store have two snapshotters")
	}
	res := runBash(t, a, context.Background(), "echo a > a.txt", 0)
	if len(res.Changes) != 1 {
		t.Errorf("a's changes: %+v", res.Changes)
	}
	res = runBash(t, b, context.Background(), "echo b >> a.txt", 0)
	if len(res.Changes) != 1 || !strings.Contains(res.Changes[0].Diff, "+b") {
		t.Errorf("b's changes: %+v", res.Changes)
	}
	s := a.snaps
	a.Close()
	if s.tree == nil {
		t.Error("closed with a user left")
	}
	b.Close()
	if s.tree != nil || s.feed != nil {
		t.Error("not closed with its last user")
	}
}

// TestSnapshotEntryBound: at exactly DefaultSnapshotMaxEntries entries a
// snapshot covers the whole workspace; one more and it covers the first
// DefaultSnapshotMaxEntries in path order, says so, and walks (no feed):
// a change within the bound is recorded, one past it is not; so does a
// new process's first walk.
func TestSnapshotEntryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200,000 files")
	}
	ws := t.TempDir()
	const perDir = 1000
	// 199 directories of 1,000 files and one of 999: 200,000 entries.
	for d := range DefaultSnapshotMaxEntries / (perDir + 1) {
		dir := filepath.Join(ws, fmt.Sprintf("d%03d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		n := perDir
		if d == DefaultSnapshotMaxEntries/(perDir+1)-1 {
			n = DefaultSnapshotMaxEntries - d*(perDir+1) - 1
		}
		for f := range n {
			fd, err := unix.Open(filepath.Join(dir, fmt.Sprintf("f%04d", f)), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(fd)
		}
	}
	store, err := changes.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	s := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: store}})
	t.Cleanup(s.close)
	at := take(t, s)
	if at.partial || s.entries != DefaultSnapshotMaxEntries {
		t.Fatalf("at the bound: partial %v, %d entries", at.partial, s.entries)
	}
	put(t, filepath.Join(ws, "zzz-past"), "one entry more\n")
	past := take(t, s)
	if !past.partial || s.entries != DefaultSnapshotMaxEntries || s.feed != nil {
		t.Fatalf("past the bound: partial %v, %d entries, feed %v", past.partial, s.entries, s.feed != nil)
	}
	undo := strings.Join(s.cannotUndo(at, past), "\n")
	if !strings.Contains(undo, "more than 200000 entries: those past the bound (in path order) were not checkpointed") {
		t.Errorf("cannotUndo: %q", undo)
	}
	put(t, filepath.Join(ws, "d000/f0000"), "within the bound\n")
	put(t, filepath.Join(ws, "zzz-past"), "past it\n")
	post := take(t, s)
	got := kindsOf(s.changesBetween(recorder(s), past, post))
	if len(got) != 1 || got["d000/f0000"] != changes.Modify || !post.walked {
		t.Errorf("changes past the bound: %v (walked %v)", got, post.walked)
	}

	// A new process's first walk past the bound is cut alike (a
	// directory past it too, which no file read stands for).
	s.close()
	if err := os.Mkdir(filepath.Join(ws, "zzz-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	next := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: store}})
	t.Cleanup(next.close)
	first := take(t, next)
	if !first.partial || next.entries != DefaultSnapshotMaxEntries {
		t.Errorf("a new process past the bound: partial %v, %d entries", first.partial, next.entries)
	}
	checkFirstSnapshot(t, "a new process past the bound", next, first, post.manifest)
}

// TestBashChangesAroundCalls: what a command's children would write
// after it exits never happens (the guard ends them with it), and a file
// changed between two calls by someone else is in neither call's changes:
// the next call's first snapshot holds it, so a rewind of that call does
// not undo it.
func TestBashChangesAroundCalls(t *testing.T) {
	ws := t.TempDir()
	put(t, filepath.Join(ws, "a.txt"), "a\n")
	b := storeBash(t, ws)
	res := runBash(t, b, context.Background(), "(sleep 0.3; echo late > late.txt) & echo now > now.txt", 0)
	if got := kindsOf(res.Changes); len(got) != 1 || got["now.txt"] != changes.Add {
		t.Errorf("the first call's changes: %v", got)
	}
	time.Sleep(600 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(ws, "late.txt")); err == nil {
		t.Fatal("a child of the command wrote after it ended")
	}
	put(t, filepath.Join(ws, "a.txt"), "changed by the user\n")
	res = runBash(t, b, context.Background(), "echo b > b.txt", 0)
	if got := kindsOf(res.Changes); len(got) != 1 || got["b.txt"] != changes.Add {
		t.Errorf("the second call's changes: %v (the user's change is not the command's)", got)
	}
}

// guardsOf counts the process guards (argv[0] octet-guard) whose parent
// is pid, and its children that exited unreaped (a guard left to end
// when a collection finalizes its socket, which nothing then waits for);
// none where there is no /proc.
func guardsOf(pid int) int {
	n := 0
	for _, p := range procs() {
		if p.ppid == pid && (p.zombie || p.guard) {
			n++
		}
	}
	return n
}

// procStat is what /proc says of one process for the guard tests.
type procStat struct {
	pid, ppid     int
	zombie, guard bool // guard: argv[0] is octet-guard
}

// procs lists the processes /proc shows (none where there is none).
func procs() []procStat {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []procStat
	for _, st := range stats {
		data, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, not ')'.
		i := bytes.LastIndexByte(data, ')')
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 2 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(st), "cmdline"))
		out = append(out, procStat{pid: pid, ppid: ppid, zombie: f[0] == "Z", guard: bytes.HasPrefix(cmd, []byte("octet-guard\x00"))})
	}
	return out
}
