//go:build unix

package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/harness"
	"github.com/octet-agent/octet/provider/providertest"
)

const (
	planArgs  = `{"explanation":"start with the parser","plan":[{"step":"Read the parser","status":"completed"},{"step":"Fix the bug","status":"in_progress"},{"step":"Run the tests","status":"pending"}]}`
	planLater = `{"plan":[{"step":"Read the parser","status":"completed"},{"step":"Fix the bug","status":"completed"},{"step":"Run the tests","status":"in_progress"}]}`
)

// planEvents returns the plan events among exec --json lines.
func planEvents(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.Lines(stdout) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		if ev, _ := m["event"].(map[string]any); ev["kind"] == "plan" {
			ev["runId"] = m["runId"]
			out = append(out, ev)
		}
	}
	return out
}

// stepsOf is a plan event's steps as "status:step".
func stepsOf(ev map[string]any) []string {
	var out []string
	steps, _ := ev["plan"].([]any)
	for _, s := range steps {
		m := s.(map[string]any)
		out = append(out, m["status"].(string)+":"+m["step"].(string))
	}
	return out
}

// TestPlanExec: the model is offered update_plan and told how to plan;
// its call becomes a plan event in exec --json (and a checklist on
// stderr otherwise, without the call's own lines); a call with two steps
// in progress is refused and announces nothing; a continued session
// starts with its plan so far (runId "").
func TestPlanExec(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_p1", "update_plan", planArgs)),
		providertest.Reply(providertest.FunctionCall("call_p2", "update_plan", `{"plan":[{"step":"a","status":"in_progress"},{"step":"b","status":"in_progress"}]}`)),
		providertest.Text("fixed"),
	)
	home, ws := t.TempDir(), t.TempDir()
	stdout, _ := execBin(t, ws, home, srv, "--json", "fix the parser")
	reqs := srv.Requests()
	if !slices.Contains(toolNames(reqs[0]), "update_plan") {
		t.Errorf("update_plan not offered: %v", toolNames(reqs[0]))
	}
	if instr, _ := reqs[0].Body["instructions"].(string); !strings.HasPrefix(instr, harness.Instructions(harness.Options{Plan: true})) {
		t.Errorf("the instructions lack the plan section:\n%s", instr)
	}
	evs := planEvents(t, stdout)
	if len(evs) != 1 || evs[0]["callId"] != "call_p1" || evs[0]["explanation"] != "start with the parser" ||
		!slices.Equal(stepsOf(evs[0]), []string{"completed:Read the parser", "in_progress:Fix the bug", "pending:Run the tests"}) {
		t.Fatalf("plan events: %v", evs)
	}
	out := reqs[2].Input()
	if res := functionOutput(out, "call_p2"); !strings.Contains(res, "at most one may be") {
		t.Errorf("the refused plan's result: %q", res)
	}
	var sid string
	for l := range strings.Lines(stdout) {
		var m map[string]any
		json.Unmarshal([]byte(l), &m)
		if m["type"] == "result" {
			sid = m["sessionId"].(string)
		}
	}

	// Continued: the plan so far first, then the run's new plan, and on a
	// terminal-less stderr a checklist.
	srv.Enqueue(providertest.Reply(providertest.FunctionCall("call_p3", "update_plan", planLater)), providertest.Text("done"))
	stdout, _ = execBin(t, ws, home, srv, "--json", "--session", sid, "go on")
	evs = planEvents(t, stdout)
	if len(evs) != 2 || evs[0]["runId"] != "" || evs[0]["explanation"] != "start with the parser" || evs[1]["callId"] != "call_p3" ||
		!slices.Equal(stepsOf(evs[1]), []string{"completed:Read the parser", "completed:Fix the bug", "in_progress:Run the tests"}) {
		t.Errorf("continued session's plan events: %v", evs)
	}
	srv.Enqueue(providertest.Text("ok"))
	_, stderr := execBin(t, ws, home, srv, "--session", sid, "status?")
	want := "☰ plan so far in this session\n  [x] Read the parser\n  [x] Fix the bug\n  [>] Run the tests\n"
	if !strings.Contains(stderr, want) || strings.Contains(stderr, "update_plan") {
		t.Errorf("stderr:\n%s\nwant the checklist\n%s", stderr, want)
	}
}

// functionOutput is the output of call callID among input items.
func functionOutput(input []any, callID string) string {
	for _, it := range input {
		m, _ := it.(map[string]any)
		if m["type"] == "function_call_output" && m["call_id"] == callID {
			s, _ := m["output"].(string)
			return s
		}
	}
	return ""
}

// TestPlanLSP: the LSP dialect sends the plan as an octet/event of kind
// plan, and a later octet lsp process resuming the session returns it.
func TestPlanLSP(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Reply(providertest.FunctionCall("call_p1", "update_plan", planArgs)), providertest.Text("fixed"))
	home, ws := t.TempDir(), t.TempDir()
	c, stop := lspIn(t, srv, home, ws, true)
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)
	var notes []map[string]any
	c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "fix"}, nil, &notes)
	stop()
	var kinds []string
	var plan map[string]any
	for _, n := range notes {
		if n["method"] != "octet/event" {
			continue
		}
		ev := n["params"].(map[string]any)["event"].(map[string]any)
		if k := ev["kind"].(string); (strings.HasPrefix(k, "tool_") && !strings.HasPrefix(k, "tool_call_")) || k == "plan" {
			kinds = append(kinds, k)
		}
		if ev["kind"] == "plan" {
			plan = ev
		}
	}
	if !slices.Equal(kinds, []string{"tool_started", "tool_policy_decision", "plan", "tool_finished"}) {
		t.Errorf("event order %v, want the plan after the policy decision and before tool_finished", kinds)
	}
	if plan == nil || plan["callId"] != "call_p1" || len(stepsOf(plan)) != 3 {
		t.Fatalf("plan event %v", plan)
	}

	c, stop = lspIn(t, srv, home, ws, true)
	defer stop()
	res := c.call("octet/session/resume", map[string]any{"sessionId": sid}, nil, nil)
	got, _ := res["plan"].(map[string]any)
	if got == nil || got["explanation"] != "start with the parser" || !slices.Equal(stepsOf(got), stepsOf(plan)) {
		t.Errorf("resume's plan = %v, want %v", res["plan"], plan)
	}
}

// lspIn starts a real octet lsp on ws with home's state and srv as the
// provider, initialized (events on or off); stop shuts it down.
func lspIn(t *testing.T, srv *providertest.Server, home, ws string, events bool) (c *lspClient, stop func()) {
	t.Helper()
	cmd := lspCommand(t, 60*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	c, stdin, _ := startLSP(t, cmd)
	c.call("initialize", map[string]any{"rootUri": "file://" + ws, "capabilities": map[string]any{"experimental": map[string]any{"octet": map[string]any{"events": events}}}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	return c, func() {
		c.call("shutdown", nil, nil, nil)
		c.send(map[string]any{"method": "exit"})
		stdin.Close()
		cmd.Wait()
	}
}
