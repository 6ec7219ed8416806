package tools

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

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
