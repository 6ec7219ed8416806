package agent

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// warmModel grants every feature on the model side, prewarm included.
var warmModel = provider.Model{Name: "warm", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: provider.AllFeatures}

// warmHarness is a harness on the Responses WebSocket whose model and
// endpoint grant every feature, with reasoning set to high.
func warmHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, harnessOpt{model: warmModel, websocket: true})
	if _, err := h.agent.SetReasoning("high"); err != nil {
		t.Fatal(err)
	}
	return h
}

// isWarmup reports whether req is a warm-up: its frame carries
// "generate": false.
func isWarmup(req pt.Request) bool {
	g, ok := req.Body["generate"]
	return ok && g == false
}

// recordsOf returns the session's records of kind.
func recordsOf(t *testing.T, h *harness, kind string) []record {
	t.Helper()
	var out []record
	for _, r := range readFile(t, h.sess.Path()) {
		if r.str("kind") == kind {
			out = append(out, r)
		}
	}
	return out
}

// TestPrewarmSendsTheRequestItWarms: "Prewarming uses the same
// replay-dependent reasoning and advertised async tool schemas." The
// warm-up is the next run's first request as the same builder makes it
// — model, instructions, tools with their async flags, reasoning,
// include, prompt_cache_key, parallel_tool_calls — with generate:false,
// over the same socket; its input is a prefix of that request's. It is
// not a turn: no entry, no event, not in the run's usage; the usage it
// reports is one durable usage record of operation "prewarm", exactly as
// reported.
func TestPrewarmSendsTheRequestItWarms(t *testing.T) {
	h := warmHarness(t)
	warmUsage := provider.Usage{InputTokens: 1234, CachedTokens: 1000, OutputTokens: 0}
	h.srv.Enqueue(pt.Text("first answer"), pt.Reply().WithUsage(warmUsage), pt.Text("second answer"))
	h.completed(t, h.prompt("first", PromptOptions{}).Wait())
	entries := len(h.sess.Branch())
	own := h.sess.Totals().Own

	sent, err := h.agent.Prewarm(context.Background())
	if !sent || err != nil {
		t.Fatalf("Prewarm = %v, %v; want a warm-up sent", sent, err)
	}
	if n := len(h.sess.Branch()); n != entries {
		t.Fatalf("the warm-up wrote %d entries", n-entries)
	}
	res := h.prompt("second", PromptOptions{}).Wait()
	reqs := h.completed(t, res)
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	warm, real := reqs[1], reqs[2]
	if !isWarmup(warm) || isWarmup(real) || isWarmup(reqs[0]) {
		t.Fatalf("generate: first %v, warm-up %v, real %v", reqs[0].Body["generate"], warm.Body["generate"], real.Body["generate"])
	}
	for _, k := range []string{"model", "instructions", "tools", "tool_choice", "parallel_tool_calls", "reasoning", "include", "prompt_cache_key", "store"} {
		if !reflect.DeepEqual(warm.Body[k], real.Body[k]) {
			t.Errorf("%s: warm-up %v, real request %v", k, warm.Body[k], real.Body[k])
		}
	}
	if r, _ := warm.Body["reasoning"].(map[string]any); r["effort"] != "high" {
		t.Errorf("warm-up reasoning %v, want effort high", warm.Body["reasoning"])
	}
	async := 0
	for _, tl := range warm.Body["tools"].([]any) {
		if tl.(map[string]any)["async"] == true {
			async++
		}
	}
	if async == 0 {
		t.Error("the warm-up advertises no async tool schema")
	}
	wi, ri := warm.Input(), real.Input()
	if len(wi) == 0 || len(wi) >= len(ri) || !reflect.DeepEqual(wi, ri[:len(wi)]) {
		t.Errorf("the warm-up's input (%d items) is not a prefix of the request's (%d)", len(wi), len(ri))
	}
	if warm.RemoteAddr != real.RemoteAddr {
		t.Errorf("the warm-up went over %s, the request over %s", warm.RemoteAddr, real.RemoteAddr)
	}
	// Accounting: the run counts its own request only; the session one
	// usage record for the warm-up, as reported.
	if res.Usage.Requests != 1 {
		t.Errorf("run usage counts %d requests, want 1", res.Usage.Requests)
	}
	var warmRecs []record
	for _, u := range recordsOf(t, h, "usage") {
		if usageOp(u) == OperationPrewarm {
			warmRecs = append(warmRecs, u)
		}
	}
	if len(warmRecs) != 1 {
		t.Fatalf("%d prewarm usage records, want 1", len(warmRecs))
	}
	if w := warmRecs[0]; w["input"] != float64(1234) || w["cached_input"] != float64(1000) || w["output"] != nil && w["output"] != float64(0) {
		t.Errorf("prewarm usage record %v, want input 1234, cached 1000, output 0", w)
	}
	tot := h.sess.Totals()
	gotWarm := tot.Own.Input - own.Input - (int64(realUsage(t, h)))
	if gotWarm != warmUsage.InputTokens {
		t.Errorf("the session counts %d input tokens for the warm-up, want %d", gotWarm, warmUsage.InputTokens)
	}
	if tot.Uncertain {
		t.Error("a completed warm-up made usage uncertain")
	}
}

