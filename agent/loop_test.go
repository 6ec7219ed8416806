package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

func TestTextRunPersistsAssistantUsageAndCheckpoint(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	h.srv.Enqueue(pt.Reply(pt.Reasoning("enc-1", "thinking about it"), pt.Message("hello there world")).
		WithUsage(provider.Usage{InputTokens: 120, CachedTokens: 20, OutputTokens: 7, ReasoningTokens: 3}))
	r := h.prompt("hi", PromptOptions{})
	evs := drain(t, r)
	checkRunEvents(t, evs, OutcomeCompleted)
	res := r.Wait()
	if res.Outcome != OutcomeCompleted || res.Err != nil {
		t.Fatalf("result %+v", res)
	}
	if res.Usage.Input != 120 || res.Usage.CachedInput != 20 || res.Usage.Output != 7 || res.Usage.Reasoning != 3 || !res.Usage.Complete || res.Usage.Requests != 1 {
		t.Fatalf("usage %+v", res.Usage)
	}
	var text strings.Builder
	var committed, usage int
	for _, e := range evs {
		switch e := e.(type) {
		case *OutputDelta:
			if e.Channel == ChannelText {
				text.WriteString(e.Text)
			}
		case *AssistantCommitted:
			committed++
		case *Usage:
			usage++
			if !e.Complete || e.Input != 120 {
				t.Errorf("usage event %+v", e)
			}
		}
	}
	if text.String() != "hello there world" || committed != 1 || usage != 1 {
		t.Fatalf("text %q committed %d usage %d", text.String(), committed, usage)
	}
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeCompleted)
	es := entries(recs)
	if len(es) != 2 || es[0].str("type") != "user" || es[1].str("type") != "assistant" {
		t.Fatalf("entries %v", es)
	}
	items := es[1]["items"].([]any)
	rs := items[0].(map[string]any)
	if rs["type"] != "reasoning" || rs["encrypted_content"] != "enc-1" || rs["text"] != "thinking about it" {
		t.Fatalf("reasoning item %v", rs)
	}
	// The usage record follows the assistant entry in the same batch and
	// names the request.
	var u record
	for i, rec := range recs {
		if rec.str("kind") == "usage" {
			u = rec
			if recs[i-1].str("kind") != "entry" || recs[i-1].str("type") != "assistant" {
				t.Fatalf("usage not right after the assistant entry")
			}
		}
	}
	if u == nil || u.str("request_id") == "" || u["input"].(float64) != 120 {
		t.Fatalf("usage record %v", u)
	}
	// The request replayed the prompt with the instructions.
	reqs := h.srv.Requests()
	if len(reqs) != 1 || reqs[0].Body["instructions"] != "You are a test agent." {
		t.Fatalf("requests %v", reqs)
	}
	if got := inputTypes(reqs[0]); len(got) != 1 || got[0] != "message:user" {
		t.Fatalf("input %v", got)
	}
}

