package agent

import (
	"context"
	"fmt"
	"sync"
	"testing"

	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

func requestInstructions(t *testing.T, h *harness) []string {
	t.Helper()
	var out []string
	for _, r := range h.srv.Requests() {
		s, _ := r.Body["instructions"].(string)
		out = append(out, s)
	}
	return out
}

// TestSetInstructionsAppliesAtNextPreparation changes the instructions
// while a tool of the run executes (between two requests of one run) and
// again while the agent is idle: each request carries the instructions
// current when it was prepared, never a later value.
func TestSetInstructionsAppliesAtNextPreparation(t *testing.T) {
	checkLeaks(t)
	var h *harness
	probe := &probeTool{name: "probe", effect: tools.Pure}
	probe.onExec = func(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
		h.agent.SetInstructions("rules v2")
		return tools.Result{Text: "ok"}, nil
	}
	h = newHarness(t, harnessOpt{extra: []tools.Tool{probe}, policy: tools.UnsafeHost})
	h.srv.Enqueue(
		pt.Reply(pt.FunctionCall("c1", "probe", `{"n":1}`)),
		pt.Text("done"),
		pt.Text("second run"),
	)
	if got := h.agent.Instructions(); got != "You are a test agent." {
		t.Fatalf("Instructions() before any change = %q", got)
	}
	checkRunEvents(t, drain(t, h.prompt("go", PromptOptions{})), OutcomeCompleted)
	h.agent.SetInstructions("rules v3") // idle
	if got := h.agent.Instructions(); got != "rules v3" {
		t.Fatalf("Instructions() = %q", got)
	}
	checkRunEvents(t, drain(t, h.prompt("again", PromptOptions{})), OutcomeCompleted)
	got := requestInstructions(t, h)
	want := []string{"You are a test agent.", "rules v2", "rules v3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("request instructions = %q, want %q", got, want)
	}
}

// TestSetInstructionsConcurrent calls SetInstructions from several
// goroutines during a run (run under -race): every request carries one
// whole value that was set, and the value set last wins afterwards.
func TestSetInstructionsConcurrent(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}, policy: tools.UnsafeHost})
	h.srv.Enqueue(
		pt.Reply(pt.FunctionCall("c1", "probe", `{"n":1}`)),
		pt.Reply(pt.FunctionCall("c2", "probe", `{"n":2}`)),
		pt.Text("done"),
	)
	valid := map[string]bool{"You are a test agent.": true}
	for w := range 4 {
		for i := range 50 {
			valid[fmt.Sprintf("w%d-%d", w, i)] = true
		}
	}
	r := h.prompt("go", PromptOptions{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				h.agent.SetInstructions(fmt.Sprintf("w%d-%d", w, i))
				_ = h.agent.Instructions()
			}
		})
	}
	checkRunEvents(t, drain(t, r), OutcomeCompleted)
	wg.Wait()
	for i, s := range requestInstructions(t, h) {
		if !valid[s] {
			t.Errorf("request %d carried instructions %q that were never set", i, s)
		}
	}
	h.agent.SetInstructions("final")
	h.srv.Enqueue(pt.Text("ok"))
	checkRunEvents(t, drain(t, h.prompt("last", PromptOptions{})), OutcomeCompleted)
	reqs := requestInstructions(t, h)
	if last := reqs[len(reqs)-1]; last != "final" {
		t.Fatalf("last request instructions = %q, want %q", last, "final")
	}
}
