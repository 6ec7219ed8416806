package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
)

// qualifiedRoute is a Codex-profile Responses route with local function
// tools and only replayable input kinds.
func qualifiedRoute() Route {
	return Route{
		Responses: true, Profile: ProfileCodex, Granted: provider.FeatureCodexProfile | provider.FeatureWebSocket,
		ToolKinds: []string{"function", "function"},
		ItemKinds: []provider.ItemType{provider.ItemMessage, provider.ItemReasoning, provider.ItemFunctionCall, provider.ItemFunctionCallOutput, "compaction"},
	}
}

// testClock is a manual clock for pure policy tests.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time          { return c.t }
func (c *testClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestPolicy(t *testing.T, mutate func(*RecoveryConfig)) (*CodexRecovery, *testClock) {
	t.Helper()
	clk := &testClock{t: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}
	cfg := RecoveryConfig{
		Profile: ProfileCodex, Wire: provider.WireResponses, Model: provider.Model{Name: "m", Features: provider.FeatureCodexProfile},
		Endpoint: provider.FeatureCodexProfile | provider.FeatureWebSocket, Seed: 42, Now: clk.now,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	return NewCodexRecovery(cfg), clk
}

// Failure builders for the provider's typed failures.
func eofFailure() Failure {
	return Failure{Err: &provider.Error{Phase: provider.Body, Class: provider.TerminalEOF, Dispatched: true}, Dispatched: true}
}

func status503() Failure {
	return Failure{Err: &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 503, Dispatched: true}, Dispatched: true}
}

func connectFailure() Failure {
	return Failure{Err: &provider.Error{Phase: provider.Opening, Class: provider.Connect}}
}

func netDown() Failure {
	return Failure{Err: &provider.Error{Phase: provider.PreSend, Class: provider.NetworkUnavailable}}
}

func TestRouteFor(t *testing.T) {
	m, ok := provider.LookupModel("gpt-5.1-codex")
	if !ok {
		t.Fatal("gpt-5.1-codex missing from the model table")
	}
	req := &provider.Request{
		Model: m.Name,
		Input: []provider.Item{{Type: provider.ItemMessage, Role: "user", Text: "hi"}, {Type: provider.ItemReasoning}, {Type: provider.ItemFunctionCall}, {Type: provider.ItemFunctionCallOutput}},
		Tools: []provider.FunctionTool{{Name: "read"}},
	}
	if err := RouteFor(ProfileCodex, provider.WireResponses, m, provider.FeatureCodexProfile, false, req).Qualify(); err != nil {
		t.Fatalf("codex model on a codex endpoint: %v", err)
	}
	// Names grant nothing: a codex-named model on an endpoint that did not
	// grant the profile, and a model without the feature.
	if err := RouteFor(ProfileCodex, provider.WireResponses, m, 0, false, req).Qualify(); err == nil {
		t.Fatal("endpoint without features qualified")
	}
	plain, _ := provider.LookupModel("gpt-4.1")
	if err := RouteFor(ProfileCodex, provider.WireResponses, plain, provider.FeatureCodexProfile, false, req).Qualify(); err == nil {
		t.Fatal("model without the codex feature qualified")
	}
	if err := RouteFor("", provider.WireResponses, m, provider.FeatureCodexProfile, false, req).Qualify(); err == nil {
		t.Fatal("route without the host-selected profile qualified")
	}
	// Qualification follows the route: the Codex profile and a Codex
	// model on a Chat Completions or Anthropic route, or a route whose
	// wire format nobody said, are not qualified.
	for _, w := range []provider.WireAPI{provider.WireChat, provider.WireAnthropic, ""} {
		if err := RouteFor(ProfileCodex, w, m, provider.FeatureCodexProfile, false, req).Qualify(); err == nil {
			t.Fatalf("wire %q qualified", w)
		}
	}
	req.Input = append(req.Input, provider.Item{Type: provider.ItemCustomToolCall})
	if err := RouteFor(ProfileCodex, provider.WireResponses, m, provider.FeatureCodexProfile, false, req).Qualify(); err == nil {
		t.Fatal("custom tool call input qualified")
	}
	if err := RouteFor(ProfileCodex, provider.WireResponses, m, provider.FeatureCodexProfile, false, nil).Qualify(); err == nil {
		t.Fatal("nil request qualified")
	}
}

func TestRouteQualify(t *testing.T) {
	mod := func(f func(*Route)) Route { r := qualifiedRoute(); f(&r); return r }
	tests := []struct {
		name  string
		route Route
		ok    bool
	}{
		{"qualified", qualifiedRoute(), true},
		{"qualified websocket", mod(func(r *Route) { r.WebSocket = true }), true},
		{"qualified no tools", mod(func(r *Route) { r.ToolKinds = nil }), true},
		{"zero route", Route{}, false},
		{"not responses", mod(func(r *Route) { r.Responses = false }), false},
		{"no profile", mod(func(r *Route) { r.Profile = "" }), false},
		{"other profile named like a model", mod(func(r *Route) { r.Profile = "gpt-5-codex" }), false},
		{"continuation id", mod(func(r *Route) { r.PreviousResponseID = "resp_1" }), false},
		{"store", mod(func(r *Route) { r.Store = true }), false},
		{"context management", mod(func(r *Route) { r.ContextManagement = true }), false},
		{"hosted tool", mod(func(r *Route) { r.ToolKinds = []string{"function", "web_search"} }), false},
		{"custom tool", mod(func(r *Route) { r.ToolKinds = []string{"custom"} }), false},
		{"custom tool call item", mod(func(r *Route) { r.ItemKinds = append(r.ItemKinds, provider.ItemCustomToolCall) }), false},
		{"unknown item", mod(func(r *Route) { r.ItemKinds = []provider.ItemType{"item_reference"} }), false},
		{"codex profile not granted", mod(func(r *Route) { r.Granted = provider.FeatureWebSocket }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.route.Qualify()
			if (err == nil) != tt.ok {
				t.Fatalf("Qualify() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrUnqualifiedRoute) {
				t.Fatalf("Qualify() = %v, does not wrap ErrUnqualifiedRoute", err)
			}
		})
	}
}

// drive feeds failures to p and returns how many requests the logical turn
// made (1 + replacements) and the terminal decision, if any.
func drive(p *CodexRecovery, fails []Failure) (attempts int, last RetryDecision) {
	attempts = 1
	for _, f := range fails {
		last = p.Decide(f)
		if !last.Retry {
			return attempts, last
		}
		attempts++
	}
	return attempts, last
}

func repeat(f Failure, n int) []Failure {
	out := make([]Failure, n)
	for i := range out {
		out[i] = f
	}
	return out
}

func TestEnvelopeExhaustion(t *testing.T) {
	tests := []struct {
		name     string
		fails    []Failure
		attempts int
		budget   string
	}{
		{"stream only: 12 attempts", repeat(eofFailure(), 40), 12, "stream"},
		{"admission only: 30 attempts", repeat(status503(), 40), 30, "admission"},
		{"connect only: 30 attempts", repeat(connectFailure(), 40), 30, "admission"},
		{"mixed: admission first, 36 attempts", append(repeat(status503(), 29), repeat(eofFailure(), 40)...), 36, "total"},
		{"mixed: stream first, 36 attempts", append(repeat(eofFailure(), 11), repeat(status503(), 40)...), 36, "total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newTestPolicy(t, nil)
			attempts, last := drive(p, tt.fails)
			if attempts != tt.attempts {
				t.Fatalf("attempts = %d, want %d", attempts, tt.attempts)
			}
			ex, ok := errors.AsType[*ExhaustedError](last.Err)
			if !ok {
				t.Fatalf("terminal error = %v, want *ExhaustedError", last.Err)
			}
			if ex.Budget != tt.budget || ex.Attempts != tt.attempts {
				t.Fatalf("ExhaustedError = %+v, want budget %s attempts %d", ex, tt.budget, tt.attempts)
			}
			if _, ok := errors.AsType[*provider.Error](last.Err); !ok {
				t.Fatalf("exhaustion does not wrap the provider failure: %v", last.Err)
			}
		})
	}
}

func TestTwenty503ThenEOFStillRecovers(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	for i := range 20 {
		d := p.Decide(status503())
		if !d.Retry || d.Attempt != i+1 || *d.MaxAttempts != 29 {
			t.Fatalf("503 #%d: %+v (max %v)", i+1, d, d.MaxAttempts)
		}
	}
	d := p.Decide(eofFailure())
	if !d.Retry {
		t.Fatalf("EOF after twenty 503s was not replaced: %v", d.Err)
	}
	// The stream class has 10 left and the cumulative cap 14 left.
	if d.Attempt != 21 || *d.MaxAttempts != 31 || d.Kind != RetryInterruptedInference {
		t.Fatalf("EOF decision = attempt %d max %d kind %s", d.Attempt, *d.MaxAttempts, d.Kind)
	}
	if s, a := p.Spent(); s != 1 || a != 20 {
		t.Fatalf("Spent() = %d, %d; want 1, 20", s, a)
	}
}

func TestMaxAttemptsIsRemainingAllowanceOfClass(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	for i := range 11 {
		d := p.Decide(eofFailure())
		if d.Attempt != i+1 || *d.MaxAttempts != 11 {
			t.Fatalf("stream #%d: attempt %d max %d", i+1, d.Attempt, *d.MaxAttempts)
		}
	}
	// Admission after 11 stream replacements: 29 left in the class but
	// only 24 under the cumulative cap.
	d := p.Decide(status503())
	if d.Attempt != 12 || *d.MaxAttempts != 35 {
		t.Fatalf("admission after stream: attempt %d max %d", d.Attempt, *d.MaxAttempts)
	}
}

func TestMaxAttemptsNeverAbove35(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	kinds := []Failure{eofFailure(), status503(), connectFailure(), netDown()}
	for trial := range 200 {
		p, _ := newTestPolicy(t, nil)
		replacements := 0
		for range 100 {
			d := p.Decide(kinds[r.IntN(len(kinds))])
			if !d.Retry {
				break
			}
			if d.Kind == RetryWaitingForNetwork {
				if d.MaxAttempts != nil {
					t.Fatalf("trial %d: waiting decision has maxAttempts %d", trial, *d.MaxAttempts)
				}
				continue
			}
			replacements++
			if *d.MaxAttempts > MaxTotalReplacements || d.Attempt > *d.MaxAttempts || d.Attempt != replacements {
				t.Fatalf("trial %d: attempt %d max %d (replacement %d)", trial, d.Attempt, *d.MaxAttempts, replacements)
			}
		}
		if replacements > MaxTotalReplacements {
			t.Fatalf("trial %d: %d replacements", trial, replacements)
		}
	}
}

func TestTurnCompletedResetsBudgets(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	for range 11 {
		p.Decide(eofFailure())
	}
	p.TurnCompleted()
	attempts, _ := drive(p, repeat(eofFailure(), 20))
	if attempts != 12 {
		t.Fatalf("after TurnCompleted a fresh turn made %d attempts, want 12", attempts)
	}
}

func TestRequalificationKeepsBudgets(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	for range 5 {
		p.Decide(eofFailure())
	}
	r := qualifiedRoute()
	r.ItemKinds = append(r.ItemKinds, provider.ItemMessage) // re-preparation: steering added
	p.SetRoute(r)
	attempts, _ := drive(p, repeat(eofFailure(), 20))
	if attempts != 7 {
		t.Fatalf("after re-preparation %d more attempts, want 7 (11-5 replacements left)", attempts)
	}
}

func TestPermanentCodesOutrankMessages(t *testing.T) {
	tests := []struct {
		name string
		err  *provider.Error
	}{
		{"misalignment with retry message", &provider.Error{Phase: provider.Body, Class: provider.ResponsesFailed, Code: "misalignment_policy_violation", Message: "please try again in 2s", Dispatched: true}},
		{"503 server_is_overloaded", &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 503, Code: "server_is_overloaded", Message: "Service unavailable, retry later", Dispatched: true}},
		{"500 slow_down", &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 500, Code: "slow_down", Dispatched: true}},
		{"429 insufficient_quota", &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 429, Code: "insufficient_quota", Message: "try again in 20ms", Dispatched: true}},
		{"context_length in failed event", &provider.Error{Phase: provider.Body, Class: provider.ResponsesFailed, Code: "context_length_exceeded", Message: "internal server error, retry", Dispatched: true}},
		{"usage_not_included", &provider.Error{Phase: provider.Body, Class: provider.ResponsesFailed, Code: "usage_not_included"}},
		{"cyber_policy in type", &provider.Error{Phase: provider.Body, Class: provider.ResponsesFailed, Type: "cyber_policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newTestPolicy(t, nil)
			d := p.Decide(Failure{Err: tt.err, Dispatched: tt.err.Dispatched})
			if d.Retry {
				t.Fatal("a permanent code was retried")
			}
			pe, ok := errors.AsType[*PermanentError](d.Err)
			if !ok {
				t.Fatalf("error %v is not *PermanentError", d.Err)
			}
			want := tt.err.Code
			if want == "" {
				want = tt.err.Type
			}
			if pe.Code != want {
				t.Fatalf("PermanentError.Code = %q, want %q", pe.Code, want)
			}
			if s, a := p.Spent(); s != 0 || a != 0 {
				t.Fatalf("permanent failure spent budget %d/%d", s, a)
			}
		})
	}
}

