package agent

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// asyncModel grants every feature on the model side; the harness's
// endpoint grants them all too.
// asyncModel grants every feature but native compaction (its tests
// compact locally).
var asyncModel = provider.Model{Name: "async-model", ContextWindow: 400_000, MaxOutputTokens: 128_000, Features: provider.AllFeatures &^ provider.FeatureNativeCompaction}

// callsAndOutputs lists the call ids of a request's function_call items
// (with "async" when flagged) and of its function_call_output items.
func callsAndOutputs(req pt.Request) (calls, outputs []string) {
	for _, raw := range req.Input() {
		it := raw.(map[string]any)
		switch it["type"] {
		case "function_call":
			id := it["call_id"].(string)
			if it["async"] == true {
				id += "(async)"
			}
			calls = append(calls, id)
		case "function_call_output":
			outputs = append(outputs, it["call_id"].(string))
		}
	}
	return calls, outputs
}

// entryOrder is the session's entries as "type" or "tool_result:callID".
func entryOrder(t *testing.T, path string) string {
	var order []string
	for _, e := range entries(readFile(t, path)) {
		s := e.str("type")
		if s == "tool_result" {
			s += ":" + e.result().str("call_id")
		}
		order = append(order, s)
	}
	return strings.Join(order, " ")
}

// TestAsyncToolsOverlapTheNextResponse follows the seed: "only complete,
// durably committed calls from a wholly eligible batch enter the
// run-owned registry … Independent observations may overlap the next
// response; their results become durable in original call order after
// that response, which did not consume them." The parallel observation
// tool is advertised async; the next request goes out while both calls
// still run, carrying them as async calls without outputs; their results
// follow that response's entry in call order and reach the request after
// it.
func TestAsyncToolsOverlapTheNextResponse(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure, conc: tools.Parallel, gate: make(chan struct{})}
	h := newHarness(t, harnessOpt{model: asyncModel, extra: []tools.Tool{probe}})
	h.srv.Enqueue(
		pt.Reply(pt.Message("starting both"), pt.AsyncFunctionCall("a1", "probe", `{"n":1}`), pt.AsyncFunctionCall("a2", "probe", `{"n":2}`)),
		pt.Text("meanwhile, a plan"),
		pt.Text("both done"),
	)
	r := h.prompt("go", PromptOptions{})
	evs := drainLater(t, r)
	waitFor(t, func() bool { return len(h.srv.Requests()) >= 2 && probe.inside.Load() == 2 })
	if n := len(h.srv.Requests()); n != 2 {
		t.Fatalf("%d requests while the calls run, want 2", n)
	}
	close(probe.gate)
	<-evs
	reqs := h.completed(t, r.Wait())
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	var advertised bool
	for _, tool := range reqs[0].Body["tools"].([]any) {
		m := tool.(map[string]any)
		advertised = advertised || (m["name"] == "probe" && m["async"] == true)
		if m["name"] != "probe" && m["async"] == true {
			// Only statically parallel tools are advertised async.
			if tl, ok := h.agent.cfg.Host.Lookup(m["name"].(string)); ok && tl.Concurrency() != tools.Parallel {
				t.Errorf("tool %v advertised async", m["name"])
			}
		}
	}
	if !advertised {
		t.Errorf("the parallel observation tool was not advertised async: %v", reqs[0].Body["tools"])
	}
	calls, outputs := callsAndOutputs(reqs[1])
	if strings.Join(calls, " ") != "a1(async) a2(async)" || len(outputs) != 0 {
		t.Errorf("the overlapping request carries calls %v and outputs %v, want both async calls without outputs", calls, outputs)
	}
	if _, outputs := callsAndOutputs(reqs[2]); strings.Join(outputs, " ") != "a1 a2" {
		t.Errorf("the request after it carries outputs %v, want a1 a2", outputs)
	}
	if got := entryOrder(t, h.sess.Path()); got != "user assistant assistant tool_result:a1 tool_result:a2 assistant" {
		t.Errorf("entries %s", got)
	}
	checkDurableEnd(t, h.sess.Path(), OutcomeCompleted)
}

