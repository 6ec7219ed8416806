package tools

import (
	"bytes"
	"os"
	"path/filepath"
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
	self := strconv.Itoa(os.Getpid())
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var guards []string
		parents := map[string]bool{}
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, st := range stats {
			data, err := os.ReadFile(st)
			if err != nil {
				continue
			}
			i := bytes.LastIndexByte(data, ')')
			f := strings.Fields(string(data[i+1:]))
			if len(f) < 2 || f[0] == "Z" {
				continue
			}
			pid := filepath.Base(filepath.Dir(st))
			parents[f[1]] = true
			if cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(st), "cmdline")); f[1] == self && bytes.HasPrefix(cmd, []byte("octet-guard\x00")) {
				guards = append(guards, pid)
			}
		}
		if len(guards) == 1 && !parents[guards[0]] {
			pid, _ := strconv.Atoi(guards[0])
			return pid
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