func TestClassification(t *testing.T) {
	type want struct {
		retry   bool
		unknown bool
		reason  string
	}
	pe := func(e provider.Error) Failure { return Failure{Err: &e, Dispatched: e.Dispatched} }
	tests := []struct {
		name string
		f    Failure
		want want
	}{
		{"terminal eof", eofFailure(), want{true, true, "terminal_eof"}},
		{"body interrupted", pe(provider.Error{Phase: provider.Body, Class: provider.BodyInterrupted, Dispatched: true}), want{true, true, "body_interrupted"}},
		{"idle timeout in body", pe(provider.Error{Phase: provider.Body, Class: provider.IdleTimeout, Dispatched: true}), want{true, true, "idle_timeout"}},
		{"codec json", pe(provider.Error{Phase: provider.Body, Class: provider.StreamFailure, Decode: provider.DecodeJSON, Dispatched: true}), want{true, true, "stream_decode_json"}},
		{"codec utf8", pe(provider.Error{Phase: provider.Body, Class: provider.StreamFailure, Decode: provider.DecodeInvalidUTF8, Dispatched: true}), want{true, true, "stream_decode_utf8"}},
		{"raw stream failure", pe(provider.Error{Phase: provider.Body, Class: provider.StreamFailure, Dispatched: true}), want{false, true, "stream_failure"}},
		{"failed unknown", pe(provider.Error{Phase: provider.Body, Class: provider.ResponsesFailed, Dispatched: true}), want{true, true, "response_failed:unknown"}},
		{"failed server_error", pe(provider.Error{Phase: provider.Body, Class: provider.ResponsesFailed, Code: "server_error", Dispatched: true}), want{true, true, "response_failed:server_error"}},
		{"failed rate limit", pe(provider.Error{Phase: provider.Body, Class: provider.ResponsesFailed, Code: "rate_limit_exceeded", Dispatched: true}), want{true, true, "response_failed:rate_limit_exceeded"}},
		{"ws error frame 429 after generation", pe(provider.Error{Phase: provider.Body, Class: provider.HTTPStatus, Status: 429, Code: "rate_limit_exceeded", Dispatched: true}), want{true, true, "http_429:rate_limit_exceeded"}},
		{"ws error frame 429 before generation", pe(provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 429, Code: "rate_limit_exceeded", Dispatched: true}), want{false, false, "http_429"}},
		{"failed request code", pe(provider.Error{Phase: provider.Body, Class: provider.ResponsesFailed, Code: "invalid_image", Dispatched: true}), want{false, true, "response_failed:invalid_image"}},
		{"incomplete unknown", pe(provider.Error{Phase: provider.Body, Class: provider.ResponsesIncomplete, IncompleteReason: "server_hiccup", Dispatched: true}), want{true, true, "response_incomplete:server_hiccup"}},
		{"incomplete max tokens", pe(provider.Error{Phase: provider.Body, Class: provider.ResponsesIncomplete, IncompleteReason: "max_output_tokens", Dispatched: true}), want{false, true, "response_incomplete:max_output_tokens"}},
		{"http 408", pe(provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 408}), want{true, true, "http_408"}},
		{"http 503 not dispatched flag", pe(provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 503}), want{true, true, "http_503"}},
		{"ws handshake 503", pe(provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 503, Handshake: true}), want{true, false, "http_503"}},
		{"http 520", pe(provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 520, Dispatched: true}), want{true, true, "http_520"}},
		{"http 400", pe(provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 400, Dispatched: true}), want{false, false, "http_400"}},
		{"http 429 admission", pe(provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 429, Code: "rate_limit_exceeded", Dispatched: true}), want{false, false, "http_429"}},
		{"connect", connectFailure(), want{true, false, "connect"}},
		{"response headers dispatched", pe(provider.Error{Phase: provider.Opening, Class: provider.ResponseHeaders, Dispatched: true}), want{true, true, "response_headers"}},
		{"network unavailable pre-send", netDown(), want{true, false, "network_unavailable"}},
		{"auth unavailable pre-send", pe(provider.Error{Phase: provider.PreSend, Class: provider.AuthUnavailable}), want{true, false, "auth_unavailable"}},
		{"invalid request", pe(provider.Error{Phase: provider.PreSend, Class: provider.InvalidRequest}), want{false, false, "provider_error"}},
		{"limit exceeded", pe(provider.Error{Phase: provider.Body, Class: provider.LimitExceeded, Dispatched: true}), want{false, true, "provider_error"}},
		{"local json error", Failure{Err: errors.New("encode request: bad json")}, want{false, false, "local_error"}},
		{"local error marked dispatched", Failure{Err: errors.New("opaque transport"), Dispatched: true}, want{false, true, "local_error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newTestPolicy(t, nil)
			d := p.Decide(tt.f)
			got := want{d.Retry, d.UsageUnknown, d.Reason}
			if got != tt.want {
				t.Fatalf("Decide = %+v, want %+v (err %v)", got, tt.want, d.Err)
			}
			if !d.Retry && d.Err == nil {
				t.Fatal("a refused replacement carries no error")
			}
		})
	}
}

