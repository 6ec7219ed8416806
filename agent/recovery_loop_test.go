package agent

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// codexModel is a model whose side of qualification grants the Codex
// profile; the endpoint grants it through HTTPConfig.Features.
var codexModel = provider.Model{Name: "gpt-5.1-codex", ContextWindow: 400_000, MaxOutputTokens: 128_000, Features: provider.FeatureCodexProfile}

// recRig is a real agent on a real session file, talking HTTP through the
// scripted server's in-process RoundTripper (or a real loopback socket),
// with the Codex recovery policy installed.
type recRig struct {
	t      *testing.T
	srv    *providertest.Server
	sess   *session.Session
	dir    string
	agent  *Agent
	policy *CodexRecovery
	// gate, when set, wraps every round trip (network faults, timing).
	mu    sync.Mutex
	gate  func(req *http.Request) error
	sends []time.Time // virtual instant of every round trip that reached the server
}

type recRigOpt struct {
	loopback   bool // a real 127.0.0.1 socket instead of the in-process RoundTripper
	budget     *Budget
	credential func(context.Context) (string, error)
	dir        string
	model      provider.Model // zero: codexModel
	noProfile  bool           // the host did not select the Codex runtime profile
	native     bool           // the endpoint also grants native compaction
	idle       time.Duration  // the body idle timeout (0: 30 s)
	// server, when set, is a loopback scripted server started outside the
	// synctest bubble: the rig talks to it over real 127.0.0.1 sockets
	// without keep-alive (an idle connection's reader is not durably
	// blocked, so it would stop the bubble's clock), on virtual time.
	server *providertest.Server
	// hook and hookTimeout are the agent's RetryHook and its timeout.
	hook        RetryHook
	hookTimeout time.Duration
}

func newRecRig(t *testing.T, o recRigOpt) *recRig {
	t.Helper()
	g := &recRig{t: t, dir: o.dir}
	if g.dir == "" {
		g.dir = t.TempDir()
	}
	var cfg provider.HTTPConfig
	switch {
	case o.server != nil:
		g.srv = o.server
		cfg.RoundTripper = recTripper{g: g, next: &http.Transport{DisableKeepAlives: true}}
	case o.loopback:
		g.srv = providertest.New(t)
	default:
		g.srv = providertest.NewInProcess(t)
		cfg.RoundTripper = recTripper{g: g, next: g.srv.RoundTripper()}
	}
	cfg.BaseURL, cfg.Features, cfg.Credential = g.srv.URL(), provider.FeatureCodexProfile, o.credential
	if o.native {
		cfg.Features |= provider.FeatureNativeCompaction
	}
	cfg.IdleTimeout = cmp.Or(o.idle, 30*time.Second)
	var err error
	g.sess, err = session.Create(g.dir, session.Header{Cwd: g.dir, Title: "recovery"})
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	t.Cleanup(func() { g.sess.Close() })
	model := cmp.Or(o.model, codexModel)
	rc := RecoveryConfig{Profile: ProfileCodex, Wire: provider.WireResponses, Model: model, Endpoint: cfg.Features, Budget: o.budget, Seed: 7}
	if o.noProfile {
		rc.Profile = ""
	}
	if o.loopback {
		rc.InitialBackoff = time.Millisecond // real time: keep the test fast
	}
	g.policy = NewCodexRecovery(rc)
	g.agent, err = New(Config{
		Session: g.sess, Transport: provider.NewHTTP(cfg), Model: model,
		Host: tools.NewHost(), Broker: tools.NewBroker(tools.BrokerConfig{}),
		Instructions: "You are a test agent.", Retry: g.policy, Principal: "test",
		RetryHook: o.hook, RetryHookTimeout: o.hookTimeout,
	})
	if err != nil {
		t.Fatalf("new agent: %v", err)
	}
	return g
}

// recTripper is the injected RoundTripper: the optional gate can fail a
// round trip the way the OS does (before any byte is written), otherwise
// the scripted server plays the next turn.
type recTripper struct {
	g    *recRig
	next http.RoundTripper
}

func (rt recTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.g.mu.Lock()
	gate := rt.g.gate
	rt.g.mu.Unlock()
	if gate != nil {
		if err := gate(req); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
	}
	rt.g.mu.Lock()
	rt.g.sends = append(rt.g.sends, time.Now())
	rt.g.mu.Unlock()
	return rt.next.RoundTrip(req)
}

// netUnreachable is what a dial reports when the OS has no route.
func netUnreachable() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
}

// run prompts and drains every event.
func (g *recRig) run(ctx context.Context, text string) (RunResult, []Event) {
	g.t.Helper()
	r, err := g.agent.Prompt(ctx, text, PromptOptions{})
	if err != nil {
		g.t.Fatalf("prompt: %v", err)
	}
	var evs []Event
	for e := range r.Events() {
		evs = append(evs, e)
	}
	return r.Wait(), evs
}

