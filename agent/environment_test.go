package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// contextTexts returns the user-role input texts of request i that start
// with "<environment".
func contextTexts(t *testing.T, h *harness, i int) []string {
	t.Helper()
	var out []string
	for _, it := range h.srv.Requests()[i].Input() {
		b, _ := json.Marshal(it)
		var m struct {
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(b, &m)
		if m.Role == "user" && len(m.Content) == 1 && strings.HasPrefix(m.Content[0].Text, "<environment") {
			out = append(out, m.Content[0].Text)
		}
	}
	return out
}

// TestEnvironmentSentOnceAndOnChange: the environment context is a
// user-role input item before the first prompt, durable in the session;
// a prompt whose environment is unchanged adds nothing; a change (here
// the broker's policy, which the hook is given) appends the new context
// once.
func TestEnvironmentSentOnceAndOnChange(t *testing.T) {
	h := newHarness(t, harnessOpt{policy: tools.UnsafeHost})
	var calls atomic.Int32
	h.agent.cfg.Environment = func(p tools.Policy) string {
		calls.Add(1)
		return "<environment_context>policy: " + p.String() + "</environment_context>"
	}
	h.srv.Enqueue(pt.Text("one"), pt.Text("two"), pt.Text("three"))
	checkRunEvents(t, drain(t, h.prompt("first", PromptOptions{})), OutcomeCompleted)
	checkRunEvents(t, drain(t, h.prompt("second", PromptOptions{})), OutcomeCompleted)
	if _, err := h.broker.SetPolicy(tools.Controlled); err != nil {
		t.Fatal(err)
	}
	checkRunEvents(t, drain(t, h.prompt("third", PromptOptions{})), OutcomeCompleted)
	if calls.Load() != 3 {
		t.Errorf("environment built %d times, want once per prompt", calls.Load())
	}
	unsafe := "<environment_context>policy: unsafe_host</environment_context>"
	controlled := "<environment_context>policy: controlled</environment_context>"
	for i, want := range [][]string{{unsafe}, {unsafe}, {unsafe, controlled}} {
		if got := contextTexts(t, h, i); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("request %d environment items = %q, want %q", i+1, got, want)
		}
	}
	var types []session.EntryType
	for _, e := range h.sess.Branch() {
		types = append(types, e.Type)
	}
	if got, want := fmtTypes(types), "[context user assistant user assistant context user assistant]"; got != want {
		t.Errorf("session entries %s, want %s", got, want)
	}
}

func fmtTypes(ts []session.EntryType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// TestEnvironmentResentAfterCompaction: a context entry a compaction
// summarized away is no longer seen by the model, so the next prompt
// sends it again.
func TestEnvironmentResentAfterCompaction(t *testing.T) {
	branch := []session.Entry{
		{ID: "1", Type: session.EntryContext, Text: "env"},
		{ID: "2", Type: session.EntryUser, Text: "hi"},
	}
	if got := lastContext(branch); got != "env" {
		t.Fatalf("lastContext = %q", got)
	}
	branch = append(branch, session.Entry{ID: "3", Type: session.EntryCompaction, Compaction: &session.Compaction{Summary: "s", FirstKept: "2"}})
	if got := lastContext(branch); got != "" {
		t.Errorf("lastContext after its compaction = %q, want none", got)
	}
}

// TestOfferHidesToolFromModel: a tool Config.Offer refuses for the model
// is not advertised, and a call of it is an unknown tool (never run).
func TestOfferHidesToolFromModel(t *testing.T) {
	h := newHarness(t, harnessOpt{policy: tools.UnsafeHost})
	h.agent.cfg.Offer = func(m provider.Model, name string) bool { return name != "apply_patch" }
	h.srv.Enqueue(
		pt.Reply(pt.FunctionCall("c1", "apply_patch", `{"input":"*** Begin Patch\n*** Add File: x\n+y\n*** End Patch"}`)),
		pt.Text("done"),
	)
	checkRunEvents(t, drain(t, h.prompt("go", PromptOptions{})), OutcomeCompleted)
	for _, tl := range h.srv.Requests()[0].Body["tools"].([]any) {
		if tl.(map[string]any)["name"] == "apply_patch" {
			t.Error("apply_patch advertised to a model it is not offered to")
		}
	}
	second, _ := json.Marshal(h.srv.Requests()[1].Input())
	if !strings.Contains(string(second), "no tool with this name is available") {
		t.Errorf("the call was not refused as an unknown tool: %s", second)
	}
	if _, err := os.Stat(filepath.Join(h.root, "x")); err == nil {
		t.Error("the refused call ran")
	}
}

// compactMidRun runs one prompt whose third request compacts: the model
// sets a plan with update_plan, reads a file too big for the 20K window,
// and the summary replaces everything. It returns the harness and the
// input of the request after the summary.
func compactMidRun(t *testing.T) (*harness, string) {
	t.Helper()
	checkLeaks(t)
	h := newHarness(t, harnessOpt{policy: tools.UnsafeHost, model: provider.Model{Name: "small", ContextWindow: 20_000, MaxOutputTokens: 8000}})
	h.agent.cfg.Environment = func(p tools.Policy) string {
		return "<environment_context>policy: " + p.String() + "</environment_context>"
	}
	h.writeFile("big.txt", strings.Repeat("a line of the big file that fills the context\n", 600))
	h.srv.Enqueue(
		pt.Reply(pt.FunctionCall("p", "update_plan", `{"plan":[{"step":"Read big.txt","status":"completed"},{"step":"Fix the parser","status":"in_progress"},{"step":"Run the tests","status":"pending"}]}`)),
		pt.Reply(pt.FunctionCall("r", "read", `{"path":"big.txt"}`)),
		pt.Text("SUMMARY the user asked for work"),
		pt.Text("done"),
	)
	evs := drain(t, h.prompt("work", PromptOptions{}))
	checkRunEvents(t, evs, OutcomeCompleted)
	if !kindSeen(evs, KindCompactionFinished) {
		t.Fatalf("no compaction: %v", kindsOf(evs))
	}
	reqs := h.srv.Requests()
	if len(reqs) != 4 || reqs[2].Body["instructions"] != compactionInstructions {
		t.Fatalf("%d requests, want the third to be the summary request", len(reqs))
	}
	next := inputText(reqs[3])
	if !strings.Contains(next, "SUMMARY the user asked") || strings.Contains(next, "a line of the big file") {
		t.Fatalf("request 4 is not the compacted context: %.300s", next)
	}
	return h, next
}

// TestCompactionMidRunResendsEnvironment: a compaction inside a run
// summarizes away the environment context sent at the run's start; the
// requests after it carry the current one again, after the summary (not
// only from the next prompt on).
func TestCompactionMidRunResendsEnvironment(t *testing.T) {
	h, _ := compactMidRun(t)
	if got := contextTexts(t, h, 3); len(got) != 1 || got[0] != "<environment_context>policy: unsafe_host</environment_context>" {
		t.Errorf("request after the compaction carries environment items %q, want the current one", got)
	}
}

// TestCompactionMidRunKeepsPlan: the update_plan call that set the plan
// is summarized away (its result says only "Plan updated"), but the plan
// is still the session's (the front doors show it): the requests after
// the compaction carry its steps and their status.
func TestCompactionMidRunKeepsPlan(t *testing.T) {
	_, next := compactMidRun(t)
	for _, want := range []string{"Read big.txt", "Fix the parser", "in_progress", "Run the tests"} {
		if !strings.Contains(next, want) {
			t.Errorf("request after the compaction does not carry the plan (%q missing): %s", want, next)
		}
	}
}