func TestUnqualifiedRouteNeverReplays(t *testing.T) {
	routes := map[string]Route{
		"zero":                    {},
		"no profile":              {Responses: true, Granted: provider.FeatureCodexProfile, ToolKinds: []string{"function"}},
		"store":                   {Responses: true, Profile: ProfileCodex, Granted: provider.FeatureCodexProfile, Store: true},
		"endpoint grants nothing": {Responses: true, Profile: ProfileCodex},
		"chat route":              {Responses: false, Profile: ProfileCodex, Granted: provider.FeatureCodexProfile, ToolKinds: []string{"function"}},
	}
	for name, r := range routes {
		t.Run(name, func(t *testing.T) {
			p, _ := newTestPolicy(t, nil)
			p.SetRoute(r)
			for _, f := range []Failure{eofFailure(), status503(), netDown(), connectFailure()} {
				d := p.Decide(f)
				if d.Retry {
					t.Fatalf("unqualified route replayed after %v", f.Err)
				}
				if !errors.Is(d.Err, ErrUnqualifiedRoute) || !errors.Is(d.Err, f.Err) {
					t.Fatalf("error %v should wrap ErrUnqualifiedRoute and the failure", d.Err)
				}
			}
			// Usage uncertainty is still reported for dispatched failures.
			if d := p.Decide(eofFailure()); !d.UsageUnknown {
				t.Fatal("unqualified dispatched failure hid unknown usage")
			}
		})
	}
}

