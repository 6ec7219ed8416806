//go:build unix

package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestUncertainSessionUnderCeilingExplained: a session whose first attempt
// was interrupted after partial text (replaced on the codex route, usage
// uncertain, recovered output durable) is later continued under a hard
// ceiling. octet/session/resume presents the recovered output in its own
// field and the uncertainty with its cause and the coming refusal;
// octet/prompt's error and `octet sessions show` say what happened and
// what the user can do.
func TestUncertainSessionUnderCeilingExplained(t *testing.T) {
	full := providertest.Text("The answer is forty two and nothing else")
	x := newExecEnv(t, full.DropAfter(full.FrameCount()/2), full)
	x.writeGlobalConfig(t, "runtime_profile = \"codex\"\n")
	first := runCLI(t, x.ws, x.vars, "exec", "--json", "question")
	if first.code != exitOK {
		t.Fatalf("first exec: exit %d\nstderr: %s", first.code, first.stderr)
	}
	lines, _ := parseJSONLines(t, first.stdout)
	sid := lines[0].SessionID
	x.writeGlobalConfig(t, "runtime_profile = \"codex\"\nmax_session_tokens = 1000000\n")

	cmd := lspCommand(t, 60*time.Second)
	cmd.Dir = x.ws
	cmd.Env = os.Environ()
	for k, v := range x.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	c, stdin, stderr := startLSP(t, cmd)
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + x.ws, "capabilities": map[string]any{}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	res := c.call("octet/session/resume", map[string]any{"sessionId": sid}, nil, nil)
	rec, _ := res["recoveredOutput"].([]any)
	if len(rec) != 1 {
		t.Fatalf("resume recoveredOutput = %v (result %v)", res["recoveredOutput"], res)
	}
	if o := rec[0].(map[string]any); o["channel"] != "text" || o["text"] == "" || !strings.HasPrefix("The answer is forty two and nothing else", o["text"].(string)) {
		t.Errorf("recovered output %v", o)
	}
	usage, _ := res["usage"].(map[string]any)
	if u, _ := usage["uncertainty"].(string); !strings.Contains(u, "a request failed after it may have been sent") {
		t.Errorf("resume usage.uncertainty = %q", usage["uncertainty"])
	}
	if r, _ := usage["refusal"].(string); !strings.Contains(r, "start a new session") || !strings.Contains(r, "remove the hard ceiling") {
		t.Errorf("resume usage.refusal = %q", usage["refusal"])
	}
	requests := len(x.srv.Requests())
	answer := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "go on"}, nil, nil)
	if msg, _ := answer["error"].(string); answer["outcome"] != "failed" || !strings.Contains(msg, "start a new session") || !strings.Contains(msg, "a request failed after it may have been sent") {
		t.Errorf("prompt under the ceiling answered %v", answer)
	}
	if n := len(x.srv.Requests()); n != requests {
		t.Errorf("the refused prompt sent %d requests", n-requests)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("octet lsp exit: %v\nstderr: %s", err, stderr.String())
	}

	show := runCLI(t, x.ws, x.vars, "sessions", "show", sid)
	for _, want := range []string{"usage uncertain since a request failed after it may have been sent", "recovered output (", "The answer is"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("sessions show lacks %q:\n%s", want, show.stdout)
		}
	}
}

// TestExecKilledMidRequest SIGKILLs a real octet exec while the provider
// holds its request: `octet sessions show` then says a request was in
// flight when octet stopped, and continuing the session under a hard
// ceiling is refused without a request, with the cause and what to do.
func TestExecKilledMidRequest(t *testing.T) {
	x := newExecEnv(t, providertest.Stall())
	cmd := exec.CommandContext(t.Context(), octetBin, "exec", "--json", "wait forever")
	cmd.Dir = x.ws
	cmd.Env = os.Environ()
	for k, v := range x.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); len(x.srv.Requests()) == 0; {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("no provider request")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	file := x.oneSession(t)
	sid := sessionIDOf(file)

	show := runCLI(t, x.ws, x.vars, "sessions", "show", sid)
	for _, want := range []string{"usage uncertain since a request was in flight when octet stopped", "1 request(s) dispatched and never settled"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("sessions show lacks %q:\n%s", want, show.stdout)
		}
	}
	x.writeGlobalConfig(t, "max_session_tokens = 1000000\n")
	again := runCLI(t, x.ws, x.vars, "exec", "--session", sid, "continue")
	if again.code != exitFailed || len(x.srv.Requests()) != 1 {
		t.Fatalf("continuing under a ceiling: exit %d, %d requests\nstderr: %s", again.code, len(x.srv.Requests()), again.stderr)
	}
	for _, want := range []string{"in flight when octet stopped", "start a new session", "remove the hard ceiling"} {
		if !strings.Contains(again.stderr, want) {
			t.Errorf("refusal lacks %q:\n%s", want, again.stderr)
		}
	}
	// The reopen recorded the uncertainty: the listing shows it too.
	list := runCLI(t, x.ws, x.vars, "sessions", "list")
	if !strings.Contains(list.stdout, "uncertain") {
		t.Errorf("sessions list after the reopen:\n%s", list.stdout)
	}
}

// TestSessionsListAgreesWithShowMidRequest: while a real octet exec
// streams a request (the scripted provider stalls mid-answer) and after
// it is SIGKILLed there, `octet sessions list` says the session's usage
// is uncertain, as `octet sessions show` does, without a writable open
// recording the unsettled request first.
func TestSessionsListAgreesWithShowMidRequest(t *testing.T) {
	x := newExecEnv(t, providertest.Text("The answer is forty two and nothing else").StallAfter(3))
	cmd := exec.CommandContext(t.Context(), octetBin, "exec", "question")
	cmd.Dir = x.ws
	cmd.Env = os.Environ()
	for k, v := range x.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(20 * time.Second); len(x.srv.Requests()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no provider request")
		}
		time.Sleep(10 * time.Millisecond)
	}
	file := x.oneSession(t)
	sid := sessionIDOf(file)
	agree := func(when string) {
		t.Helper()
		show := runCLI(t, x.ws, x.vars, "sessions", "show", sid)
		if !strings.Contains(show.stdout, "usage uncertain since") {
			t.Fatalf("%s: sessions show does not say uncertain:\n%s", when, show.stdout)
		}
		list := runCLI(t, x.ws, x.vars, "sessions", "list")
		row := ""
		for line := range strings.Lines(list.stdout) {
			if strings.HasPrefix(line, sid) {
				row = line
			}
		}
		if f := strings.Fields(row); len(f) < 2 || !slices.Contains(f, "uncertain") || slices.Contains(f, "known") {
			t.Fatalf("%s: sessions list row %q, want usage uncertain (as sessions show says)\n%s", when, row, list.stdout)
		}
	}
	agree("request streaming")
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	agree("octet killed mid-request")
}