// TestAsyncToolsBarriers: "Sync, effectful, mixed, and nonparallel
// batches remain barriers … Hard cumulative ceilings serialize tool
// accounting." Each of these runs the batch before the next request
// (its outputs are in it), as every batch does; a route that does not
// grant async tools does not advertise them, and a model's async flag
// there grants nothing.
func TestAsyncToolsBarriers(t *testing.T) {
	mutation := &probeTool{name: "mutate", effect: tools.WorkspaceMutation, conc: tools.Parallel}
	cases := []struct {
		name  string
		calls []pt.Output
		opt   func(*harnessOpt)
		noAd  bool // async must not be advertised
	}{
		{name: "effectful", calls: []pt.Output{pt.AsyncFunctionCall("a1", "probe", `{"n":1}`), pt.AsyncFunctionCall("a2", "mutate", `{"n":2}`)}},
		{name: "mixed", calls: []pt.Output{pt.AsyncFunctionCall("a1", "probe", `{"n":1}`), pt.FunctionCall("a2", "probe", `{"n":2}`)}},
		{name: "nonparallel", calls: []pt.Output{pt.AsyncFunctionCall("a1", "probe", `{"n":1}`), pt.AsyncFunctionCall("a2", "seq", `{"n":2}`)}},
		{name: "too many", calls: []pt.Output{pt.AsyncFunctionCall("a1", "probe", `{"n":1}`), pt.AsyncFunctionCall("a2", "probe", `{"n":2}`),
			pt.AsyncFunctionCall("a3", "probe", `{"n":3}`), pt.AsyncFunctionCall("a4", "probe", `{"n":4}`), pt.AsyncFunctionCall("a5", "probe", `{"n":5}`)}},
		{name: "ordinary route", noAd: true, calls: []pt.Output{pt.AsyncFunctionCall("a1", "probe", `{"n":1}`)}, opt: func(o *harnessOpt) {
			e := provider.AllFeatures &^ provider.FeatureAsyncTools
			o.endpoint = &e
		}},
		{name: "hard ceiling", noAd: true, calls: []pt.Output{pt.AsyncFunctionCall("a1", "probe", `{"n":1}`)}, opt: func(o *harnessOpt) {
			o.retry = NewCodexRecovery(RecoveryConfig{Budget: &Budget{Ceilings: Ceilings{MaxTokens: 1_000_000}}})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			probe := &probeTool{name: "probe", effect: tools.Pure, conc: tools.Parallel}
			seq := &probeTool{name: "seq", effect: tools.Pure}
			o := harnessOpt{model: asyncModel, extra: []tools.Tool{probe, seq, mutation}, policy: tools.UnsafeHost}
			if c.opt != nil {
				c.opt(&o)
			}
			h := newHarness(t, o)
			h.srv.Enqueue(pt.Reply(c.calls...), pt.Text("done"))
			reqs := h.completed(t, drainWait(t, h.prompt("go", PromptOptions{})))
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			_, outputs := callsAndOutputs(reqs[1])
			if len(outputs) != len(c.calls) {
				t.Errorf("the next request carries %d outputs, want all %d (a barrier)", len(outputs), len(c.calls))
			}
			if c.noAd {
				b, _ := json.Marshal(reqs[0].Body["tools"])
				if strings.Contains(string(b), `"async"`) {
					t.Errorf("async tools advertised: %s", b)
				}
			}
		})
	}
}

// TestAsyncCallAfterCrashIsIndeterminate: "Unresolved async calls after a
// crash receive indeterminate paired errors, never automatic
// redispatch, even for replay-safe observations." The same call not
// marked async is replayed (it is a replay-safe workspace read).
func TestAsyncCallAfterCrashIsIndeterminate(t *testing.T) {
	for _, async := range []bool{true, false} {
		probe := &probeTool{name: "probe", effect: tools.WorkspaceRead, conc: tools.Parallel, replay: tools.ReplaySafe}
		h := newHarness(t, harnessOpt{model: asyncModel, extra: []tools.Tool{probe}})
		if _, err := h.sess.AppendEntry(session.Entry{Type: session.EntryUser, Text: "go"}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.sess.AppendEntry(session.Entry{Type: session.EntryAssistant, Items: []session.Item{
			{Type: session.ItemFunctionCall, CallID: "a1", Name: "probe", Arguments: `{"n":1}`, Async: async},
		}}); err != nil {
			t.Fatal(err)
		}
		if _, err := New(h.agent.cfg); err != nil { // the reopened process resolves leftovers
			t.Fatal(err)
		}
		res := resultFor(readFile(t, h.sess.Path()), "a1").result()
		details, _ := res["details"].(map[string]any)
		want, ran := "replayed", int32(1)
		if async {
			want, ran = "indeterminate", 0
		}
		if details["crash_recovery"] != want || probe.executed.Load() != ran {
			t.Errorf("async %v: crash_recovery %v, executed %d; want %s, %d", async, details["crash_recovery"], probe.executed.Load(), want, ran)
		}
	}
}

// TestAsyncJobsSettleAtRunEnd: "Driven terminals cancel and settle jobs."
// A run cancelled while its async calls run (and the next response is
// pending) ends with each call's own result durable, one tool_finished
// each, and its single checkpoint.
func TestAsyncJobsSettleAtRunEnd(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure, conc: tools.Parallel, gate: make(chan struct{})}
	h := newHarness(t, harnessOpt{model: asyncModel, extra: []tools.Tool{probe}})
	h.srv.Enqueue(pt.Reply(pt.AsyncFunctionCall("a1", "probe", `{"n":1}`), pt.AsyncFunctionCall("a2", "probe", `{"n":2}`)), pt.Stall())
	r := h.prompt("go", PromptOptions{})
	evs := drainLater(t, r)
	waitFor(t, func() bool { return len(h.srv.Requests()) == 2 && probe.inside.Load() == 2 })
	r.Cancel()
	got := <-evs
	checkRunEvents(t, got, OutcomeCancelled)
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
	for _, id := range []string{"a1", "a2"} {
		if res := resultFor(recs, id).result(); res.str("text") != "cancelled" {
			t.Errorf("call %s: result %v, want the tool's own (cancelled)", id, res)
		}
	}
	finished := 0
	for _, e := range got {
		if _, ok := e.(*ToolFinished); ok {
			finished++
		}
	}
	if finished != 2 {
		t.Errorf("%d tool_finished events, want 2", finished)
	}
}

