package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// retryOnceHook replaces the first failed attempt at once, calling
// onFailure first (on the run's owner goroutine, while the turn is
// failing), and ends the turn on any later failure.
type retryOnceHook struct {
	onFailure func()
	failures  int
}

func (p *retryOnceHook) Decide(f Failure) RetryDecision {
	p.failures++
	if p.onFailure != nil {
		p.onFailure()
	}
	if p.failures > 1 {
		return RetryDecision{}
	}
	return RetryDecision{Retry: true, Attempt: 1, Reason: "test"}
}
func (p *retryOnceHook) TurnCompleted()          {}
func (p *retryOnceHook) CloneRetry() RetryPolicy { return &retryOnceHook{} }
func (p *retryOnceHook) setHook(f func())        { p.onFailure = f }
func reasoningOf(req pt.Request) (effort any, ok bool) {
	r, ok := req.Body["reasoning"].(map[string]any)
	if !ok {
		return nil, false
	}
	return r["effort"], true
}

// selections returns the typed reasoning records of the session file
// without their times.
func selections(s *session.Session) []session.Reasoning {
	out := s.ReasoningRecords()
	for i := range out {
		out[i].Time = time.Time{}
	}
	return out
}

// TestSelectionAppliesAtResponseBoundary follows the seed: "host controls
// coalesce at response boundaries … Idle setters apply immediately;
// active controls apply at the next safe response boundary". A model and
// effort chosen while a turn is failing do not reach its replacement
// (the same logical turn keeps its pin); they reach the request after the
// completed response. Updates and baselines are typed records kept apart
// in the ledger, and the effective selection survives a reopen.
func TestSelectionAppliesAtResponseBoundary(t *testing.T) {
	checkLeaks(t)
	m1 := provider.Model{Name: "m1", Reasoning: true, Features: provider.FeatureReasoning}
	m2 := provider.Model{Name: "m2", Reasoning: true, Features: provider.FeatureReasoning}
	probe := &probeTool{name: "probe", effect: tools.Pure}
	hook := &retryOnceHook{}
	h := newHarness(t, harnessOpt{model: m1, extra: []tools.Tool{probe}, retry: hook})
	if _, err := h.agent.SetReasoning("low"); err != nil { // idle: the next run
		t.Fatal(err)
	}
	hook.setHook(func() {
		if _, err := h.agent.SetReasoning("high"); err != nil {
			t.Error(err)
		}
		if err := h.agent.SetModel(m2); err != nil {
			t.Error(err)
		}
	})
	h.srv.Enqueue(pt.Text("cut").EOFAfter(1), pt.Reply(pt.FunctionCall("c1", "probe", `{"n":1}`)), pt.Text("done"))
	res := drainWait(t, h.prompt("go", PromptOptions{}))
	reqs := h.completed(t, res)
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, want := range []struct{ model, effort string }{{"m1", "low"}, {"m1", "low"}, {"m2", "high"}} {
		eff, _ := reasoningOf(reqs[i])
		if reqs[i].Body["model"] != want.model || eff != want.effort {
			t.Errorf("request %d: model %v effort %v, want %s %s", i, reqs[i].Body["model"], eff, want.model, want.effort)
		}
	}
	runID := res.RunID
	want := []session.Reasoning{
		{Op: session.ReasoningUpdate, Model: "m1", Effort: "low"},
		{Op: session.ReasoningBaseline, RunID: runID, Model: "m1", Effort: "low", Reason: session.BaselineRunStart},
		{Op: session.ReasoningUpdate, RunID: runID, Model: "m1", Effort: "high"},
		{Op: session.ReasoningUpdate, RunID: runID, Model: "m2", Effort: "high"},
		{Op: session.ReasoningBaseline, RunID: runID, Model: "m2", Effort: "high", Reason: session.BaselineBoundary},
	}
	if d := cmp.Diff(want, selections(h.sess)); d != "" {
		t.Fatalf("reasoning records (-want +got):\n%s", d)
	}
	// An unchanged selection writes nothing; a second run with the same
	// pin writes no baseline.
	if err := h.agent.SetModel(m2); err != nil {
		t.Fatal(err)
	}
	h.srv.Enqueue(pt.Text("again"))
	drainWait(t, h.prompt("again", PromptOptions{}))
	if n := len(h.sess.ReasoningRecords()); n != len(want) {
		t.Errorf("%d reasoning records after an unchanged selection, want %d", n, len(want))
	}
	path := h.sess.Path()
	h.sess.Close()
	s2, err := session.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if sel, ok := s2.Selection(); !ok || sel.Model != "m2" || sel.Effort != "high" {
		t.Errorf("effective selection after reopen = %+v, %v", sel, ok)
	}
}

// drainWait drains r's events and returns its result.
func drainWait(t *testing.T, r *Run) RunResult {
	t.Helper()
	drain(t, r)
	return r.Wait()
}