func TestRetryAfterNeverShortened(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	d := p.Decide(Failure{Err: &provider.Error{
		Phase: provider.Opening, Class: provider.HTTPStatus, Status: 503, Dispatched: true,
		RetryAfter: 90 * time.Second, HasRetryAfter: true, Message: "Slow down, try again in 2s",
	}, Dispatched: true})
	if !d.Retry || d.Delay != 90*time.Second {
		t.Fatalf("Retry-After 90s with a 2s hint: retry %v delay %v, want 90s", d.Retry, d.Delay)
	}
}

func TestTryAgainHintHonoured(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	d := p.Decide(Failure{Err: &provider.Error{
		Phase: provider.Body, Class: provider.ResponsesFailed, Code: "rate_limit_exceeded", Dispatched: true,
		Message: "Rate limit reached for gpt-5 on tokens per min. Please try again in 45.5s.",
	}, Dispatched: true})
	if !d.Retry || d.Delay != 45500*time.Millisecond {
		t.Fatalf("hint longer than backoff: retry %v delay %v, want 45.5s", d.Retry, d.Delay)
	}
	// A hint shorter than the backoff does not shorten it either.
	d = p.Decide(Failure{Err: &provider.Error{
		Phase: provider.Body, Class: provider.ResponsesFailed, Code: "rate_limit_exceeded", Dispatched: true,
		Message: "Please try again in 1ms.",
	}, Dispatched: true})
	if d.Delay < 360*time.Millisecond {
		t.Fatalf("1ms hint shortened the second backoff to %v", d.Delay)
	}
}

