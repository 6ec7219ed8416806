package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// testGate ends the run when the gate answers DONE and otherwise sends it
// on with "Run the tests again.".
func testGate() *CompletionPolicy {
	return &CompletionPolicy{
		Instructions: "GATE-INSTRUCTIONS",
		Question:     "Are the tests green? Answer DONE or what is left.",
		Judge: func(answer string) (bool, string) {
			if strings.HasPrefix(answer, "DONE") {
				return true, ""
			}
			return false, "Run the tests again."
		},
	}
}

// isGate reports whether a recorded request is a gate request.
func isGate(req pt.Request) bool { return req.Body["instructions"] == "GATE-INSTRUCTIONS" }

// TestTerminalGateContinuesThenEnds: when the run would end, the
// completion gate is asked in an auxiliary request (the conversation,
// then the question; no tools); "not yet" continues the run with the
// judge's input as a durable follow-up, "done" ends it. Each gate's usage
// is committed with operation terminal_gate.
func TestTerminalGateContinuesThenEnds(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	h.agent.cfg.Completion = testGate()
	h.srv.Enqueue(pt.Text("first answer"), pt.Text("NOT YET: one test fails"), pt.Text("second answer"), pt.Text("DONE"))
	reqs := h.completed(t, drainWait(t, h.prompt("fix the test", PromptOptions{})))
	if len(reqs) != 4 || isGate(reqs[0]) || !isGate(reqs[1]) || isGate(reqs[2]) || !isGate(reqs[3]) {
		t.Fatalf("%d requests, want main, gate, main, gate", len(reqs))
	}
	g := reqs[1]
	if _, ok := g.Body["tools"]; ok || g.Body["tool_choice"] != "none" {
		t.Errorf("gate request offers tools: %v %v", g.Body["tools"], g.Body["tool_choice"])
	}
	in := g.Input()
	last, _ := json.Marshal(in[len(in)-1])
	if s := inputText(g); !strings.Contains(s, "fix the test") || !strings.Contains(s, "first answer") || !strings.Contains(string(last), "Are the tests green?") {
		t.Errorf("gate input %s", s)
	}
	if !strings.Contains(inputText(reqs[2]), "Run the tests again.") {
		t.Errorf("the continuation did not reach the next request: %q", inputText(reqs[2]))
	}
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeCompleted)
	var follow, gateUsage int
	for _, rec := range recs {
		if rec.str("kind") == "entry" && rec.str("type") == string(session.EntryFollowUp) && rec.str("text") == "Run the tests again." {
			follow++
		}
		if rec.str("kind") == session.KindUsage && rec.str("operation") == OperationTerminalGate {
			gateUsage++
		}
	}
	if follow != 1 || gateUsage != 2 {
		t.Errorf("%d follow-up entries (want 1), %d terminal_gate usage records (want 2)", follow, gateUsage)
	}
	if totals := h.sess.Totals(); totals.UnsettledDispatches != 0 {
		t.Errorf("unsettled dispatches %d", totals.UnsettledDispatches)
	}
}

// TestTerminalGateNeverAheadOfQueuedInput: "A successful terminal gate
// cannot return ahead of queued input." Steering queued while the answer
// streamed goes on before any gate; a follow-up submitted while the
// gate's request is pending is accepted and continues the run after a
// successful gate (the serialized final admission boundary); after the
// run closes a submission gets ErrRunEnded.
func TestTerminalGateNeverAheadOfQueuedInput(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	h.agent.cfg.Completion = testGate()
	holdMain, holdGate := make(chan struct{}), make(chan struct{})
	h.srv.Enqueue(
		pt.Text("first answer").HoldUntil(holdMain),
		pt.Text("answer with the steering"),
		pt.Text("DONE").HoldUntil(holdGate),
		pt.Text("answer to the follow-up"),
		pt.Text("DONE"),
	)
	r := h.prompt("go", PromptOptions{})
	evs := drainLater(t, r)
	waitFor(t, func() bool { return len(h.srv.Requests()) == 1 })
	if _, err := r.Steer("STEERING"); err != nil {
		t.Fatal(err)
	}
	close(holdMain)
	waitFor(t, func() bool { return len(h.srv.Requests()) == 3 })
	if _, err := r.FollowUp("FOLLOW-UP DURING THE GATE"); err != nil {
		t.Fatalf("a follow-up during the gate was refused: %v", err)
	}
	close(holdGate)
	<-evs
	reqs := h.completed(t, r.Wait())
	var kinds []string
	for _, q := range reqs {
		if isGate(q) {
			kinds = append(kinds, "gate")
		} else {
			kinds = append(kinds, "main")
		}
	}
	if got := strings.Join(kinds, " "); got != "main main gate main gate" {
		t.Fatalf("requests %s, want main main gate main gate", got)
	}
	if !strings.Contains(inputText(reqs[1]), "STEERING") || !strings.Contains(inputText(reqs[3]), "FOLLOW-UP DURING THE GATE") {
		t.Errorf("queued input did not go on before the gate")
	}
	if _, err := r.FollowUp("too late"); !errors.Is(err, ErrRunEnded) {
		t.Errorf("follow-up after closure: %v, want ErrRunEnded", err)
	}
}

