//go:build unix

package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestLSPOnOneSocket: an editor (or socat's EXEC) can hand octet lsp one
// socket as both stdin and stdout, one open file description. Putting
// stdin in non-blocking mode then puts stdout in it too; a stdout the Go
// runtime does not poll fails its writes with EAGAIN as soon as the socket
// buffer is full, and octet took that for the editor gone. Here the editor
// stops reading while a long answer streams: every event and the prompt's
// result must still arrive once it reads again.
func TestLSPOnOneSocket(t *testing.T) {
	words := make([]string, 60_000) // ~1 MB of deltas, far past the socket buffer
	for i := range words {
		words[i] = "word" + strings.Repeat("x", i%7)
	}
	answer := strings.Join(words, " ")
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text(answer))
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	theirs, ours := os.NewFile(uintptr(fds[0]), "octet-stdio"), os.NewFile(uintptr(fds[1]), "editor")
	defer ours.Close()
	home, ws := t.TempDir(), t.TempDir()
	cmd := lspCommand(t, 60*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	cmd.Stdin, cmd.Stdout = theirs, theirs // one socket, one open file description
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	c := &lspClient{t: t, in: ours, out: bufio.NewReaderSize(ours, 4096)}
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "capabilities": map[string]any{
		"experimental": map[string]any{"octet": map[string]any{"events": true}}}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	res := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)
	sid, _ := res["sessionId"].(string)
	c.next++
	c.send(map[string]any{"id": c.next, "method": "octet/prompt", "params": map[string]any{"sessionId": sid, "text": "talk"}})
	time.Sleep(1500 * time.Millisecond) // the editor is busy: octet's writes fill the socket
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr: %s", stderr.String())
		}
	})
	var text strings.Builder
	for {
		m := c.read()
		if m["id"] == float64(c.next) {
			r, _ := m["result"].(map[string]any)
			if r["outcome"] != "completed" {
				t.Fatalf("prompt answered %v\nstderr: %s", m, stderr.String())
			}
			break
		}
		if m["method"] == "octet/event" {
			ev, _ := m["params"].(map[string]any)["event"].(map[string]any)
			if ev["kind"] == "output_delta" && ev["channel"] == "text" {
				d, _ := ev["text"].(string)
				text.WriteString(d)
			}
		}
	}
	if text.String() != answer {
		t.Fatalf("deltas carried %d bytes of the %d-byte answer", text.Len(), len(answer))
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	if err := cmd.Wait(); err != nil {
		t.Fatalf("octet lsp exit: %v\nstderr: %s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "resource temporarily unavailable") {
		t.Fatalf("a write failed with EAGAIN: %s", stderr.String())
	}
}

// TestLSPStdoutPollable: on the pipes editors start it with, octet lsp's
// stdout is in non-blocking mode, served by the runtime poller, so the
// server can bound a write to the editor (its direct delta writes); stdin
// is too (an exit interrupts its read). Linux: read from /proc.
func TestLSPStdoutPollable(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	cmd := lspCommand(t, 30*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "capabilities": map[string]any{}}, nil, nil)
	for fd := range 2 {
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", cmd.Process.Pid, fd))
		if err != nil {
			t.Skipf("no /proc fdinfo here: %v", err)
		}
		var flags int64
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, _ = strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			}
		}
		if flags&syscall.O_NONBLOCK == 0 {
			t.Errorf("fd %d flags %o: not in non-blocking mode", fd, flags)
		}
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("octet lsp exit: %v\nstderr: %s", err, stderr.String())
	}
}