// usageOp returns a usage record's operation.
func usageOp(r record) string { return r.str("operation") }

// realUsage returns the input tokens of the last main usage record.
func realUsage(t *testing.T, h *harness) float64 {
	t.Helper()
	var last float64
	for _, u := range recordsOf(t, h, "usage") {
		if usageOp(u) == "" {
			last, _ = u["input"].(float64)
		}
	}
	return last
}

// TestPrewarmWithoutUsageInventsNone: a warm-up whose response reports
// no usage writes no usage record and settles as no_usage; usage stays
// certain.
func TestPrewarmWithoutUsageInventsNone(t *testing.T) {
	h := warmHarness(t)
	h.srv.Enqueue(pt.Reply().WithoutUsage())
	if sent, err := h.agent.Prewarm(context.Background()); !sent || err != nil {
		t.Fatalf("Prewarm = %v, %v", sent, err)
	}
	if n := len(recordsOf(t, h, "usage")); n != 0 {
		t.Fatalf("%d usage records for a warm-up that reported none", n)
	}
	if got := settledOutcomes(readFile(t, h.sess.Path())); !reflect.DeepEqual(got, []string{"no_usage"}) {
		t.Fatalf("settlements %v, want [no_usage]", got)
	}
	if tot := h.sess.Totals(); tot.Uncertain || tot.Requests != 0 {
		t.Fatalf("totals %+v", tot)
	}
}

// TestPrewarmFailureDoesNotFailTheRun: a warm-up that fails after it
// was sent leaves a durable usage-uncertainty marker (operation
// "prewarm"), never usage, is not retried, and the next run sends its
// request and completes.
func TestPrewarmFailureDoesNotFailTheRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		turn pt.Turn
	}{
		{"failed", pt.Failed("server_error", "warm-up failed")},
		{"status", pt.Status(500, "server_error", "", "boom")},
		{"dropped", pt.Reply().DropAfter(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := warmHarness(t)
			h.srv.Enqueue(tc.turn, pt.Text("answer"))
			sent, err := h.agent.Prewarm(context.Background())
			if !sent || err == nil {
				t.Fatalf("Prewarm = %v, %v; want a failed warm-up", sent, err)
			}
			if n := len(h.srv.Requests()); n != 1 {
				t.Fatalf("%d requests after the failed warm-up, want 1 (never retried)", n)
			}
			un := recordsOf(t, h, "usage_uncertain")
			if len(un) != 1 {
				t.Fatalf("%d uncertainty markers, want 1", len(un))
			}
			if un[0].str("operation") != OperationPrewarm {
				t.Errorf("marker %v, want operation prewarm", un[0])
			}
			if n := len(recordsOf(t, h, "usage")); n != 0 {
				t.Fatalf("%d usage records for a failed warm-up", n)
			}
			res := h.prompt("hello", PromptOptions{}).Wait()
			reqs := h.completed(t, res)
			if len(reqs) != 2 || isWarmup(reqs[1]) {
				t.Fatalf("requests %d; the run's is a warm-up: %v", len(reqs), len(reqs) == 2 && isWarmup(reqs[1]))
			}
		})
	}
}

