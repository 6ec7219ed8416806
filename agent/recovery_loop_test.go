package agent

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
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
}

func newRecRig(t *testing.T, o recRigOpt) *recRig {
	t.Helper()
	g := &recRig{t: t, dir: o.dir}
	if g.dir == "" {
		g.dir = t.TempDir()
	}
	var cfg provider.HTTPConfig
	if o.loopback {
		g.srv = providertest.New(t)
	} else {
		g.srv = providertest.NewInProcess(t)
		cfg.RoundTripper = recTripper{g: g, next: g.srv.RoundTripper()}
	}
	cfg.BaseURL, cfg.Features, cfg.Credential = g.srv.URL(), provider.FeatureCodexProfile, o.credential
	cfg.IdleTimeout = 30 * time.Second
	var err error
	g.sess, err = session.Create(g.dir, session.Header{Cwd: g.dir, Title: "recovery"})
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	t.Cleanup(func() { g.sess.Close() })
	g.policy = NewCodexRecovery(RecoveryConfig{
		Profile: ProfileCodex, Model: codexModel, Endpoint: cfg.Features, Budget: o.budget, Seed: 7,
	})
	g.agent, err = New(Config{
		Session: g.sess, Transport: provider.NewHTTP(cfg), Model: codexModel,
		Host: tools.NewHost(), Broker: tools.NewBroker(tools.BrokerConfig{}),
		Instructions: "You are a test agent.", Retry: g.policy, Principal: "test",
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

func TestLoopFourEOFsThenSuccessKeepUnknownUsage(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{dir: dir})
		g.srv.Enqueue(repeatTurn(eofTurn(), 4)...)
		g.srv.Enqueue(providertest.Text("done"))
		res, _ := g.run(context.Background(), "hello")
		if res.Outcome != OutcomeCompleted || res.Usage.Complete {
			t.Fatalf("outcome %s complete %v (%v)", res.Outcome, res.Usage.Complete, res.Err)
		}
		if res.Usage.Requests != 1 || res.Usage.Input != 100 {
			t.Fatalf("known usage %+v: only the successful response counts", res.Usage)
		}
		g.sess.Close()
	})
	// The uncertainty is durable: reopening the file still reports it.
	path := onlySession(t, dir)
	s, err := session.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if tot := s.Totals(); !tot.Uncertain || tot.UncertainMarkers != 4 || tot.Own.Input != 100 {
		t.Fatalf("reopened totals %+v, want 4 markers and a 100-token known subtotal", tot)
	}
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
