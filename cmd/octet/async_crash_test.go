//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestAsyncCallSIGKILLBeforeItsResult is the seed's crash case through
// the real binary: octet exec commits a response whose read call is
// async, starts it and sends the next request at once; killed (SIGKILL)
// while that request is pending — the call committed, its result not —
// the session, continued, pairs the call with the indeterminate error
// and never runs it again, although read is a replay-safe workspace
// read that a synchronous call would have replayed.
func TestAsyncCallSIGKILLBeforeItsResult(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.AsyncFunctionCall("a1", "read", `{"path":"notes.txt"}`)),
		providertest.Stall(),
	)
	// Controlled keeps file tools inside the workspace, so read is an
	// exact WorkspaceRead: replay-safe, and replayed were it not async.
	cmd := x.octetCmd(t, "exec", "--json", "--effect-policy", "controlled", "read the notes")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	x.awaitRequests(t, 2) // the overlapping request: the call's result is not durable yet
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	files, _ := filepath.Glob(filepath.Join(x.home, "sessions", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files %v", files)
	}
	id := strings.TrimSuffix(filepath.Base(files[0]), ".jsonl")

	x.srv.Enqueue(providertest.Text("noted"))
	if r := x.runOctet(t, "exec", "--json", "--effect-policy", "controlled", "--session", id, "again"); r.code != 0 {
		t.Fatalf("continue: exit %d\n%s", r.code, r.stderr)
	}
	s, err := session.Inspect(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var res *session.ToolResult
	for _, e := range s.Branch() {
		if e.Type == session.EntryToolResult && e.Result.CallID == "a1" {
			res = e.Result
		}
	}
	if res == nil || res.Details["crash_recovery"] != "indeterminate" || !res.IsError {
		t.Fatalf("the async call's result after the crash: %+v, want the indeterminate error", res)
	}
	if strings.Contains(res.Text, "alpha") {
		t.Errorf("the async call was run again: %q", res.Text)
	}
}