// TestProviderConfigurationUpdateRejected: "Provider-authored opaque
// configuration updates are rejected." A response carrying an output
// item that claims to change the reasoning configuration fails the run
// closed: nothing of it is persisted, the selection and the ledger's
// reasoning records are unchanged, and the next request carries the
// host's selection.
func TestProviderConfigurationUpdateRejected(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{model: provider.Model{Name: "m1", Reasoning: true, Features: provider.FeatureReasoning}})
	if _, err := h.agent.SetReasoning("low"); err != nil {
		t.Fatal(err)
	}
	update := `{"type":"reasoning_configuration_update","id":"cu_1","reasoning":{"effort":"xhigh"},"model":"other"}`
	h.srv.Enqueue(pt.Events(
		[]byte(`{"type":"response.created","response":{"id":"r1"}}`),
		[]byte(`{"type":"response.output_item.done","output_index":0,"item":`+update+`}`),
		[]byte(`{"type":"response.completed","response":{"id":"r1","status":"completed","output":[`+update+`],"usage":{"input_tokens":3,"output_tokens":1,"total_tokens":4}}}`),
	))
	before := selections(h.sess)
	res := drainWait(t, h.prompt("go", PromptOptions{}))
	if res.Outcome != OutcomeFailed || res.Err == nil {
		t.Fatalf("run %+v, want failed", res)
	}
	for _, e := range entries(readFile(t, h.sess.Path())) {
		if e.str("type") == "assistant" {
			t.Fatalf("a configuration update was persisted: %v", e)
		}
	}
	after := selections(h.sess)
	if len(after) != len(before)+1 || after[len(after)-1].Op != session.ReasoningBaseline || after[len(after)-1].Effort != "low" {
		t.Fatalf("reasoning records changed beyond the run's baseline: %+v", after)
	}
	if h.agent.Reasoning() != "low" || h.agent.Model().Name != "m1" {
		t.Fatalf("selection now %s %s", h.agent.Model().Name, h.agent.Reasoning())
	}
	h.srv.Enqueue(pt.Text("fine"))
	drainWait(t, h.prompt("next", PromptOptions{}))
	reqs := h.srv.Requests()
	if eff, _ := reasoningOf(reqs[len(reqs)-1]); eff != "low" || reqs[len(reqs)-1].Body["model"] != "m1" {
		t.Fatalf("next request %v", reqs[len(reqs)-1].Body)
	}
}

// TestSelectionWriteFailureChangesNothing: a selection that cannot be
// recorded is not applied (the host reports the error).
func TestSelectionWriteFailureChangesNothing(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{model: provider.Model{Name: "m1", Reasoning: true, Features: provider.FeatureReasoning}})
	if _, err := h.agent.SetReasoning("low"); err != nil {
		t.Fatal(err)
	}
	h.sess.Close()
	if got, err := h.agent.SetReasoning("high"); err == nil || got != "low" {
		t.Fatalf("SetReasoning on a closed session = %q, %v", got, err)
	}
	if err := h.agent.SetModel(provider.Model{Name: "m2"}); err == nil || h.agent.Model().Name != "m1" {
		t.Fatalf("SetModel on a closed session: %v, model %s", err, h.agent.Model().Name)
	}
}

// TestCompactionRebasesThePin: "Successful local compaction rebases the
// retained prefix; failed compaction leaves the pin unchanged." A
// selection made while the summary request was failing is pinned by the
// successful compaction, in the compaction's own durable batch; a
// compaction that fails writes no baseline.
func TestCompactionRebasesThePin(t *testing.T) {
	checkLeaks(t)
	for _, succeed := range []bool{true, false} {
		hook := &retryOnceHook{}
		h := newHarness(t, harnessOpt{model: provider.Model{Name: "m1", Reasoning: true, Features: provider.FeatureReasoning}, retry: hook})
		if _, err := h.agent.SetReasoning("low"); err != nil {
			t.Fatal(err)
		}
		h.srv.Enqueue(pt.Text("earlier"))
		drainWait(t, h.prompt("question", PromptOptions{}))
		hook.failures = 0
		hook.setHook(func() {
			if _, err := h.agent.SetReasoning("high"); err != nil {
				t.Error(err)
			}
		})
		second := pt.Text("THE SUMMARY")
		if !succeed {
			second = pt.Text("cut").EOFAfter(1)
		}
		h.srv.Enqueue(pt.Text("cut").EOFAfter(1), second)
		r, err := h.agent.Compact(t.Context(), PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res := drainWait(t, r)
		recs := readFile(t, h.sess.Path())
		var batch, baselines []record
		for i, rec := range recs {
			if rec.str("kind") == session.KindReasoning && rec.str("op") == session.ReasoningBaseline {
				baselines = append(baselines, rec)
			}
			if rec.str("kind") == "entry" && rec.str("type") == "compaction" {
				batch = recs[i:]
			}
		}
		last := baselines[len(baselines)-1]
		if succeed {
			if res.Outcome != OutcomeCompleted || batch == nil {
				t.Fatalf("compaction run %+v", res)
			}
			var rebased bool
			for _, rec := range batch {
				rebased = rebased || (rec.str("kind") == session.KindReasoning && rec.str("reason") == session.BaselineCompaction && rec.str("effort") == "high")
				if rec["batch_of"] == nil && rec["batch"] == nil {
					break
				}
			}
			if !rebased {
				t.Fatalf("no rebased baseline in the compaction's batch: %v", batch)
			}
		} else {
			if res.Outcome != OutcomeFailed || batch != nil {
				t.Fatalf("failed compaction run %+v (compaction entry %v)", res, batch)
			}
			if last.str("effort") != "low" || last.str("reason") == session.BaselineCompaction {
				t.Fatalf("a failed compaction moved the pin: %v", last)
			}
		}
	}
}