func TestInferenceBackoffBounded(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	prev := time.Duration(0)
	for i := range 29 {
		d := p.Decide(status503())
		if d.Delay <= 0 || d.Delay > inferenceBackoffCap {
			t.Fatalf("replacement %d: delay %v outside (0, %v]", i+1, d.Delay, inferenceBackoffCap)
		}
		if i < 5 && d.Delay <= prev {
			t.Fatalf("replacement %d: delay %v did not grow from %v", i+1, d.Delay, prev)
		}
		prev = d.Delay
	}
}

func TestNetworkWaitDoesNotSpendBudget(t *testing.T) {
	p, clk := newTestPolicy(t, nil)
	var delays []time.Duration
	for i := range 20200 {
		d := p.Decide(netDown())
		if !d.Retry || d.Kind != RetryWaitingForNetwork || d.MaxAttempts != nil || d.Attempt != i+1 || d.UsageUnknown {
			t.Fatalf("wait %d: %+v", i+1, d)
		}
		if d.Delay > 60*time.Second {
			t.Fatalf("wait %d: delay %v above 60s", i+1, d.Delay)
		}
		if i < 6 {
			delays = append(delays, d.Delay)
		}
		clk.advance(d.Delay)
	}
	if delays[0] < 4500*time.Millisecond || delays[0] > 5500*time.Millisecond {
		t.Fatalf("first wait %v, want near 5s", delays[0])
	}
	for i := 1; i < 4; i++ {
		if r := float64(delays[i]) / float64(delays[i-1]); r < 1.6 || r > 2.5 {
			t.Fatalf("wait %d/%d ratio %.2f, want doubling", i+1, i, r)
		}
	}
	if s, a := p.Spent(); s != 0 || a != 0 {
		t.Fatalf("network waiting spent %d/%d of the inference budget", s, a)
	}
	// The full inference envelope is still there afterwards.
	if attempts, _ := drive(p, repeat(eofFailure(), 20)); attempts != 12 {
		t.Fatalf("after the outage: %d attempts, want 12", attempts)
	}
}