// TestOrderingReadsFileAtEachStep reads the session file from inside each
// tool execution: the complete assistant record is there before the first
// tool runs, and every earlier call's result is there before the next one
// starts. Streamed deltas never become records.
func TestOrderingReadsFileAtEachStep(t *testing.T) {
	checkLeaks(t)
	var h *harness
	probe := &probeTool{name: "probe", effect: tools.Pure}
	probe.path = func() string { return h.sess.Path() }
	h = newHarness(t, harnessOpt{extra: []tools.Tool{probe}, policy: tools.UnsafeHost})
	h.writeFile("a.txt", "alpha\n")
	h.srv.Enqueue(
		pt.Reply(pt.Message("let me look at several things"),
			pt.FunctionCall("c1", "probe", `{"n":1}`),
			pt.FunctionCall("c2", "write", `{"path":"b.txt","content":"beta\n"}`),
			pt.FunctionCall("c3", "probe", `{"n":3}`),
			pt.FunctionCall("c4", "read", `{"path":"b.txt"}`),
		),
		pt.Text("all done"),
	)
	r := h.prompt("go", PromptOptions{})
	evs := drain(t, r)
	checkRunEvents(t, evs, OutcomeCompleted)
	if len(probe.seen) != 2 {
		t.Fatalf("probe ran %d times", len(probe.seen))
	}
	first, second := probe.seen[0], probe.seen[1]
	asst := func(recs []record) record {
		for _, e := range entries(recs) {
			if e.str("type") == "assistant" {
				return e
			}
		}
		return nil
	}
	for i, snap := range probe.seen {
		a := asst(snap)
		if a == nil || len(a["items"].([]any)) != 5 {
			t.Fatalf("execution %d: complete assistant record not durable before the tool ran: %v", i, a)
		}
	}
	if resultFor(first, "c1") != nil || resultFor(first, "c2") != nil {
		t.Fatalf("first probe saw results that should not exist yet")
	}
	if resultFor(second, "c1") == nil || resultFor(second, "c2") == nil || resultFor(second, "c3") != nil {
		t.Fatalf("second probe: earlier results must be durable, its own not: %v", entries(second))
	}
	if h.readWS("b.txt") != "beta\n" {
		t.Fatalf("write did not happen")
	}
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeCompleted)
	// File order: user, assistant, results c1..c4 in call order, assistant.
	var order []string
	for _, e := range entries(recs) {
		s := e.str("type")
		if s == "tool_result" {
			s += ":" + e.result().str("call_id")
		}
		order = append(order, s)
	}
	want := "user assistant tool_result:c1 tool_result:c2 tool_result:c3 tool_result:c4 assistant"
	if strings.Join(order, " ") != want {
		t.Fatalf("entry order %v", order)
	}
	if rd := resultFor(recs, "c4"); !strings.Contains(rd.result().str("text"), "beta") {
		t.Fatalf("read result %v", rd)
	}
	// Deltas never reach the file: every line is a known record kind.
	for _, rec := range recs {
		switch rec.str("kind") {
		case "header", "entry", "usage", "checkpoint", "dispatch", "dispatch_settled":
		default:
			t.Fatalf("unexpected record %v", rec)
		}
	}
	// Event order per call: tool_started < tool_policy_decision < tool_finished,
	// all after assistant_committed.
	pos := map[string]int{}
	for i, e := range evs {
		switch e := e.(type) {
		case *AssistantCommitted:
			if _, ok := pos["commit"]; !ok {
				pos["commit"] = i
			}
		case *ToolStarted:
			pos["start:"+e.CallID] = i
		case *ToolPolicyDecision:
			pos["dec:"+e.CallID] = i
			if e.Decision != tools.DecisionAllowed {
				t.Errorf("decision %+v", e)
			}
		case *ToolFinished:
			pos["fin:"+e.CallID] = i
		}
	}
	for _, c := range []string{"c1", "c2", "c3", "c4"} {
		if !(pos["commit"] < pos["start:"+c] && pos["start:"+c] < pos["dec:"+c] && pos["dec:"+c] < pos["fin:"+c]) {
			t.Fatalf("event order for %s: %v", c, pos)
		}
	}
	// The second request replays the calls and their outputs in order.
	reqs := h.srv.Requests()
	got := strings.Join(inputTypes(reqs[1]), " ")
	if got != "message:user message:assistant function_call function_call function_call function_call function_call_output function_call_output function_call_output function_call_output" {
		t.Fatalf("second request input %s", got)
	}
}

// TestInterruptedStreamNeverReachesFile: a dropped stream's partial text is
// provisional; the run fails cleanly (default policy: no retry) with a
// durable usage-uncertainty marker because the request was dispatched.
func TestInterruptedStreamNeverReachesFile(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	turn := pt.Text("PARTIALMARKER one two three four five six")
	h.srv.Enqueue(turn.DropAfter(8))
	r := h.prompt("hi", PromptOptions{})
	evs := drain(t, r)
	fin := checkRunEvents(t, evs, OutcomeFailed)
	if fin.Error == "" {
		t.Fatal("failed run without error text")
	}
	sawDelta := false
	for _, e := range evs {
		if d, ok := e.(*OutputDelta); ok && strings.Contains(d.Text, "PARTIALMARKER") {
			sawDelta = true
		}
	}
	if !sawDelta {
		t.Fatal("the partial text was not streamed as a delta")
	}
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeFailed)
	raw, _ := json.Marshal(recs)
	if strings.Contains(string(raw), "PARTIALMARKER") {
		t.Fatal("provisional text reached the session file")
	}
	if count(recs, "usage_uncertain") != 1 || count(recs, "usage") != 0 {
		t.Fatalf("want one usage_uncertain and no usage: %v", recs)
	}
	if !kindSeen(evs, KindProviderUsageUncertain) {
		t.Fatal("no provider_usage_uncertain event")
	}
	if res := r.Wait(); res.Err == nil || res.Usage.Complete {
		t.Fatalf("result %+v", res)
	}
}