// compact compacts the context now and drains every event.
func (g *recRig) compact() (RunResult, []Event) {
	g.t.Helper()
	r, err := g.agent.Compact(context.Background(), PromptOptions{})
	if err != nil {
		g.t.Fatalf("compact: %v", err)
	}
	var evs []Event
	for e := range r.Events() {
		evs = append(evs, e)
	}
	return r.Wait(), evs
}

func eventsOf[T Event](evs []Event) []T {
	var out []T
	for _, e := range evs {
		if x, ok := e.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

func (g *recRig) fileBytes() []byte {
	g.t.Helper()
	b, err := os.ReadFile(g.sess.Path())
	if err != nil {
		g.t.Fatalf("read session file: %v", err)
	}
	return b
}

func repeatTurn(turn providertest.Turn, n int) []providertest.Turn {
	out := make([]providertest.Turn, n)
	for i := range out {
		out[i] = turn
	}
	return out
}

// eofTurn starts an answer and ends the body cleanly without
// response.completed (terminal EOF).
func eofTurn() providertest.Turn {
	return providertest.Text("partial answer that never completes").EOFAfter(4)
}

func turn503() providertest.Turn {
	return providertest.Status(503, "server_error", "", "The server is temporarily unavailable.")
}

// checkExhausted asserts a failed run ended by the envelope after exactly
// want requests, with one durable uncertainty marker per failed accepted
// attempt and want-1 provider_retry events.
func checkExhausted(t *testing.T, g *recRig, res RunResult, evs []Event, want int, budget string) {
	t.Helper()
	if res.Outcome != OutcomeFailed {
		t.Fatalf("outcome %s (err %v), want failed", res.Outcome, res.Err)
	}
	ex, ok := errors.AsType[*ExhaustedError](res.Err)
	if !ok || ex.Budget != budget || ex.Attempts != want {
		t.Fatalf("run error %v, want *ExhaustedError{%s, %d}", res.Err, budget, want)
	}
	if n := len(g.srv.Requests()); n != want {
		t.Fatalf("server saw %d requests, want %d", n, want)
	}
	retries := eventsOf[*ProviderRetry](evs)
	if len(retries) != want-1 {
		t.Fatalf("%d provider_retry events, want %d", len(retries), want-1)
	}
	for i, e := range retries {
		if e.RetryKind != RetryInterruptedInference || e.MaxAttempts == nil || *e.MaxAttempts > MaxTotalReplacements || e.Attempt != i+1 || e.Operation != nil {
			t.Fatalf("provider_retry %d = %+v", i+1, e)
		}
	}
	if tot := g.sess.Totals(); tot.UncertainMarkers != want || !tot.Uncertain {
		t.Fatalf("durable uncertainty markers %d, want %d (one per failed accepted attempt)", tot.UncertainMarkers, want)
	}
	if got := len(eventsOf[*ProviderUsageUncertain](evs)); got != 1 {
		t.Fatalf("%d provider_usage_uncertain events, want 1 (first uncertainty only)", got)
	}
}

func TestLoopEnvelopeExhaustion(t *testing.T) {
	tests := []struct {
		name   string
		script []providertest.Turn
		want   int
		budget string
	}{
		{"12 stream failures", repeatTurn(eofTurn(), 13), 12, "stream"},
		{"30 admission failures", repeatTurn(turn503(), 31), 30, "admission"},
		{"mixed stops at 36", append(repeatTurn(turn503(), 29), repeatTurn(eofTurn(), 8)...), 36, "total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newRecRig(t, recRigOpt{})
				g.srv.Enqueue(tt.script...)
				g.srv.Enqueue(providertest.Text("never reached"))
				res, evs := g.run(context.Background(), "hello")
				checkExhausted(t, g, res, evs, tt.want, tt.budget)
			})
		})
	}
}

func TestLoopTwenty503ThenEOFRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{})
		g.srv.Enqueue(repeatTurn(turn503(), 20)...)
		g.srv.Enqueue(eofTurn(), providertest.Text("recovered answer"))
		res, evs := g.run(context.Background(), "hello")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		if n := len(g.srv.Requests()); n != 22 {
			t.Fatalf("%d requests, want 22", n)
		}
		retries := eventsOf[*ProviderRetry](evs)
		if len(retries) != 21 || *retries[20].MaxAttempts != 31 || retries[20].Attempt != 21 {
			t.Fatalf("retries %d, last %+v", len(retries), retries[len(retries)-1])
		}
		if res.Usage.Complete || g.sess.Totals().UncertainMarkers != 21 {
			t.Fatalf("usage complete %v, markers %d; want a known subtotal and 21 markers", res.Usage.Complete, g.sess.Totals().UncertainMarkers)
		}
	})
}