// TestAsyncJobsDisableCompaction: "pending jobs disable compaction". The
// request that overlaps the async calls is past the compaction threshold
// but is sent uncompacted (the calls' results are not on the branch
// yet); once they are, the next request compacts first.
func TestAsyncJobsDisableCompaction(t *testing.T) {
	checkLeaks(t)
	small := asyncModel
	small.ContextWindow = 36_000 // past the threshold once a response reports 20000 tokens
	probe := &probeTool{name: "probe", effect: tools.Pure, conc: tools.Parallel}
	h := newHarness(t, harnessOpt{model: small, extra: []tools.Tool{probe}})
	big := provider.Usage{InputTokens: 20_000, OutputTokens: 10}
	h.srv.Enqueue(
		pt.Reply(pt.AsyncFunctionCall("a1", "probe", `{"n":1}`)).WithUsage(big),
		pt.Text("meanwhile").WithUsage(big),
		pt.Text("THE SUMMARY"),
		pt.Text("done"),
	)
	// A prompt the verbatim tail cannot keep (its budget is 7200 tokens
	// here), so a compaction has something to summarize.
	reqs := h.completed(t, drainWait(t, h.prompt(strings.Repeat("word ", 8000), PromptOptions{})))
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	isSummary := func(q pt.Request) bool { return q.Body["instructions"] == compactionInstructions }
	if isSummary(reqs[1]) {
		t.Errorf("a compaction ran while the async call was pending")
	}
	if calls, outputs := callsAndOutputs(reqs[1]); len(calls) != 1 || len(outputs) != 0 {
		t.Errorf("the overlapping request: calls %v outputs %v", calls, outputs)
	}
	if !isSummary(reqs[2]) {
		t.Errorf("no compaction once the results were durable: request 3 is %v", reqs[2].Body["instructions"])
	}
}

// flipTool classifies its first call as Pure and every later one as a
// workspace mutation: a classification that changes between the cheap
// static check and admission.
type flipTool struct {
	probeTool
	seen atomic.Int32
}

func (f *flipTool) Classify(json.RawMessage) (tools.Effect, error) {
	if f.seen.Add(1) == 1 {
		return tools.Pure, nil
	}
	return tools.WorkspaceMutation, nil
}

// TestAsyncAdmissionDecides: eligibility is decided by admission, not
// the static check alone. A call the static check saw as an observation
// but the broker admitted as a mutation makes its batch a barrier: its
// result is in the very next request.
func TestAsyncAdmissionDecides(t *testing.T) {
	checkLeaks(t)
	flip := &flipTool{probeTool: probeTool{name: "flip", conc: tools.Parallel}}
	h := newHarness(t, harnessOpt{model: asyncModel, extra: []tools.Tool{flip}, policy: tools.UnsafeHost})
	h.srv.Enqueue(pt.Reply(pt.AsyncFunctionCall("f1", "flip", `{"n":1}`)), pt.Text("done"))
	reqs := h.completed(t, drainWait(t, h.prompt("go", PromptOptions{})))
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if _, outputs := callsAndOutputs(reqs[1]); len(outputs) != 1 {
		t.Errorf("the call admitted as a mutation overlapped the next request (outputs %v)", outputs)
	}
}