func kindSeen(evs []Event, kind string) bool {
	for _, e := range evs {
		if e.Kind() == kind {
			return true
		}
	}
	return false
}

// TestInvalidArgumentsNeverReachTool: schema-invalid calls get the static
// invalid_tool_arguments error without classification or execution.
func TestInvalidArgumentsNeverReachTool(t *testing.T) {
	checkLeaks(t)
	classified := 0
	probe := &probeTool{name: "probe", effect: tools.Pure}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{&countingClassify{probeTool: probe, n: &classified}}})
	h.srv.Enqueue(
		pt.Reply(
			pt.FunctionCall("bad1", "probe", `{"n":"not a number"}`),
			pt.FunctionCall("bad2", "probe", `{"n":1,"extra":true}`),
			pt.FunctionCall("bad3", "probe", `not json`),
			pt.FunctionCall("unk", "nosuchtool", `{}`),
			pt.FunctionCall("ok", "probe", `{"n":2}`),
		),
		pt.Text("done"),
	)
	evs := drain(t, h.prompt("go", PromptOptions{}))
	checkRunEvents(t, evs, OutcomeCompleted)
	if probe.executed.Load() != 1 || classified != 1 {
		t.Fatalf("executed %d classified %d, want 1 and 1 (only the valid call)", probe.executed.Load(), classified)
	}
	recs := readFile(t, h.sess.Path())
	for _, id := range []string{"bad1", "bad2", "bad3"} {
		res := resultFor(recs, id).result()
		if res["is_error"] != true || res.str("text") != tools.DenialText(tools.ReasonInvalidArguments) {
			t.Fatalf("%s result %v", id, res)
		}
	}
	if res := resultFor(recs, "unk").result(); res.str("text") != tools.DenialText(tools.ReasonUnknownTool) {
		t.Fatalf("unknown tool result %v", res)
	}
	reasons := map[string]string{}
	for _, e := range evs {
		if d, ok := e.(*ToolPolicyDecision); ok {
			reasons[d.CallID] = d.Reason
		}
	}
	if reasons["bad1"] != tools.ReasonInvalidArguments || reasons["ok"] != tools.ReasonPolicyAdmitted {
		t.Fatalf("decisions %v", reasons)
	}
}

// countingClassify counts Classify calls of a probe.
type countingClassify struct {
	*probeTool
	n *int
}

func (c *countingClassify) Classify(a json.RawMessage) (tools.Effect, error) {
	*c.n++
	return c.probeTool.Classify(a)
}

// TestCallLimitPerTurn: calls beyond 32 are paired with errors, never run.
func TestCallLimitPerTurn(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}})
	var outs []pt.Output
	for i := range 40 {
		outs = append(outs, pt.FunctionCall(fmt.Sprintf("c%02d", i), "probe", fmt.Sprintf(`{"n":%d}`, i)))
	}
	h.srv.Enqueue(pt.Reply(outs...), pt.Text("done"))
	drain(t, h.prompt("go", PromptOptions{}))
	if got := probe.executed.Load(); got != 32 {
		t.Fatalf("executed %d calls, want 32", got)
	}
	recs := readFile(t, h.sess.Path())
	for i := range 40 {
		res := resultFor(recs, fmt.Sprintf("c%02d", i)).result()
		if (i >= 32) != (res.str("text") == textTooManyCalls) {
			t.Fatalf("call %d result %v", i, res)
		}
	}
}

// TestPanickingToolBecomesErrorResult: a tool panic is a failed result, the
// run goes on and completes.
func TestPanickingToolBecomesErrorResult(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure, panicOn: "boom"}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("boom", "probe", `{"n":1}`), pt.FunctionCall("after", "probe", `{"n":2}`)), pt.Text("done"))
	evs := drain(t, h.prompt("go", PromptOptions{}))
	checkRunEvents(t, evs, OutcomeCompleted)
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeCompleted)
	if res := resultFor(recs, "boom").result(); res["is_error"] != true {
		t.Fatalf("panic result %v", res)
	}
	if res := resultFor(recs, "after").result(); res["is_error"] == true {
		t.Fatalf("call after the panic %v", res)
	}
}