func onlySession(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".jsonl") {
			paths = append(paths, dir+"/"+e.Name())
		}
	}
	if len(paths) != 1 {
		t.Fatalf("session files %v, want one", paths)
	}
	return paths[0]
}

func TestLoopInterruptedAfterTextRecoversOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{})
		const answer = "The answer is forty two and nothing else"
		full := providertest.Text(answer)
		g.srv.Enqueue(full.DropAfter(full.FrameCount()/2), full)
		res, evs := g.run(context.Background(), "question")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		// The provisional text streamed before the retry is the prefix.
		var prefix strings.Builder
		for _, e := range evs {
			if _, ok := e.(*ProviderRetry); ok {
				break
			}
			if d, ok := e.(*OutputDelta); ok && d.Channel == ChannelText {
				prefix.WriteString(d.Text)
			}
		}
		rec := eventsOf[*RecoveredOutput](evs)
		if len(rec) != 1 || rec[0].Channel != ChannelText || rec[0].Text != prefix.String() || rec[0].Text == "" {
			t.Fatalf("recovered output %+v, want one text event with prefix %q", rec, prefix.String())
		}
		if !strings.HasPrefix(answer, rec[0].Text) || rec[0].Text == answer {
			t.Fatalf("recovered %q is not a strict prefix of the answer", rec[0].Text)
		}
		// The committed answer is the second attempt's, once.
		var texts []string
		for _, e := range g.sess.Branch() {
			if e.Type == session.EntryAssistant {
				for _, it := range e.Items {
					texts = append(texts, it.Text)
				}
			}
		}
		if strings.Join(texts, "") != answer {
			t.Fatalf("assistant entries %q, want exactly %q", texts, answer)
		}
		if !g.sess.Totals().Uncertain {
			t.Fatal("interrupted accepted attempt left no durable uncertainty")
		}
		// The recovered prefix was never sent back to the provider.
		reqs := g.srv.Requests()
		if len(reqs) != 2 || strings.Contains(string(reqs[1].Raw), rec[0].Text) {
			t.Fatalf("replacement request replays recovered output: %s", reqs[1].Raw)
		}
	})
}

func TestLoopRetryAfterNeverShortened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{})
		g.srv.Enqueue(
			providertest.Status(503, "server_error", "", "Overloaded, try again in 2s").WithRetryAfter("90"),
			providertest.Failed("rate_limit_exceeded", "Rate limit reached. Please try again in 45s."),
			providertest.Text("ok"),
		)
		res, _ := g.run(context.Background(), "hi")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		if len(g.sends) != 3 {
			t.Fatalf("%d sends", len(g.sends))
		}
		if gap := g.sends[1].Sub(g.sends[0]); gap < 90*time.Second || gap > 91*time.Second {
			t.Fatalf("waited %v after Retry-After 90 with a 2s hint, want 90s", gap)
		}
		if gap := g.sends[2].Sub(g.sends[1]); gap < 45*time.Second || gap > 46*time.Second {
			t.Fatalf("waited %v after a 45s hint, want 45s", gap)
		}
	})
}

func TestLoopPermanentCodeOneRequest(t *testing.T) {
	tests := []struct {
		name string
		turn providertest.Turn
		code string
	}{
		{"misalignment", providertest.Failed("misalignment_policy_violation", "Temporary issue, please try again in 1s"), "misalignment_policy_violation"},
		{"overloaded 503", providertest.Status(503, "server_error", "server_is_overloaded", "retry later"), "server_is_overloaded"},
		{"quota 429", providertest.Status(429, "insufficient_quota", "insufficient_quota", "try again in 20ms"), "insufficient_quota"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newRecRig(t, recRigOpt{})
				g.srv.Enqueue(tt.turn, providertest.Text("never"))
				res, evs := g.run(context.Background(), "hi")
				pe, ok := errors.AsType[*PermanentError](res.Err)
				if res.Outcome != OutcomeFailed || !ok || pe.Code != tt.code {
					t.Fatalf("outcome %s err %v, want failed with *PermanentError{%s}", res.Outcome, res.Err, tt.code)
				}
				if !strings.Contains(res.Err.Error(), tt.code) {
					t.Fatalf("error %q does not name the code", res.Err)
				}
				if n := len(g.srv.Requests()); n != 1 {
					t.Fatalf("%d requests, want exactly 1", n)
				}
				if n := len(eventsOf[*ProviderRetry](evs)); n != 0 {
					t.Fatalf("%d provider_retry events", n)
				}
			})
		})
	}
}

func TestLoopFourteenDayOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{})
		g.srv.Enqueue(providertest.Text("back online"))
		start := time.Now()
		var ledger []byte
		calls := 0
		g.gate = func(*http.Request) error {
			calls++
			if calls == 1 {
				ledger = g.fileBytes()
			} else if !bytes.Equal(ledger, g.fileBytes()) {
				t.Errorf("session ledger changed during the outage (call %d)", calls)
			}
			if s, a := g.policy.Spent(); s != 0 || a != 0 {
				t.Errorf("outage spent inference budget %d/%d", s, a)
			}
			if time.Since(start) < 14*24*time.Hour {
				return netUnreachable()
			}
			return nil
		}
		res, evs := g.run(context.Background(), "hi")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		retries := eventsOf[*ProviderRetry](evs)
		if len(retries) < 20000 {
			t.Fatalf("%d waits in 14 days, want > 20000 (capped at 60s)", len(retries))
		}
		for _, e := range retries {
			if e.RetryKind != RetryWaitingForNetwork || e.MaxAttempts != nil || e.DelayMs > 60_000 {
				t.Fatalf("outage event %+v", e)
			}
		}
		if n := len(g.srv.Requests()); n != 1 {
			t.Fatalf("server saw %d requests, want 1", n)
		}
		if tot := g.sess.Totals(); tot.Uncertain {
			t.Fatal("pre-send waiting invented unknown usage")
		}
		if len(eventsOf[*ProviderUsageUncertain](evs)) != 0 {
			t.Fatal("pre-send waiting emitted provider_usage_uncertain")
		}
	})
}

func TestLoopCancelDuringBackoffWinsAtOnce(t *testing.T) {
	tests := []struct {
		name   string
		gate   func(*http.Request) error
		script []providertest.Turn
	}{
		{"network wait", func(*http.Request) error { return netUnreachable() }, nil},
		{"inference backoff", nil, repeatTurn(providertest.Status(503, "server_error", "", "x").WithRetryAfter("3600"), 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newRecRig(t, recRigOpt{})
				g.gate = tt.gate
				g.srv.Enqueue(tt.script...)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				r, err := g.agent.Prompt(ctx, "hi", PromptOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var evs []Event
				for e := range r.Events() {
					evs = append(evs, e)
					if _, ok := e.(*ProviderRetry); ok && len(eventsOf[*ProviderRetry](evs)) == 3 {
						// The run is now waiting; let the backoff start.
						synctest.Wait()
						cancel()
						cancelled := time.Now()
						for e := range r.Events() {
							evs = append(evs, e)
						}
						if d := time.Since(cancelled); d != 0 {
							t.Fatalf("cancellation took %v of virtual time", d)
						}
					}
				}
				if res := r.Wait(); res.Outcome != OutcomeCancelled {
					t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
				}
			})
		})
	}
}

func TestLoopLoopbackStreamRecovery(t *testing.T) {
	g := newRecRig(t, recRigOpt{loopback: true})
	full := providertest.Text("over a real socket")
	g.srv.Enqueue(full.DropAfter(3), full.MalformedAt(3), full.InvalidUTF8At(4), full)
	res, evs := g.run(context.Background(), "hi")
	if res.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	retries := eventsOf[*ProviderRetry](evs)
	if len(retries) != 3 {
		t.Fatalf("%d retries, want 3", len(retries))
	}
	reasons := []string{retries[0].Reason, retries[1].Reason, retries[2].Reason}
	if strings.Join(reasons, ",") != "body_interrupted,stream_decode_json,stream_decode_utf8" {
		t.Fatalf("reasons %v", reasons)
	}
	if g.sess.Totals().UncertainMarkers != 3 {
		t.Fatalf("markers %d, want 3", g.sess.Totals().UncertainMarkers)
	}
}

