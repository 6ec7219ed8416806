//go:build linux

package tools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/proc/proctest"
)

// setsidPrefix returns a command prefix that runs its arguments in a new
// session (setsid(1), else perl or python3), or skips the test.
func setsidPrefix(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("setsid"); err == nil {
		return "setsid"
	}
	if _, err := exec.LookPath("perl"); err == nil {
		return `perl -MPOSIX -e 'POSIX::setsid(); exec @ARGV or die'`
	}
	if _, err := exec.LookPath("python3"); err == nil {
		return `python3 -c 'import os,sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])'`
	}
	t.Skip("no setsid(1), perl or python3 to start a process in a new session")
	return ""
}

// escapeScript starts a backgrounded grandchild (a), a setsid'd one (b), a
// double-forked one (c) and a setsid'd double fork (d), each recording
// its pid, and waits until all four pid files are written.
func escapeScript(setsid string) string {
	return fmt.Sprintf(`sleep 300 & echo $! > a.pid
%[1]s sleep 300 & echo $! > b.pid
(sleep 300 & echo $! > c.pid) &
%[1]s sh -c 'sleep 300 & echo $! > d.pid' &
while [ ! -s a.pid ] || [ ! -s b.pid ] || [ ! -s c.pid ] || [ ! -s d.pid ]; do sleep 0.01; done
echo started
`, setsid)
}

// TestBashCallKillsWholeTree: however a call ends — the shell exits, the
// timeout fires, the call is cancelled — no process the command started
// is alive once Execute returns: not a background child, not one that
// called setsid (which a process-group kill misses), not a double fork.
func TestBashCallKillsWholeTree(t *testing.T) {
	setsid := setsidPrefix(t)
	t.Parallel()
	for _, end := range []string{"exit", "timeout", "cancel"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			b := newBash(t, Config{Root: ws})
			script := escapeScript(setsid)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			timeoutMS := 0
			switch end {
			case "exit":
				script += "exit 4"
			case "timeout":
				script += "sleep 300"
				timeoutMS = 3000
			case "cancel":
				script += "touch ready; sleep 300"
				go func() {
					waitFile(filepath.Join(ws, "ready"))
					cancel()
				}()
			}
			res := runBash(t, b, ctx, script, timeoutMS)
			var pids []int
			for _, f := range []string{"a.pid", "b.pid", "c.pid", "d.pid"} {
				pids = append(pids, readPid(t, filepath.Join(ws, f)))
			}
			defer func() {
				for _, pid := range pids {
					syscallKill(pid)
				}
			}()
			if !strings.Contains(res.Text, "started") {
				t.Fatalf("the command did not get going: %+v", res)
			}
			switch end {
			case "exit":
				if res.Details["exit_code"] != 4 {
					t.Errorf("result %+v", res)
				}
			case "timeout":
				if res.Details["timed_out"] != true {
					t.Errorf("result %+v", res)
				}
			case "cancel":
				if res.Details["cancelled"] != true {
					t.Errorf("result %+v", res)
				}
			}
			for i, pid := range pids {
				if !proctest.Gone(pid) {
					t.Errorf("%c.pid (%d) still runs after the call returned", 'a'+i, pid)
				}
			}
		})
	}
}

// waitFile polls until p exists (at most 30 s).
func waitFile(p string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(p); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