// TestMaxOutputTruncatedCalls: a response that stops at max_output_tokens
// while emitting calls persists the envelope, pairs every call with a
// synthetic error without executing it and asks for complete arguments.
func TestMaxOutputTruncatedCalls(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}})
	h.srv.Enqueue(
		pt.Incomplete("max_output_tokens", pt.FunctionCall("t1", "probe", `{"n":1}`), pt.FunctionCall("t2", "probe", `{"n":`)),
		pt.Reply(pt.FunctionCall("t3", "probe", `{"n":3}`)),
		pt.Text("done"),
	)
	evs := drain(t, h.prompt("go", PromptOptions{}))
	checkRunEvents(t, evs, OutcomeCompleted)
	if probe.executed.Load() != 1 {
		t.Fatalf("executed %d, want only the reissued call", probe.executed.Load())
	}
	recs := readFile(t, h.sess.Path())
	var asst record
	for _, e := range entries(recs) {
		if e.str("type") == "assistant" {
			asst = e
			break
		}
	}
	if asst.str("stop_reason") != "max_output_tokens" {
		t.Fatalf("envelope %v", asst)
	}
	for _, id := range []string{"t1", "t2"} {
		if res := resultFor(recs, id).result(); res.str("text") != textTruncatedCall || res["is_error"] != true {
			t.Fatalf("%s: %v", id, res)
		}
	}
	req := h.srv.Requests()[1]
	if !strings.Contains(inputText(req), "Reissue the tool calls") {
		t.Fatalf("no corrective continuation in %s", inputText(req))
	}
}

// TestMaxTurns ends a run that keeps calling tools.
func TestMaxTurns(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}, maxTurns: 2})
	for i := range 3 {
		h.srv.Enqueue(pt.Reply(pt.FunctionCall(fmt.Sprintf("m%d", i), "probe", `{"n":1}`)))
	}
	r := h.prompt("loop", PromptOptions{})
	checkRunEvents(t, drain(t, r), OutcomeMaxTurns)
	checkDurableEnd(t, h.sess.Path(), OutcomeMaxTurns)
	if n := len(h.srv.Requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

// TestWithoutToolsIsStickyToolFree: no schemas, tool_choice none, and a
// call the model emits anyway is paired with an error, never executed.
func TestWithoutToolsIsStickyToolFree(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("x", "probe", `{"n":1}`)), pt.Text("ok"))
	evs := drain(t, h.prompt("answer only", PromptOptions{WithoutTools: true}))
	checkRunEvents(t, evs, OutcomeCompleted)
	if probe.executed.Load() != 0 {
		t.Fatal("tool executed in a tool-free run")
	}
	for i, req := range h.srv.Requests() {
		if _, ok := req.Body["tools"]; ok || req.Body["tool_choice"] != "none" {
			t.Fatalf("request %d: tools %v tool_choice %v", i, req.Body["tools"], req.Body["tool_choice"])
		}
	}
	if res := resultFor(readFile(t, h.sess.Path()), "x").result(); res.str("text") != textToolsDisabled {
		t.Fatalf("result %v", res)
	}
}

