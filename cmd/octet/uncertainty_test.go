package main

import (
	"os"
	"strings"
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