func TestNetworkJitterIsRunSpecific(t *testing.T) {
	a, _ := newTestPolicy(t, func(c *RecoveryConfig) { c.Seed = 1 })
	b, _ := newTestPolicy(t, func(c *RecoveryConfig) { c.Seed = 2 })
	same := 0
	for range 5 {
		if a.Decide(netDown()).Delay == b.Decide(netDown()).Delay {
			same++
		}
	}
	if same == 5 {
		t.Fatal("two runs waited exactly the same jittered delays")
	}
}

func TestMaxNetworkWait(t *testing.T) {
	p, clk := newTestPolicy(t, nil)
	p.SetMaxNetworkWait(10 * time.Minute)
	var last RetryDecision
	var waited time.Duration
	for range 1000 {
		last = p.Decide(netDown())
		waited += last.Delay
		clk.advance(last.Delay)
		if !last.Retry {
			break
		}
	}
	nw, ok := errors.AsType[*NetworkWaitLimit](last.Err)
	if !ok {
		t.Fatalf("outage past the bound ended with %v, want *NetworkWaitLimit", last.Err)
	}
	if waited != 10*time.Minute {
		t.Fatalf("waited %v in total, want exactly the 10m bound (never expiring early)", waited)
	}
	if nw.UsageUnknown || last.UsageUnknown {
		t.Fatal("a pre-send outage invented unknown usage")
	}
	if !errors.Is(last.Err, last.Err.(*NetworkWaitLimit).Err) {
		t.Fatal("NetworkWaitLimit does not unwrap")
	}
}