// TestTerminalGateSkippedAfterFinishNow: FinishNow stays sticky: the run
// finishes tool-free and no gate sends it on.
func TestTerminalGateSkippedAfterFinishNow(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	h.agent.cfg.Completion = testGate()
	hold := make(chan struct{})
	h.srv.Enqueue(pt.Text("partial").HoldUntil(hold), pt.Text("wrapped up"))
	r := h.prompt("go", PromptOptions{})
	evs := drainLater(t, r)
	waitFor(t, func() bool { return len(h.srv.Requests()) == 1 })
	if err := r.FinishNow("Wrap up now."); err != nil {
		t.Fatal(err)
	}
	close(hold)
	<-evs
	reqs := h.completed(t, r.Wait())
	if len(reqs) != 2 || isGate(reqs[1]) || reqs[1].Body["tool_choice"] != "none" {
		t.Fatalf("%d requests; the second: gate %v, tool_choice %v", len(reqs), len(reqs) > 1 && isGate(reqs[1]), reqs[len(reqs)-1].Body["tool_choice"])
	}
}

// TestTerminalGateFailsClosed: a gate that cannot decide (its request is
// refused) fails the run with *GateError; nothing of the gate is
// committed as usage.
func TestTerminalGateFailsClosed(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	h.agent.cfg.Completion = testGate()
	h.srv.Enqueue(pt.Text("answer"), pt.Status(400, "invalid_request_error", "bad_request", "no"))
	res := drainWait(t, h.prompt("go", PromptOptions{}))
	if _, ok := errors.AsType[*GateError](res.Err); res.Outcome != OutcomeFailed || !ok {
		t.Fatalf("run %s: %v", res.Outcome, res.Err)
	}
	for _, rec := range readFile(t, h.sess.Path()) {
		if rec.str("kind") == session.KindUsage && rec.str("operation") == OperationTerminalGate {
			t.Fatalf("a failed gate committed usage: %v", rec)
		}
	}
}

// TestTerminalGateRecovery: "Autonomous local compaction, native
// compaction, and terminal-gate calls share the same
// classification/budget guardrails … Recovery emits
// ProviderOperationRetry with its actual typed operation": an
// interrupted gate is replaced within the turn's envelope, announced as
// provider_retry with operation terminal_gate (no recovered_output),
// its uncertainty durable with that operation, and the retry hook is
// told the operation.
func TestTerminalGateRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ops []string
		g := newRecRig(t, recRigOpt{hook: func(_ context.Context, rc ProviderRetryContext) RetryHookResult {
			op := "null"
			if rc.Operation != nil {
				op = *rc.Operation
			}
			ops = append(ops, op)
			return RetryHookResult{}
		}})
		g.agent.cfg.Completion = testGate()
		g.srv.Enqueue(pt.Text("answer"), eofTurn(), pt.Text("DONE"))
		res, evs := g.run(context.Background(), "go")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("run %s: %v", res.Outcome, res.Err)
		}
		retries := eventsOf[*ProviderRetry](evs)
		if len(retries) != 1 || retries[0].Operation == nil || *retries[0].Operation != OperationTerminalGate {
			t.Fatalf("retries %+v, want one terminal_gate retry", retries)
		}
		if len(eventsOf[*RecoveredOutput](evs)) != 0 {
			t.Error("a gate's retry emitted recovered_output")
		}
		if strings.Join(ops, ",") != OperationTerminalGate {
			t.Errorf("hook operations %v", ops)
		}
		var marker bool
		for _, rec := range readFile(t, g.sess.Path()) {
			marker = marker || (rec.str("kind") == session.KindUsageUncertain && rec.str("operation") == OperationTerminalGate)
		}
		if !marker {
			t.Error("no durable terminal_gate uncertainty marker")
		}
	})
}

