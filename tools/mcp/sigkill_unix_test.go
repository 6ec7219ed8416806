//go:build unix

package mcp

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNoServerSurvivesSIGKILL: a stand-in for octet (this test binary)
// starts a stdio server and is killed with SIGKILL; the server process
// must be gone soon after.
func TestNoServerSurvivesSIGKILL(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+serverBin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	if err != nil || pid <= 0 {
		t.Fatalf("helper said %q", line)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("server %d not running before the kill: %v", pid, err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("MCP server %d survived octet's SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFailedServerWithdrawsToolsUntilEnabled: a server that keeps
// failing to restart is given up after maxFailures starts, its tools are
// withdrawn from the host, and Enable starts it again.
func TestFailedServerWithdrawsToolsUntilEnabled(t *testing.T) {
	marker := t.TempDir() + "/ran"
	script := "if [ -e " + marker + " ]; then echo refusing >&2; exit 1; fi; touch " + marker + "; exec " + serverBin
	sp := Spec{Name: "t", Command: "/bin/sh", Args: []string{"-c", script}, StartupTimeout: 30 * time.Second, ToolTimeout: 10 * time.Second}
	f := start(t, Options{Servers: []Spec{sp}, Backoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if _, ok := f.host.Lookup("mcp__t__echo"); !ok {
		t.Fatal("echo not registered")
	}
	killPid(t, pidOf(t, f))
	waitFor(t, "the server failed", func() bool { return f.server(t, "t").State == StateFailed })
	s := f.server(t, "t")
	if _, ok := f.host.Lookup("mcp__t__echo"); ok || toolState(s, "echo") != ToolUnavailable || !strings.Contains(s.Reason, "refusing") {
		t.Fatalf("failed server: %+v", s)
	}
	os.Remove(marker)
	if _, err := f.m.Enable("t", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server back", func() bool { return f.server(t, "t").State == StateRunning })
	if res, _ := f.call(t, "mcp__t__echo", `{"text":"again"}`); res.Text != "echo: again" {
		t.Errorf("after enable: %+v", res)
	}
}