func TestLoopLoopbackPermanentAfterHTTP(t *testing.T) {
	g := newRecRig(t, recRigOpt{loopback: true})
	g.srv.Enqueue(turn503(), providertest.Failed("cyber_policy", "internal error, retry"), providertest.Text("never"))
	res, _ := g.run(context.Background(), "hi")
	if pe, ok := errors.AsType[*PermanentError](res.Err); !ok || pe.Code != "cyber_policy" {
		t.Fatalf("err %v, want permanent cyber_policy", res.Err)
	}
	if n := len(g.srv.Requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

func TestLoopHardCeilingWithUncertaintyRefuses(t *testing.T) {
	dir := t.TempDir()
	budget := &Budget{Ceilings: Ceilings{MaxTokens: 1_000_000}, Prices: DefaultPrices()}
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{dir: dir, budget: budget})
		g.srv.Enqueue(eofTurn(), providertest.Text("never reached"))
		res, _ := g.run(context.Background(), "first")
		ce, ok := errors.AsType[*CeilingError](res.Err)
		if res.Outcome != OutcomeFailed || !ok || !ce.Uncertain {
			t.Fatalf("first run: outcome %s err %v, want failed with an uncertainty ceiling refusal", res.Outcome, res.Err)
		}
		if n := len(g.srv.Requests()); n != 1 {
			t.Fatalf("%d requests: under a hard ceiling an uncertain failure stops after the first", n)
		}
		// The next run refuses before sending anything.
		res, _ = g.run(context.Background(), "second")
		if _, ok := errors.AsType[*CeilingError](res.Err); !ok || res.Outcome != OutcomeFailed {
			t.Fatalf("second run: outcome %s err %v", res.Outcome, res.Err)
		}
		if n := len(g.srv.Requests()); n != 1 {
			t.Fatalf("second run sent a request (%d total)", n)
		}
		g.sess.Close()
	})
	// Reopen the durable session with a fresh agent and policy: still refused.
	path := onlySession(t, dir)
	synctest.Test(t, func(t *testing.T) {
		s, err := session.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		srv := providertest.NewInProcess(t)
		srv.Enqueue(providertest.Text("never reached"))
		tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), RoundTripper: srv.RoundTripper(), Features: provider.FeatureCodexProfile})
		pol := NewCodexRecovery(RecoveryConfig{Profile: ProfileCodex, Wire: provider.WireResponses, Model: codexModel, Endpoint: provider.FeatureCodexProfile, Budget: budget})
		a, err := New(Config{Session: s, Transport: tr, Model: codexModel, Host: tools.NewHost(), Broker: tools.NewBroker(tools.BrokerConfig{}), Retry: pol, Principal: "test"})
		if err != nil {
			t.Fatal(err)
		}
		r, err := a.Prompt(context.Background(), "after reopen", PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var uncertainAtStart bool
		for e := range r.Events() {
			if _, ok := e.(*ProviderUsageUncertain); ok && e.Seq() == 2 {
				uncertainAtStart = true
			}
		}
		res := r.Wait()
		if _, ok := errors.AsType[*CeilingError](res.Err); !ok {
			t.Fatalf("after reopen: outcome %s err %v, want a ceiling refusal", res.Outcome, res.Err)
		}
		if len(srv.Requests()) != 0 {
			t.Fatal("after reopen a request was sent despite outstanding uncertainty")
		}
		if !uncertainAtStart {
			t.Fatal("provider_usage_uncertain not emitted at the start of a run on an uncertain session")
		}
	})
}

func TestLoopNetworkWaitLimit(t *testing.T) {
	t.Run("pre-send outage", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newRecRig(t, recRigOpt{})
			g.policy.SetMaxNetworkWait(10 * time.Minute)
			start := time.Now()
			g.gate = func(*http.Request) error { return netUnreachable() }
			res, _ := g.run(context.Background(), "hi")
			nw, ok := errors.AsType[*NetworkWaitLimit](res.Err)
			if !ok || nw.UsageUnknown {
				t.Fatalf("err %v, want NetworkWaitLimit without unknown usage", res.Err)
			}
			if d := time.Since(start); d != 10*time.Minute {
				t.Fatalf("gave up after %v, want exactly the 10m bound", d)
			}
			if g.sess.Totals().Uncertain {
				t.Fatal("pre-send outage invented unknown usage")
			}
		})
	})
	t.Run("deadline cuts a dispatched opening", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newRecRig(t, recRigOpt{})
			g.policy.SetMaxNetworkWait(time.Minute)
			calls := 0
			g.gate = func(req *http.Request) error {
				calls++
				if calls < 3 {
					return netUnreachable()
				}
				// The network is back: the request is written, then the
				// connection hangs until the outage deadline cuts it.
				if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.WroteHeaders != nil {
					tr.WroteHeaders()
				}
				<-req.Context().Done()
				return req.Context().Err()
			}
			res, evs := g.run(context.Background(), "hi")
			nw, ok := errors.AsType[*NetworkWaitLimit](res.Err)
			if !ok || !nw.UsageUnknown {
				t.Fatalf("err %v, want NetworkWaitLimit{UsageUnknown: true}", res.Err)
			}
			if tot := g.sess.Totals(); tot.UncertainMarkers != 1 {
				t.Fatalf("durable markers %d, want 1 before returning", tot.UncertainMarkers)
			}
			if len(eventsOf[*ProviderUsageUncertain](evs)) != 1 {
				t.Fatal("provider_usage_uncertain not emitted")
			}
		})
	})
}