// TestPromptWhileBusy: one run at a time.
func TestPromptWhileBusy(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	h.srv.Enqueue(pt.Stall())
	r := h.prompt("one", PromptOptions{})
	if _, err := h.agent.Prompt(context.Background(), "two", PromptOptions{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("second prompt: %v", err)
	}
	waitFor(t, func() bool { return len(h.srv.Requests()) == 1 })
	r.Cancel()
	checkRunEvents(t, drain(t, r), OutcomeCancelled)
	h.srv.Enqueue(pt.Text("fine"))
	r2 := h.prompt("three", PromptOptions{})
	checkRunEvents(t, drain(t, r2), OutcomeCompleted)
	if n := len(checkpoints(readFile(t, h.sess.Path()))); n != 2 {
		t.Fatalf("%d checkpoints, want 2", n)
	}
}

// TestEventJSON: fields sit beside "kind"; maxAttempts/operation are null.
func TestEventJSON(t *testing.T) {
	cases := []struct {
		ev   Event
		want string
	}{
		{&OutputDelta{Channel: "text", Text: "hi"}, `{"kind":"output_delta","channel":"text","text":"hi"}`},
		{&RunFinished{Outcome: OutcomeCancelled}, `{"kind":"run_finished","outcome":"cancelled"}`},
		{&ProviderRetry{Attempt: 1, DelayMs: 5000, RetryKind: RetryWaitingForNetwork, Reason: "x", Cause: "the network is unavailable: network is unreachable"},
			`{"kind":"provider_retry","attempt":1,"maxAttempts":null,"delayMs":5000,"retryKind":"waiting_for_network","operation":null,"reason":"x","cause":"the network is unavailable: network is unreachable","giveUpInMs":null}`},
		{&AssistantCommitted{EntryID: "e1"}, `{"kind":"assistant_committed","entryId":"e1"}`},
		{&ToolFinished{CallID: "c", IsError: false}, `{"kind":"tool_finished","callId":"c","isError":false}`},
		{&TurnFinished{Turn: 2}, `{"kind":"turn_finished","turn":2}`},
	}
	for _, c := range cases {
		b, err := MarshalEvent(c.ev)
		if err != nil || string(b) != c.want {
			t.Errorf("%s: got %s (%v), want %s", c.ev.Kind(), b, err, c.want)
		}
	}
	d := &ToolPolicyDecision{CallID: "c", Decision: "allowed", EffectiveToolPolicy: tools.DefaultToolPolicy(tools.Controlled, tools.ShellSystemBash)}
	b, _ := MarshalEvent(d)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["kind"] != KindToolPolicyDecision || m["effectiveToolPolicy"] == nil {
		t.Fatalf("decision JSON %s", b)
	}
}

// TestSetModelAndReasoningApplyAtNextRequest: idle setters apply to the
// next request; unknown efforts change nothing.
func TestSetModelAndReasoningApplyAtNextRequest(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{model: provider.Model{Name: "m1", Reasoning: true, Features: provider.FeaturePromptCacheKey}})
	if got := h.agent.SetReasoning("high"); got != "high" {
		t.Fatalf("effective %q", got)
	}
	if got := h.agent.SetReasoning("turbo"); got != "high" {
		t.Fatalf("unknown effort changed the selection to %q", got)
	}
	h.srv.Enqueue(pt.Text("a"), pt.Text("b"))
	checkRunEvents(t, drain(t, h.prompt("one", PromptOptions{})), OutcomeCompleted)
	h.agent.SetModel(provider.Model{Name: "m2"})
	checkRunEvents(t, drain(t, h.prompt("two", PromptOptions{})), OutcomeCompleted)
	reqs := h.srv.Requests()
	r0, _ := reqs[0].Body["reasoning"].(map[string]any)
	if reqs[0].Body["model"] != "m1" || r0["effort"] != "high" || reqs[0].Body["prompt_cache_key"] != h.sess.Header().ID {
		t.Fatalf("first request %v", reqs[0].Body)
	}
	if _, ok := reqs[1].Body["reasoning"]; ok || reqs[1].Body["model"] != "m2" {
		t.Fatalf("second request (model without reasoning) %v", reqs[1].Body)
	}
}

// TestUnreplayableOutputFailsClosed: a response octet could never replay
// (a custom tool call, a duplicated call id) fails the run without
// persisting the assistant message or running anything.
func TestUnreplayableOutputFailsClosed(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("d", "probe", `{"n":1}`), pt.FunctionCall("d", "probe", `{"n":2}`)))
	checkRunEvents(t, drain(t, h.prompt("one", PromptOptions{})), OutcomeFailed)
	h.srv.Enqueue(pt.Reply(pt.CustomToolCall("x", "probe", "raw")))
	checkRunEvents(t, drain(t, h.prompt("two", PromptOptions{})), OutcomeFailed)
	if probe.executed.Load() != 0 {
		t.Fatal("a call of an unreplayable response ran")
	}
	for _, e := range entries(readFile(t, h.sess.Path())) {
		if e.str("type") == "assistant" {
			t.Fatalf("unreplayable response persisted: %v", e)
		}
	}
	// The session is still usable.
	h.srv.Enqueue(pt.Text("fine"))
	checkRunEvents(t, drain(t, h.prompt("three", PromptOptions{})), OutcomeCompleted)
}