func TestOutageDeadlineCutsDispatchedOpening(t *testing.T) {
	p, clk := newTestPolicy(t, nil)
	p.SetMaxNetworkWait(time.Minute)
	d := p.Decide(netDown())
	if !d.Retry {
		t.Fatal("first outage wait refused")
	}
	dl, ok := p.OutageDeadline()
	if !ok || !dl.Equal(clk.now().Add(time.Minute)) {
		t.Fatalf("OutageDeadline() = %v, %v", dl, ok)
	}
	clk.advance(time.Minute)
	// The loop bounded the next opening by the deadline; it was cut after
	// the request may have been written.
	cut := &provider.Error{Phase: provider.Opening, Class: provider.Canceled, Dispatched: true, Err: context.DeadlineExceeded}
	d = p.Decide(Failure{Err: cut, Dispatched: true})
	nw, ok := errors.AsType[*NetworkWaitLimit](d.Err)
	if d.Retry || !ok || !nw.UsageUnknown || !d.UsageUnknown {
		t.Fatalf("deadline-cut opening: retry %v err %v unknown %v", d.Retry, d.Err, d.UsageUnknown)
	}
	if _, ok := p.OutageDeadline(); ok {
		t.Fatal("outage still reported after the limit")
	}
}

func TestConnectNeverWaitsUnbounded(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	attempts, last := drive(p, repeat(connectFailure(), 1000))
	if attempts != 30 || last.Kind != "" || last.Err == nil {
		t.Fatalf("generic connect failures: %d attempts (last %+v), want finite 30", attempts, last)
	}
}

func TestHardCeilingStopsAfterUncertainFailure(t *testing.T) {
	p, _ := newTestPolicy(t, func(c *RecoveryConfig) { c.Budget = &Budget{Ceilings: Ceilings{MaxTokens: 1000}} })
	d := p.Decide(netDown())
	if !d.Retry {
		t.Fatal("pre-send waiting (no usage) refused under a ceiling")
	}
	d = p.Decide(eofFailure())
	ce, ok := errors.AsType[*CeilingError](d.Err)
	if d.Retry || !ok || !ce.Uncertain || !d.UsageUnknown {
		t.Fatalf("uncertain failure under a hard ceiling: retry %v err %v", d.Retry, d.Err)
	}
}