// newLoopbackFallback builds an agent on a real loopback scripted server
// whose WebSocket transport (with wsFeatures) falls back to HTTP, under the
// Codex recovery policy with a millisecond backoff. rejectWS makes the
// server refuse the WebSocket handshake with 426.
func newLoopbackFallback(t *testing.T, wsFeatures provider.ResponsesFeatures, rejectWS bool) (*providertest.Server, *Agent, *session.Session, *CodexRecovery, *FallbackTransport) {
	t.Helper()
	srv := providertest.New(t)
	if rejectWS {
		srv.RejectWebSocket(426)
	}
	ws := provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), Features: wsFeatures})
	t.Cleanup(func() { ws.Close() })
	fb := NewFallbackTransport(ws, provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), Features: provider.FeatureCodexProfile}))
	dir := t.TempDir()
	sess, err := session.Create(dir, session.Header{Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	pol := NewCodexRecovery(RecoveryConfig{Profile: ProfileCodex, Wire: provider.WireResponses, Model: codexModel, Endpoint: fb.EndpointFeatures(), WebSocket: true, InitialBackoff: time.Millisecond})
	a, err := New(Config{Session: sess, Transport: fb, Model: codexModel, Host: tools.NewHost(), Broker: tools.NewBroker(tools.BrokerConfig{}), Retry: pol, Principal: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return srv, a, sess, pol, fb
}

// promptDone runs prompt text on a to its end and returns its result.
func promptDone(t *testing.T, a *Agent, text string) RunResult {
	t.Helper()
	r, err := a.Prompt(context.Background(), text, PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	return r.Wait()
}

func TestLoopLoopbackWebSocketFallback(t *testing.T) {
	srv, a, sess, pol, _ := newLoopbackFallback(t, provider.FeatureCodexProfile|provider.FeatureWebSocket, false)
	full := providertest.Text("answer after fallback")
	srv.Enqueue(repeatTurn(full.DropAfter(3), 7)...) // six over the WebSocket, one over HTTP
	srv.Enqueue(full)
	res := promptDone(t, a, "hi")
	if res.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	var transports []string
	for _, q := range srv.Requests() {
		transports = append(transports, q.Transport)
	}
	want := "websocket websocket websocket websocket websocket websocket http http"
	if strings.Join(transports, " ") != want {
		t.Fatalf("transports %v, want %s (fallback after five WebSocket retries, budget kept)", transports, want)
	}
	if s, _ := pol.Spent(); s != 0 {
		t.Fatalf("completed turn left %d spent", s)
	}
	if sess.Totals().UncertainMarkers != 7 {
		t.Fatalf("markers %d, want 7", sess.Totals().UncertainMarkers)
	}
}

func TestLoopLoopbackHandshakeFallback(t *testing.T) {
	srv, a, sess, _, fb := newLoopbackFallback(t, provider.FeatureCodexProfile, true)
	srv.Enqueue(providertest.Text("over http"))
	if res := promptDone(t, a, "hi"); res.Outcome != OutcomeCompleted || !fb.OnHTTP() {
		t.Fatalf("outcome %s (%v), on HTTP %v", res.Outcome, res.Err, fb.OnHTTP())
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Transport != "http" {
		t.Fatalf("requests %+v", reqs)
	}
	if sess.Totals().Uncertain {
		t.Fatal("a refused handshake invented unknown usage")
	}
}

// TestLoopLoopbackHandshake5xxKnownUsage: a WebSocket handshake refused
// with 503 sent no request (response.create goes over the socket once it
// is open), so it is retried without marking the session's usage
// uncertain; the retried handshake carries the turn.
func TestLoopLoopbackHandshake5xxKnownUsage(t *testing.T) {
	srv, a, sess, _, _ := newLoopbackFallback(t, provider.FeatureCodexProfile|provider.FeatureWebSocket, false)
	srv.RejectWebSocket(503)
	srv.Enqueue(providertest.Text("after a refused handshake"))
	if res := promptDone(t, a, "hi"); res.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Transport != "websocket" {
		t.Fatalf("requests %+v, want the one over the reopened WebSocket", reqs)
	}
	if tot := sess.Totals(); tot.Uncertain || tot.UncertainMarkers != 0 {
		t.Fatalf("a handshake refused with 503 made usage uncertain: %+v", tot)
	}
}

func TestLoopCompactionRetryIsOperationScoped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		small := provider.Model{Name: "small", ContextWindow: 20_000, MaxOutputTokens: 100_000, Features: provider.FeatureCodexProfile}
		g := newRecRig(t, recRigOpt{model: small})
		g.srv.Enqueue(providertest.Text("ok one").WithUsage(provider.Usage{InputTokens: 3700, OutputTokens: 10}))
		if res, _ := g.run(context.Background(), "FIRSTPROMPT "+strings.Repeat("x ", 7000)); res.Outcome != OutcomeCompleted {
			t.Fatalf("first run %s: %v", res.Outcome, res.Err)
		}
		g.srv.Enqueue(
			providertest.Text("SUMMARY partial").EOFAfter(5), // the summary request is interrupted
			providertest.Text("SUMMARY-XYZ the user asked about x").WithUsage(provider.Usage{InputTokens: 3000, OutputTokens: 20}),
			providertest.Text("answer after compaction"),
		)
		res, evs := g.run(context.Background(), "again")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		retries := eventsOf[*ProviderRetry](evs)
		if len(retries) != 1 || retries[0].Operation == nil || *retries[0].Operation != OperationCompaction || retries[0].RetryKind != RetryInterruptedInference {
			t.Fatalf("retries %+v, want one compaction-scoped replacement", retries)
		}
		if n := len(eventsOf[*RecoveredOutput](evs)); n != 0 {
			t.Fatalf("%d recovered_output events for an auxiliary request", n)
		}
		recs := readFile(t, g.sess.Path())
		var compUsage, compUncertain, compEntries int
		for _, r := range recs {
			switch {
			case r.str("kind") == "usage" && r.str("operation") == OperationCompaction:
				compUsage++
			case r.str("kind") == "usage_uncertain" && r.str("operation") == OperationCompaction:
				compUncertain++
			case r.str("kind") == "entry" && r.str("type") == "compaction":
				compEntries++
			}
		}
		if compUsage != 1 || compUncertain != 1 || compEntries != 1 {
			t.Fatalf("compaction usage %d, uncertain %d, entries %d; want 1, 1, 1 (usage only on success)", compUsage, compUncertain, compEntries)
		}
	})
}

func TestLoopControlsDuringBackoffReachPreparation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{})
		start := time.Now()
		g.gate = func(*http.Request) error {
			if time.Since(start) < 3*time.Minute {
				return netUnreachable()
			}
			return nil
		}
		g.srv.Enqueue(providertest.Text("final"))
		r, err := g.agent.Prompt(context.Background(), "hi", PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waits := 0
		for e := range r.Events() {
			if _, ok := e.(*ProviderRetry); ok {
				waits++
				switch waits {
				case 1:
					if _, err := r.Steer("STEER-DURING-WAIT"); err != nil {
						t.Errorf("steer during backoff: %v", err)
					}
				case 2:
					if err := r.FinishNow("wrap up"); err != nil {
						t.Errorf("finish now during backoff: %v", err)
					}
				}
			}
		}
		if res := r.Wait(); res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		reqs := g.srv.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests", len(reqs))
		}
		body := string(reqs[0].Raw)
		if !strings.Contains(body, "STEER-DURING-WAIT") || !strings.Contains(body, "wrap up") {
			t.Fatalf("controls accepted during backoff are missing from the replacement: %s", body)
		}
		if reqs[0].Body["tool_choice"] != "none" {
			t.Fatalf("FinishNow during backoff not sticky: tool_choice %v", reqs[0].Body["tool_choice"])
		}
	})
}

func TestLoopCredentialUnavailableWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var asked int
		cred := func(context.Context) (string, error) {
			asked++
			if asked <= 50 {
				return "", errors.New("keychain locked")
			}
			return "sk-test-not-a-secret", nil
		}
		g := newRecRig(t, recRigOpt{credential: cred})
		g.srv.Enqueue(providertest.Text("hello"))
		res, evs := g.run(context.Background(), "hi")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		retries := eventsOf[*ProviderRetry](evs)
		if len(retries) != 50 {
			t.Fatalf("%d waits, want 50", len(retries))
		}
		for _, e := range retries {
			if e.RetryKind != RetryWaitingForNetwork || e.MaxAttempts != nil || e.Reason != "auth_unavailable" {
				t.Fatalf("credential wait %+v", e)
			}
		}
		if g.sess.Totals().Uncertain || len(g.srv.Requests()) != 1 {
			t.Fatalf("uncertain %v, requests %d", g.sess.Totals().Uncertain, len(g.srv.Requests()))
		}
	})
}

func TestLoopOutageDeadlineSparesHealthyBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{})
		g.policy.SetMaxNetworkWait(time.Minute)
		start := time.Now()
		g.gate = func(*http.Request) error {
			if time.Since(start) < 30*time.Second {
				return netUnreachable()
			}
			return nil
		}
		// The reconnected response streams for far longer than the outage
		// allowance; only the opening was bounded by it.
		g.srv.Enqueue(providertest.Text("a slow but healthy answer").Pace(10 * time.Second))
		res, _ := g.run(context.Background(), "hi")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		if d := time.Since(start); d < 2*time.Minute {
			t.Fatalf("the body finished after %v; the test wants it to outlive the 1m outage bound", d)
		}
	})
}

