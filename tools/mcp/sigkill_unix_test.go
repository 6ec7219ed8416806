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