// TestPersistenceFailureFailsRun: when the session can no longer be
// written the run fails, still emits exactly one run_finished, and Wait
// reports the error.
func TestPersistenceFailureFailsRun(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure, gate: make(chan struct{})}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("a", "probe", `{"n":1}`)), pt.Text("never"))
	r := h.prompt("go", PromptOptions{})
	waitFor(t, func() bool { return probe.inside.Load() == 1 })
	if err := h.sess.Close(); err != nil {
		t.Fatal(err)
	}
	close(probe.gate)
	fin := checkRunEvents(t, drain(t, r), OutcomeFailed)
	if res := r.Wait(); res.Err == nil || fin.Error == "" {
		t.Fatalf("result %+v", res)
	}
}

// TestCallerContextCancelsRun: cancelling Prompt's ctx is the same abort.
func TestCallerContextCancelsRun(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure, gate: make(chan struct{})}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("a", "probe", `{"n":1}`)))
	ctx, cancel := context.WithCancel(context.Background())
	r, err := h.agent.Prompt(ctx, "go", PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return probe.inside.Load() == 1 })
	cancel()
	checkRunEvents(t, drain(t, r), OutcomeCancelled)
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
	if res := resultFor(recs, "a").result(); res.str("text") != "cancelled" {
		t.Fatalf("running tool's own result %v", res)
	}
}

// TestReplayedRequestMatchesResponsesWire checks the next request's input
// item by item as the Responses API needs it with store:false: the
// reasoning item with its encrypted_content before the function calls it
// produced, the assistant text as an output_text part, a
// function_call_output for every call, and a tool result bounded to the
// broker's model-visible limit however large the tool's output.
func TestReplayedRequestMatchesResponsesWire(t *testing.T) {
	checkLeaks(t)
	huge := strings.Repeat("x", 3*tools.DefaultMaxResultBytes)
	probe := &probeTool{name: "probe", effect: tools.Pure, onExec: func(context.Context, tools.Invocation) (tools.Result, error) {
		return tools.Result{Text: huge}, nil
	}}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}, policy: tools.UnsafeHost, model: provider.Model{
		Name: "scripted", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true,
		Features: provider.FeatureParallelToolCalls | provider.FeatureEncryptedReasoning,
	}})
	h.agent.SetReasoning("high")
	h.srv.Enqueue(
		pt.Reply(pt.Reasoning("enc-r1", "plan the calls"), pt.Message("checking"),
			pt.FunctionCall("c1", "probe", `{"n":1}`), pt.FunctionCall("c2", "nosuchtool", `{}`)),
		pt.Text("done"),
	)
	checkRunEvents(t, drain(t, h.prompt("go", PromptOptions{})), OutcomeCompleted)
	reqs := h.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if inc, _ := json.Marshal(reqs[1].Body["include"]); string(inc) != `["reasoning.encrypted_content"]` || reqs[1].Body["store"] != false {
		t.Fatalf("include %s store %v", inc, reqs[1].Body["store"])
	}
	in := reqs[1].Input()
	if got := strings.Join(inputTypes(reqs[1]), " "); got != "message:user reasoning message:assistant function_call function_call function_call_output function_call_output" {
		t.Fatalf("input %s", got)
	}
	item := func(i int) map[string]any { return in[i].(map[string]any) }
	for i := range in {
		if _, ok := item(i)["id"]; ok { // store:false: an item id is "not found"
			t.Fatalf("input item %d carries an id: %v", i, item(i))
		}
	}
	rs := item(1)
	sum, _ := rs["summary"].([]any)
	if rs["encrypted_content"] != "enc-r1" || len(sum) != 1 || sum[0].(map[string]any)["type"] != "summary_text" || sum[0].(map[string]any)["text"] != "plan the calls" {
		t.Fatalf("reasoning item %v", rs)
	}
	content, _ := item(2)["content"].([]any)
	if len(content) != 1 || content[0].(map[string]any)["type"] != "output_text" || content[0].(map[string]any)["text"] != "checking" {
		t.Fatalf("assistant message %v", item(2))
	}
	if c := item(3); c["call_id"] != "c1" || c["name"] != "probe" || c["arguments"] != `{"n":1}` {
		t.Fatalf("function_call %v", c)
	}
	out1, out2 := item(5), item(6)
	if out1["call_id"] != "c1" || out2["call_id"] != "c2" {
		t.Fatalf("outputs %v %v", out1["call_id"], out2["call_id"])
	}
	text, _ := out1["output"].(string)
	if len(text) > tools.DefaultMaxResultBytes+1024 || !strings.HasPrefix(text, "xxxx") {
		t.Fatalf("tool result not bounded: %d bytes", len(text))
	}
	if s, _ := out2["output"].(string); s == "" || strings.Contains(s, "nosuchtool") {
		t.Fatalf("unknown tool output %q", s)
	}
}