func TestWebSocketFallback(t *testing.T) {
	p, _ := newTestPolicy(t, func(c *RecoveryConfig) { c.WebSocket = true })
	var fallbacks []int
	for i := range 11 {
		d := p.Decide(eofFailure())
		if !d.Retry {
			t.Fatalf("failure %d refused: %v", i+1, d.Err)
		}
		if d.FallbackHTTP {
			fallbacks = append(fallbacks, d.Attempt)
			r := qualifiedRoute() // the loop re-prepares over HTTP
			p.SetRoute(r)
		}
	}
	if fmt.Sprint(fallbacks) != "[6]" {
		t.Fatalf("fell back at replacements %v, want once, at the 6th (after 5 WebSocket retries)", fallbacks)
	}
	// Fallback did not reset the stream budget: the 12th failure ends it.
	if d := p.Decide(eofFailure()); d.Retry {
		t.Fatal("fallback reset the stream budget")
	}
	// A later preparation naming the WebSocket again stays on HTTP.
	r := qualifiedRoute()
	r.WebSocket = true
	p.SetRoute(r)
	p.TurnCompleted()
	for range 8 {
		if p.Decide(eofFailure()).FallbackHTTP {
			t.Fatal("fell back twice")
		}
	}
}

func TestHandshakeFallback(t *testing.T) {
	p, _ := newTestPolicy(t, func(c *RecoveryConfig) { c.WebSocket = true })
	d := p.Decide(Failure{Err: &provider.Error{Phase: provider.Opening, Class: provider.FallbackToHTTP, Status: 426}})
	if !d.Retry || !d.FallbackHTTP || d.Delay != 0 || d.UsageUnknown {
		t.Fatalf("426 handshake: %+v", d)
	}
	d = p.Decide(Failure{Err: &provider.Error{Phase: provider.Opening, Class: provider.FallbackToHTTP, Status: 426}})
	if d.Retry {
		t.Fatal("HTTP fell back again")
	}
}

func TestCanceledIsNeverRetried(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	for _, err := range []error{
		context.Canceled,
		&provider.Error{Phase: provider.Body, Class: provider.Canceled, Dispatched: true, Err: context.Canceled},
	} {
		d := p.Decide(Failure{Err: err, Dispatched: true})
		if d.Retry || !errors.Is(d.Err, context.Canceled) {
			t.Fatalf("cancellation %v: retry %v err %v", err, d.Retry, d.Err)
		}
	}
}

func TestAuxiliaryOperationSharesBudget(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	for range 6 {
		p.Decide(eofFailure())
	}
	f := eofFailure()
	f.Operation = OperationCompaction
	attempts, last := drive(p, repeat(f, 20))
	if attempts != 6 {
		t.Fatalf("compaction after 6 main replacements: %d attempts, want 6", attempts)
	}
	if _, ok := errors.AsType[*ExhaustedError](last.Err); !ok {
		t.Fatalf("compaction exhaustion: %v", last.Err)
	}
	q, _ := newTestPolicy(t, nil)
	d := q.Decide(Failure{
		Operation: OperationCompaction,
		Err:       &provider.Error{Phase: provider.Body, Class: provider.ResponsesFailed, Code: "misalignment_policy_violation"},
	})
	if pe, ok := errors.AsType[*PermanentError](d.Err); !ok || pe.Operation != OperationCompaction {
		t.Fatalf("compaction permanent error: %v", d.Err)
	}
}

// TestRefusalResetsNothing: a refusal (exhaustion here) keeps the spent
// envelope, so an auxiliary refusal cannot hand the main request a fresh
// one; only the next run (RunStarted) or a completed response starts a
// fresh turn.
func TestRefusalResetsNothing(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	if attempts, _ := drive(p, repeat(eofFailure(), 20)); attempts != 12 {
		t.Fatalf("first turn: %d attempts", attempts)
	}
	if attempts, _ := drive(p, repeat(eofFailure(), 20)); attempts != 1 {
		t.Fatalf("same turn after exhaustion: %d attempts, want 1 (refused at once)", attempts)
	}
	p.RunStarted("run_next")
	if attempts, _ := drive(p, repeat(eofFailure(), 20)); attempts != 12 {
		t.Fatalf("next run after exhaustion: %d attempts, want 12", attempts)
	}
}