// TestPrewarmOnlyWhenGranted: no warm-up on HTTP, after the fallback to
// HTTP, under a hard ceiling, or while a run is active; the HTTP
// transport refuses to encode one (pre-send, nothing dispatched).
func TestPrewarmOnlyWhenGranted(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		h := newHarness(t, harnessOpt{model: warmModel})
		if sent, err := h.agent.Prewarm(context.Background()); sent || err != nil {
			t.Fatalf("Prewarm over HTTP = %v, %v", sent, err)
		}
		if n := len(h.srv.Requests()); n != 0 {
			t.Fatalf("%d requests", n)
		}
	})
	t.Run("fallen-back", func(t *testing.T) {
		srv := pt.New(t)
		ws := provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), Features: provider.AllFeatures})
		fb := NewFallbackTransport(ws, provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), Features: provider.AllFeatures}))
		if !fb.SendsWarmups() {
			t.Fatal("a WebSocket fallback transport does not send warm-ups")
		}
		fb.FallbackToHTTP()
		h := newHarness(t, harnessOpt{model: warmModel, transport: fb})
		if sent, err := h.agent.Prewarm(context.Background()); sent || err != nil {
			t.Fatalf("Prewarm after the fallback = %v, %v", sent, err)
		}
		if n := len(srv.Requests()); n != 0 {
			t.Fatalf("%d requests", n)
		}
	})
	t.Run("hard-ceiling", func(t *testing.T) {
		h := newHarness(t, harnessOpt{model: warmModel, websocket: true, retry: ceilingPolicy{}})
		if sent, err := h.agent.Prewarm(context.Background()); sent || err != nil {
			t.Fatalf("Prewarm under a hard ceiling = %v, %v", sent, err)
		}
		if n := len(h.srv.Requests()); n != 0 {
			t.Fatalf("%d requests", n)
		}
	})
	t.Run("active-run", func(t *testing.T) {
		h := warmHarness(t)
		ready := make(chan struct{})
		h.srv.Enqueue(pt.Text("held").HoldUntil(ready))
		r := h.prompt("hello", PromptOptions{})
		waitFor(t, func() bool { return len(h.srv.Requests()) == 1 })
		if sent, err := h.agent.Prewarm(context.Background()); sent || err != nil {
			t.Fatalf("Prewarm during a run = %v, %v", sent, err)
		}
		close(ready)
		h.completed(t, r.Wait())
		if n := len(h.srv.Requests()); n != 1 {
			t.Fatalf("%d requests", n)
		}
	})
	t.Run("http-encoding", func(t *testing.T) {
		srv := pt.New(t)
		tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), Features: provider.AllFeatures})
		_, err := tr.Open(context.Background(), &provider.Request{Model: "m", Warmup: true})
		pe, ok := errors.AsType[*provider.Error](err)
		if !ok || pe.Class != provider.InvalidRequest || pe.Phase != provider.PreSend || pe.Dispatched || !errors.Is(err, provider.ErrWarmupNotWebSocket) {
			t.Fatalf("HTTP warm-up: %v", err)
		}
		if n := len(srv.Requests()); n != 0 {
			t.Fatalf("%d requests", n)
		}
	})
}

// ceilingPolicy is NoRetry with a hard ceiling set.
type ceilingPolicy struct{ NoRetry }

func (ceilingPolicy) HardCeilings() bool { return true }

