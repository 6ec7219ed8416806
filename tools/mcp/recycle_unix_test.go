//go:build unix

package mcp

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTimedOutCallRecyclesServer: a server that stops answering (its
// process stopped with SIGSTOP, so it is alive but hung) makes a call
// time out; the server is recycled at once (its process stopped, a new
// one started after the backoff), so the next call of the same run
// reaches a fresh server instead of timing out again. The liveness ping
// is made too slow to help: on the old code the second call timed out
// too.
func TestTimedOutCallRecyclesServer(t *testing.T) {
	sp := stdioSpec("t")
	sp.ToolTimeout = time.Second
	f := start(t, Options{Servers: []Spec{sp}, Backoff: 50 * time.Millisecond, PingEvery: time.Hour})
	pid := pidOf(t, f)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	// kill returns before the process's threads have stopped; a loaded
	// machine has let one answer the call made right after.
	waitFor(t, "the server's threads stopped", func() bool { return stopped(pid) })
	res, _ := f.call(t, "mcp__t__echo", `{"text":"hung"}`)
	if !res.IsError || !strings.Contains(res.Text, "did not answer within tool_timeout_secs") {
		t.Fatalf("call to a hung server: %+v", res)
	}
	start := time.Now()
	next, _ := f.call(t, "mcp__t__echo", `{"text":"next"}`)
	if next.IsError || next.Text != "echo: next" {
		t.Fatalf("next call after the timeout (%s): %+v; server %+v", time.Since(start), next, f.server(t, "t"))
	}
	if !strings.Contains(res.Text, "restarting MCP server") {
		t.Errorf("the timeout does not say the server is restarted: %q", res.Text)
	}
	if got := pidOf(t, f); got == pid {
		t.Fatal("the hung server process still serves the calls")
	}
	s := f.server(t, "t")
	if s.Restarts != 1 || len(s.Errors) == 0 || !strings.Contains(s.Errors[len(s.Errors)-1], "did not answer within tool_timeout_secs") {
		t.Errorf("server after the recycle: %+v", s)
	}
	// The hung process was stopped (SIGTERM, then SIGKILL after the
	// grace: a stopped process takes only the latter).
	waitFor(t, "the hung process gone", func() bool { return syscall.Kill(pid, 0) != nil })
	if !strings.Contains(f.log.String(), "MCP server recycled after a timed-out call") {
		t.Errorf("log:\n%s", f.log.String())
	}
}

// stopped reports whether every thread of process pid is stopped (state
// T in /proc; true where there is no /proc to ask).
func stopped(pid int) bool {
	stats, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(stats) == 0 {
		_, err := os.Stat("/proc/self")
		return err != nil
	}
	for _, st := range stats {
		data, err := os.ReadFile(st)
		i := bytes.LastIndexByte(data, ')')
		if err != nil || i < 0 || i+2 >= len(data) || data[i+2] != 'T' {
			return false
		}
	}
	return true
}
