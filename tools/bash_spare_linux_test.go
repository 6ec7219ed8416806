package tools

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/internal/proc"
)

// idleGuard waits until exactly one process guard (argv[0] octet-guard)
// is a child of this process with no child of its own — a spare — and
// returns its pid.
func idleGuard(t *testing.T) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var guards []int
		parents := map[int]bool{}
		for _, p := range procs() {
			if p.zombie {
				continue
			}
			parents[p.ppid] = true
			if p.guard && p.ppid == os.Getpid() {
				guards = append(guards, p.pid)
			}
		}
		if len(guards) == 1 && !parents[guards[0]] {
			return guards[0]
		}
	}
	t.Fatal("no single idle guard")
	return 0
}

// TestBashCallUsesSpareGuard: once a call's result is made, the tool has
// the next call's guard started and waiting, and the next command runs
// under that guard (it is the command's parent): a guard's start is not
// part of a call that follows another.
func TestBashCallUsesSpareGuard(t *testing.T) {
	proc.StopSpares()
	defer proc.StopSpares()
	bt, err := NewBash(Config{Root: t.TempDir(), SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Close()
	for i := range 3 {
		spare := idleGuard(t)
		res := run(t, bt, map[string]any{"command": "echo parent=$PPID"})
		if res.IsError || !strings.Contains(res.Text, "parent="+strconv.Itoa(spare)+"\n") {
			t.Fatalf("call %d: %q, want its command's parent to be the spare guard %d", i, res.Text, spare)
		}
	}
}

// TestPrewarmWaitsForStartUp: a new bash tool's first snapshot waits
// prewarmDelay (the process's start-up work, the first model request,
// does not share the CPU with it), then is taken in the background; a
// call that comes sooner takes it itself, and the prewarm then takes
// none.
func TestPrewarmWaitsForStartUp(t *testing.T) {
	ws := t.TempDir()
	store, err := changes.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	newTool := func() *BashTool {
		bt, err := NewBash(Config{Root: ws, SpillDir: t.TempDir(), Changes: &changes.Recorder{Store: store}})
		if err != nil {
			t.Fatal(err)
		}
		return bt
	}
	began := func(bt *BashTool) bool { return bt.snaps.began.Load() }
	bt := newTool()
	time.Sleep(50 * time.Millisecond) // well inside prewarmDelay
	if began(bt) {
		t.Error("the first snapshot began before prewarmDelay")
	}
	<-bt.snaps.warmDone
	if !began(bt) {
		t.Error("no first snapshot after prewarmDelay")
	}
	bt.Close()

	bt = newTool()
	defer bt.Close()
	if res := run(t, bt, map[string]any{"command": "echo x > f"}); res.IsError || len(res.Changes) != 1 {
		t.Fatalf("a call at once: %+v", res)
	}
	waitMarked(bt.snaps)
	bt.snaps.mu.Lock()
	since := bt.snaps.since
	bt.snaps.mu.Unlock()
	<-bt.snaps.warmDone
	waitMarked(bt.snaps)
	bt.snaps.mu.Lock()
	defer bt.snaps.mu.Unlock()
	if bt.snaps.since != since {
		t.Errorf("the prewarm took a snapshot after the call had (%d snapshots since the marks, then %d)", since, bt.snaps.since)
	}
}

// TestWarmUpEndsPrewarmDelay: once told a model request is out
// (WarmUp, through the host), a new bash tool takes its first snapshot
// at once rather than after prewarmDelay; told again, nothing more.
func TestWarmUpEndsPrewarmDelay(t *testing.T) {
	store, err := changes.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	bt, err := NewBash(Config{Root: t.TempDir(), SpillDir: t.TempDir(), Changes: &changes.Recorder{Store: store}})
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Close()
	h := NewHost()
	if err := h.Register(bt); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h.WarmUp()
	h.WarmUp() // a second request: nothing more
	<-bt.snaps.warmDone
	if took := time.Since(start); took >= prewarmDelay*3/4 {
		t.Errorf("the first snapshot was taken %v after WarmUp; prewarmDelay is %v", took, prewarmDelay)
	}
	bt.snaps.mu.Lock()
	defer bt.snaps.mu.Unlock()
	if bt.snaps.tree == nil {
		t.Error("no first snapshot after WarmUp")
	}
}