// TestChildInheritsCompletionPolicy: a delegated child inherits the
// completion policy (and the retry hook) with the rest of the run
// configuration, and "new workers inherit the effective selection, and
// existing workers retain their pinned model and reasoning": a child's
// configuration is the selection at its spawn, untouched by a later
// change of the parent's.
func TestChildInheritsCompletionPolicy(t *testing.T) {
	h := newHarness(t, harnessOpt{model: provider.Model{Name: "m1", Reasoning: true}})
	if _, err := h.agent.SetReasoning("high"); err != nil {
		t.Fatal(err)
	}
	gate := testGate()
	h.agent.cfg.Completion = gate
	h.agent.cfg.RetryHook = func(context.Context, ProviderRetryContext) RetryHookResult { return RetryHookResult{} }
	cfg, err := h.agent.Inherit()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Completion != gate || cfg.RetryHook == nil {
		t.Fatalf("child config: completion %p (want %p), retry hook set %v", cfg.Completion, gate, cfg.RetryHook != nil)
	}
	if err := h.agent.SetSelection(provider.Model{Name: "m2"}, "low"); err != nil {
		t.Fatal(err)
	}
	if cfg.Model.Name != "m1" || cfg.Reasoning == nil || cfg.Reasoning.Effort != "high" {
		t.Errorf("the child's selection %s %+v, want the one at its spawn (m1 high)", cfg.Model.Name, cfg.Reasoning)
	}
	later, err := h.agent.Inherit()
	if err != nil {
		t.Fatal(err)
	}
	if later.Model.Name != "m2" || later.Reasoning == nil || later.Reasoning.Effort != "low" {
		t.Errorf("a new child's selection %s %+v, want the effective m2 low", later.Model.Name, later.Reasoning)
	}
}

// TestTerminalGateHoldsControls: "Auxiliary drives drain accepted
// controls while the immutable request is pending, then deliver at the
// safe settlement boundary … FinishNow remains sticky." More than eight
// controls accepted while the gate's request is held all reach the next
// main request, in submission order; the FinishNow among them makes it
// and the rest of the run tool-free, and no gate is asked again.
func TestTerminalGateHoldsControls(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	h.agent.cfg.Completion = testGate()
	hold := make(chan struct{})
	h.srv.Enqueue(pt.Text("answer"), pt.Text("DONE").HoldUntil(hold), pt.Text("final"))
	r := h.prompt("go", PromptOptions{})
	evs := drainLater(t, r)
	waitFor(t, func() bool { return len(h.srv.Requests()) == 2 })
	var want []string
	for i := range 9 {
		text := "STEER-" + string(rune('A'+i))
		if _, err := r.Steer(text); err != nil {
			t.Fatal(err)
		}
		want = append(want, text)
	}
	if err := r.FinishNow("FINISH-NOW"); err != nil {
		t.Fatal(err)
	}
	want = append(want, "FINISH-NOW")
	close(hold)
	<-evs
	reqs := h.completed(t, r.Wait())
	if len(reqs) != 3 || isGate(reqs[2]) || reqs[2].Body["tool_choice"] != "none" {
		t.Fatalf("%d requests; the last: gate %v tool_choice %v", len(reqs), isGate(reqs[len(reqs)-1]), reqs[len(reqs)-1].Body["tool_choice"])
	}
	in, last := inputText(reqs[2]), -1
	for _, w := range want {
		i := strings.Index(in, w)
		if i <= last {
			t.Fatalf("%s missing or out of order in the request after the gate: %s", w, in)
		}
		last = i
	}
}

// TestTerminalGateUnreportedUsageUnderCeiling: under a hard ceiling, a
// terminal gate's response that reports no usage is durable usage
// uncertainty with operation terminal_gate, like the main request's.
func TestTerminalGateUnreportedUsageUnderCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{budget: &Budget{Ceilings: Ceilings{MaxTokens: 1_000_000}, Prices: DefaultPrices()}})
		g.agent.cfg.Completion = testGate()
		g.srv.Enqueue(pt.Text("answer"), pt.Text("DONE").WithoutUsage())
		if res, _ := g.run(context.Background(), "go"); res.Outcome != OutcomeCompleted {
			t.Fatalf("run %s: %v", res.Outcome, res.Err)
		}
		var marker bool
		for _, rec := range readFile(t, g.sess.Path()) {
			marker = marker || (rec.str("kind") == session.KindUsageUncertain && rec.str("operation") == OperationTerminalGate &&
				rec.str("reason") == reasonUsageNotReported)
		}
		if !marker || !g.sess.Totals().Uncertain {
			t.Error("no durable terminal_gate usage_not_reported marker")
		}
	})
}