// panickingRetry is a retry policy with a bug: Decide panics.
type panickingRetry struct{}

func (panickingRetry) Decide(Failure) RetryDecision { panic("policy bug") }
func (panickingRetry) TurnCompleted()               {}

// TestLoopPanicFailsWithCheckpoint: a panic inside the loop itself (here
// the retry seam) ends the run failed, with its one checkpoint and one
// run_finished, and releases the agent.
func TestLoopPanicFailsWithCheckpoint(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{retry: panickingRetry{}})
	h.srv.Enqueue(pt.Text("cut short").DropAfter(4), pt.Text("fine"))
	r := h.prompt("go", PromptOptions{})
	fin := checkRunEvents(t, drain(t, r), OutcomeFailed)
	if !strings.Contains(fin.Error, "panicked") {
		t.Fatalf("run_finished error %q", fin.Error)
	}
	checkDurableEnd(t, h.sess.Path(), OutcomeFailed)
	if h.agent.Active() != nil {
		t.Fatal("agent still busy")
	}
}

// TestTruncatedCallsInToolFreeRun: a tool-free run whose response stops at
// the output limit while emitting a call gets the tools-disabled error and
// no corrective continuation (it must not be asked to reissue tool calls).
func TestTruncatedCallsInToolFreeRun(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}})
	h.srv.Enqueue(pt.Incomplete("max_output_tokens", pt.FunctionCall("t1", "probe", `{"n":1}`)), pt.Text("done"))
	checkRunEvents(t, drain(t, h.prompt("go", PromptOptions{WithoutTools: true})), OutcomeCompleted)
	if probe.executed.Load() != 0 {
		t.Fatal("a tool ran in a tool-free run")
	}
	recs := readFile(t, h.sess.Path())
	if res := resultFor(recs, "t1").result(); res.str("text") != textToolsDisabled {
		t.Fatalf("t1: %v", res)
	}
	if in := inputText(h.srv.Requests()[1]); strings.Contains(in, "Reissue the tool calls") {
		t.Fatalf("tool-free run asked to reissue calls: %s", in)
	}
}

// TestAssistantPhaseReplayed checks that the phase the provider put on an
// assistant message ("commentary", "final_answer") is persisted with the
// message and sent back with it, using the recorded gpt-5.3-codex stream.
func TestAssistantPhaseReplayed(t *testing.T) {
	checkLeaks(t)
	data, err := os.ReadFile("../provider/testdata/responses/vercel-ai__openai-phase.1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := pt.FromJSONL(data)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpt{})
	h.srv.Enqueue(recorded, pt.Text("ok"))
	checkRunEvents(t, drain(t, h.prompt("first", PromptOptions{})), OutcomeCompleted)
	checkRunEvents(t, drain(t, h.prompt("second", PromptOptions{})), OutcomeCompleted)

	var phases []string
	for _, e := range h.agent.cfg.Session.Branch() {
		for _, it := range e.Items {
			if it.Type == session.ItemText {
				phases = append(phases, it.Phase)
			}
		}
	}
	want := []string{"commentary", "final_answer", ""}
	if strings.Join(phases, ",") != strings.Join(want, ",") {
		t.Fatalf("persisted phases %q, want %q", phases, want)
	}
	reqs := h.srv.Requests()
	var sent []string
	for _, it := range reqs[1].Input() {
		m := it.(map[string]any)
		if m["role"] == "assistant" {
			p, _ := m["phase"].(string)
			sent = append(sent, p)
		}
	}
	if strings.Join(sent, ",") != "commentary,final_answer" {
		t.Fatalf("replayed assistant phases %q", sent)
	}
}