func TestLoopStreamFailureAfterOutageIsAReplacement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{})
		g.policy.SetMaxNetworkWait(time.Minute)
		start := time.Now()
		g.gate = func(*http.Request) error {
			if time.Since(start) < 30*time.Second {
				return netUnreachable()
			}
			return nil
		}
		// The network is back; the body then breaks after the outage bound
		// has passed. That is a stream failure, not an outage.
		slow := providertest.Text("one two three four five six seven").Pace(10 * time.Second)
		g.srv.Enqueue(slow.DropAfter(slow.FrameCount()-2), providertest.Text("recovered"))
		res, evs := g.run(context.Background(), "hi")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		retries := eventsOf[*ProviderRetry](evs)
		last := retries[len(retries)-1]
		if last.RetryKind != RetryInterruptedInference || last.Reason != "body_interrupted" {
			t.Fatalf("last retry %+v, want a stream replacement", last)
		}
	})
}

func TestLoopCostInPicodollarsAndCostCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// $1.25 / $0.125 / $10 per million tokens (gpt-5.1-codex list price).
		budget := &Budget{Ceilings: Ceilings{MaxCost: 10_000_000_000}, Prices: DefaultPrices()} // one cent
		g := newRecRig(t, recRigOpt{budget: budget})
		g.srv.Enqueue(providertest.Text("priced").WithUsage(provider.Usage{InputTokens: 2000, CachedTokens: 1000, OutputTokens: 900, ReasoningTokens: 300}))
		res, evs := g.run(context.Background(), "hi")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		want := int64(1000*1_250_000 + 1000*125_000 + 900*10_000_000) // $0.010375
		if got := g.sess.Totals().Known.CostPicodollars; got != want {
			t.Fatalf("durable cost %d picodollars, want %d", got, want)
		}
		usage := eventsOf[*Usage](evs)
		if len(usage) != 1 || usage[0].CostMicros == nil || *usage[0].CostMicros != want/1_000_000 {
			t.Fatalf("usage events %+v, want costMicros %d", usage, want/1_000_000)
		}
		// The spend is above the one-cent ceiling: the next run is refused
		// before anything is sent.
		g.srv.Enqueue(providertest.Text("never"))
		res, _ = g.run(context.Background(), "again")
		if ce, ok := errors.AsType[*CeilingError](res.Err); !ok || ce.Limit != "cost" || ce.Used != want {
			t.Fatalf("second run: %v, want a cost ceiling refusal", res.Err)
		}
		if n := len(g.srv.Requests()); n != 1 {
			t.Fatalf("%d requests, want 1", n)
		}
	})
}

// TestLoopHardCeilingWithUnreportedUsageRefuses: under a hard ceiling, a
// completed response that reports no usage leaves the ceiling unable to
// count what it cost: it is recorded as usage uncertainty, and the next
// request is refused (fail closed) instead of every later request running
// uncounted past the ceiling. Without a ceiling it stays certain.
func TestLoopHardCeilingWithUnreportedUsageRefuses(t *testing.T) {
	budget := &Budget{Ceilings: Ceilings{MaxTokens: 1_000}, Prices: DefaultPrices()}
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{budget: budget})
		g.srv.Enqueue(
			providertest.Reply(providertest.FunctionCall("call_1", "nope", `{}`)).WithoutUsage(),
			providertest.Text("never reached"),
		)
		res, evs := g.run(context.Background(), "first")
		ce, ok := errors.AsType[*CeilingError](res.Err)
		if res.Outcome != OutcomeFailed || !ok || !ce.Uncertain {
			t.Fatalf("outcome %s err %v, want failed with an uncertainty ceiling refusal", res.Outcome, res.Err)
		}
		if n := len(g.srv.Requests()); n != 1 {
			t.Fatalf("%d requests, want 1: the second would run past an uncounted ceiling", n)
		}
		if !strings.Contains(res.Err.Error(), "without reporting its usage") {
			t.Errorf("the refusal does not say why: %v", res.Err)
		}
		if len(eventsOf[*ProviderUsageUncertain](evs)) != 1 {
			t.Errorf("no provider_usage_uncertain event")
		}
		if tot := g.sess.Totals(); !tot.Uncertain || tot.UncertainMarkers != 1 {
			t.Errorf("totals %+v, want one durable marker", tot)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{})
		g.srv.Enqueue(providertest.Text("hello").WithoutUsage())
		if res, _ := g.run(context.Background(), "first"); res.Outcome != OutcomeCompleted || !res.Usage.Complete {
			t.Fatalf("without a ceiling: outcome %s complete %v (%v)", res.Outcome, res.Usage.Complete, res.Err)
		}
	})
}