// TestRunWaitsForTheWarmup: a prompt accepted while a warm-up is in
// flight is not refused (ErrBusy) and its run sends nothing until the
// warm-up has settled: the socket carries one response at a time.
func TestRunWaitsForTheWarmup(t *testing.T) {
	h := warmHarness(t)
	ready := make(chan struct{})
	h.srv.Enqueue(pt.Reply().HoldUntil(ready), pt.Text("answer"))
	warmed := make(chan error, 1)
	go func() { _, err := h.agent.Prewarm(context.Background()); warmed <- err }()
	waitFor(t, func() bool { return len(h.srv.Requests()) == 1 })
	r := h.prompt("hello", PromptOptions{})
	time.Sleep(100 * time.Millisecond)
	if n := len(h.srv.Requests()); n != 1 {
		t.Fatalf("the run sent a request during the warm-up (%d requests)", n)
	}
	close(ready)
	if err := <-warmed; err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	reqs := h.completed(t, r.Wait())
	if len(reqs) != 2 || !isWarmup(reqs[0]) || isWarmup(reqs[1]) {
		t.Fatalf("requests %d", len(reqs))
	}
	if h.sess.Totals().Uncertain {
		t.Fatal("usage uncertain")
	}
}

// TestWarmupFrame: the WebSocket frame of a warm-up is the request's
// with "generate": false; HTTP bodies and ordinary frames carry no
// generate field.
func TestWarmupFrame(t *testing.T) {
	req := &provider.Request{Model: "m", Input: []provider.Item{{Type: provider.ItemMessage, Role: "user", Text: "hi"}}}
	plain, err := req.EncodeWebSocket()
	if err != nil {
		t.Fatal(err)
	}
	req.Warmup = true
	warm, err := req.EncodeWebSocket()
	if err != nil {
		t.Fatal(err)
	}
	var p, w map[string]any
	if err := json.Unmarshal(plain, &p); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(warm, &w); err != nil {
		t.Fatal(err)
	}
	if _, ok := p["generate"]; ok {
		t.Errorf("an ordinary frame carries generate: %s", plain)
	}
	if w["generate"] != false {
		t.Errorf("a warm-up frame: %s", warm)
	}
	delete(w, "generate")
	if !reflect.DeepEqual(p, w) {
		t.Errorf("the warm-up frame differs beyond generate:\n%s\n%s", plain, warm)
	}
	if _, err := req.EncodeHTTP(); !errors.Is(err, provider.ErrWarmupNotWebSocket) {
		t.Errorf("EncodeHTTP of a warm-up: %v", err)
	}
}

// TestPrewarmCancelledAfterDispatch: a warm-up cancelled once it was
// sent (the editor closed the session) may have been billed: its usage
// is durably uncertain, never zero.
func TestPrewarmCancelledAfterDispatch(t *testing.T) {
	h := warmHarness(t)
	ready := make(chan struct{})
	defer close(ready)
	h.srv.Enqueue(pt.Reply().HoldUntil(ready))
	ctx, cancel := context.WithCancel(context.Background())
	done := h.agent.StartPrewarm(ctx)
	if done == nil {
		t.Fatal("no warm-up started")
	}
	waitFor(t, func() bool { return len(h.srv.Requests()) == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled warm-up reported success")
	}
	un := recordsOf(t, h, "usage_uncertain")
	if len(un) != 1 || un[0].str("operation") != OperationPrewarm {
		t.Fatalf("markers %v, want one for the prewarm", un)
	}
	if got := settledOutcomes(readFile(t, h.sess.Path())); !reflect.DeepEqual(got, []string{"uncertain"}) {
		t.Fatalf("settlements %v", got)
	}
}

// TestPrewarmNothingToWarm: a branch that no longer fits the context
// window (the next run compacts first) sends no warm-up.
func TestPrewarmNothingToWarm(t *testing.T) {
	model := warmModel
	model.ContextWindow = 200
	h := newHarness(t, harnessOpt{model: model, websocket: true})
	if _, err := h.sess.AppendEntry(session.Entry{Type: session.EntryUser, Text: strings.Repeat("long text ", 400)}); err != nil {
		t.Fatal(err)
	}
	if sent, err := h.agent.Prewarm(context.Background()); sent || err != nil {
		t.Fatalf("Prewarm = %v, %v", sent, err)
	}
	if n := len(h.srv.Requests()); n != 0 {
		t.Fatalf("%d requests", n)
	}
}
