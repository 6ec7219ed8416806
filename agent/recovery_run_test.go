package agent

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// TestLoopCancelledRunLeavesNoRecoveryState cancels runs in the middle of
// a bounded network outage and of a stream-failure streak; the next run of
// the same agent (a new logical turn) must start with a fresh envelope and
// no stale outage deadline.
func TestLoopCancelledRunLeavesNoRecoveryState(t *testing.T) {
	t.Run("outage", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newRecRig(t, recRigOpt{})
			g.policy.SetMaxNetworkWait(time.Minute)
			down := true
			g.gate = func(*http.Request) error {
				if down {
					return netUnreachable()
				}
				return nil
			}
			cancelAfterRetries(t, g, 2)
			// Long after the first outage's deadline the network is back.
			time.Sleep(time.Hour)
			down = false
			g.srv.Enqueue(providertest.Text("back"))
			res, _ := g.run(context.Background(), "again")
			if res.Outcome != OutcomeCompleted {
				t.Fatalf("run after a cancelled outage: outcome %s: %v (stale outage deadline)", res.Outcome, res.Err)
			}
		})
	})
	t.Run("stream budget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newRecRig(t, recRigOpt{})
			g.srv.Enqueue(repeatTurn(eofTurn(), 9)...)
			cancelAfterRetries(t, g, 9) // nine failed requests, cancelled in the ninth backoff
			if g.srv.Pending() != 0 {
				t.Fatalf("%d scripted turns left", g.srv.Pending())
			}
			// A fresh turn allows eleven replacements again.
			g.srv.Enqueue(repeatTurn(eofTurn(), 11)...)
			g.srv.Enqueue(providertest.Text("recovered"))
			res, evs := g.run(context.Background(), "again")
			if res.Outcome != OutcomeCompleted {
				t.Fatalf("new run after a cancelled streak: outcome %s: %v", res.Outcome, res.Err)
			}
			if r := eventsOf[*ProviderRetry](evs); len(r) != 11 || r[0].Attempt != 1 || *r[0].MaxAttempts != 11 {
				t.Fatalf("retries of the new run %d, first %+v; want 11 from a fresh envelope", len(r), r[0])
			}
		})
	})
}

// cancelAfterRetries prompts, cancels the run during the backoff after
// the n-th provider_retry and drains it.
func cancelAfterRetries(t *testing.T, g *recRig, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := g.agent.Prompt(ctx, "hi", PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for e := range r.Events() {
		if _, ok := e.(*ProviderRetry); ok {
			if seen++; seen == n {
				cancel()
			}
		}
	}
	if res := r.Wait(); res.Outcome != OutcomeCancelled {
		t.Fatalf("outcome %s: %v, want cancelled", res.Outcome, res.Err)
	}
}

// TestLoopMisalignmentKeepsCompletedEffects: a turn whose tool already ran
// is followed by a misalignment_policy_violation with a retry-sounding
// message. The run fails at once with the typed permanent error, after
// exactly one request for that turn, and nothing completed is undone: the
// tool's workspace effect and its durable result stay, and the run is
// settled with one failed checkpoint.
func TestLoopMisalignmentKeepsCompletedEffects(t *testing.T) {
	probe := &probeTool{name: "probe", effect: tools.Pure}
	var h *harness
	probe.onExec = func(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
		if err := os.WriteFile(filepath.Join(h.root, "effect.txt"), []byte("done"), 0o644); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Text: "wrote effect.txt"}, nil
	}
	srv := providertest.New(t)
	tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), Features: provider.FeatureCodexProfile})
	pol := NewCodexRecovery(RecoveryConfig{Profile: ProfileCodex, Wire: provider.WireResponses, Model: codexModel, Endpoint: provider.FeatureCodexProfile, InitialBackoff: time.Millisecond})
	h = newHarness(t, harnessOpt{extra: []tools.Tool{probe}, retry: pol, transport: tr, model: codexModel})
	srv.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "probe", `{"n":1}`)),
		providertest.Failed("misalignment_policy_violation", "Temporary issue, please try again in 1s"),
		providertest.Text("never"),
	)
	r := h.prompt("do it", PromptOptions{})
	evs := drain(t, r)
	res := r.Wait()
	pe, ok := errors.AsType[*PermanentError](res.Err)
	if res.Outcome != OutcomeFailed || !ok || pe.Code != "misalignment_policy_violation" {
		t.Fatalf("outcome %s err %v, want failed with *PermanentError{misalignment_policy_violation}", res.Outcome, res.Err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("%d requests, want 2 (no retry of the refused turn)", n)
	}
	if n := len(eventsOf[*ProviderRetry](evs)); n != 0 {
		t.Fatalf("%d provider_retry events", n)
	}
	if b, err := os.ReadFile(filepath.Join(h.root, "effect.txt")); err != nil || string(b) != "done" {
		t.Fatalf("completed effect lost: %q, %v", b, err)
	}
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeFailed)
	if resultFor(recs, "call_1") == nil {
		t.Fatal("the completed tool result is not durable")
	}
	if probe.executed.Load() != 1 {
		t.Fatalf("tool executed %d times", probe.executed.Load())
	}
}

// TestRunStartedReseedsJitter: one policy serves all runs of an agent; each
// run's network-wait jitter is seeded from its run id, so two runs with the
// same configured seed do not wait in lockstep, and the same run id
// reproduces its delays.
func TestRunStartedReseedsJitter(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	delays := func(run string) []time.Duration {
		p.RunStarted(run)
		var out []time.Duration
		for range 5 {
			out = append(out, p.Decide(netDown()).Delay)
		}
		return out
	}
	a, b, a2 := delays("run-a"), delays("run-b"), delays("run-a")
	if slices.Equal(a, b) {
		t.Fatalf("runs a and b waited the same jittered delays %v", a)
	}
	if !slices.Equal(a, a2) {
		t.Fatalf("run a's delays %v then %v: RunStarted did not restart the outage", a, a2)
	}
}

// TestNetworkWaitMidTurnKeepsSpentBudget: an outage in the middle of a
// streak of stream failures neither resets nor spends the envelope.
func TestNetworkWaitMidTurnKeepsSpentBudget(t *testing.T) {
	p, clk := newTestPolicy(t, nil)
	for range 5 {
		if d := p.Decide(eofFailure()); !d.Retry {
			t.Fatal(d.Err)
		}
	}
	for range 100 {
		d := p.Decide(netDown())
		if !d.Retry {
			t.Fatal(d.Err)
		}
		clk.advance(d.Delay)
	}
	if s, a := p.Spent(); s != 5 || a != 0 {
		t.Fatalf("spent %d/%d after the outage, want 5/0", s, a)
	}
	if attempts, _ := drive(p, repeat(eofFailure(), 20)); attempts != 7 {
		t.Fatalf("after the outage %d more attempts, want 7 (6 replacements left)", attempts)
	}
}

// TestLoopUnqualifiedRouteNeverReplays drives the real loop on routes
// that lack one qualification (the model does not grant the Codex profile;
// the host did not select the Codex runtime profile): an interrupted
// stream and a pre-send outage each end the run after the one request,
// the error names the disqualification, and the dispatched failure's
// usage stays durably unknown.
func TestLoopUnqualifiedRouteNeverReplays(t *testing.T) {
	plain := provider.Model{Name: "gpt-5.1", ContextWindow: 400_000, MaxOutputTokens: 128_000}
	tests := []struct {
		name      string
		model     provider.Model
		noProfile bool
		outage    bool
	}{
		{"model lacks codex profile", plain, false, false},
		{"host profile not codex", codexModel, true, false},
		{"pre-send outage", plain, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newRecRig(t, recRigOpt{model: tt.model, noProfile: tt.noProfile})
				if tt.outage {
					g.gate = func(*http.Request) error { return netUnreachable() }
				}
				g.srv.Enqueue(eofTurn(), providertest.Text("never"))
				res, evs := g.run(context.Background(), "hi")
				if res.Outcome != OutcomeFailed || !errors.Is(res.Err, ErrUnqualifiedRoute) {
					t.Fatalf("outcome %s err %v, want failed wrapping ErrUnqualifiedRoute", res.Outcome, res.Err)
				}
				if n := len(eventsOf[*ProviderRetry](evs)); n != 0 {
					t.Fatalf("%d provider_retry events on an unqualified route", n)
				}
				sent, wantSent := len(g.srv.Requests()), 1
				if tt.outage {
					wantSent = 0
				}
				if sent != wantSent {
					t.Fatalf("%d requests reached the server, want %d (no replay)", sent, wantSent)
				}
				if got := g.sess.Totals().Uncertain; got != !tt.outage {
					t.Fatalf("durable uncertainty %v, want %v", got, !tt.outage)
				}
			})
		})
	}
}

// TestLoopLoopbackFallbackKeepsStreamBudget: over real sockets, twelve
// interrupted streams exhaust the turn although six of them went over the
// WebSocket and six over HTTP: the fallback did not reset the envelope.
func TestLoopLoopbackFallbackKeepsStreamBudget(t *testing.T) {
	srv, a, sess, _, _ := newLoopbackFallback(t, provider.FeatureCodexProfile|provider.FeatureWebSocket, false)
	full := providertest.Text("never completes")
	srv.Enqueue(repeatTurn(full.DropAfter(3), 13)...)
	r, err := a.Prompt(context.Background(), "hi", PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	res := r.Wait()
	if ex, ok := errors.AsType[*ExhaustedError](res.Err); !ok || ex.Budget != "stream" || ex.Attempts != 12 {
		t.Fatalf("outcome %s err %v, want stream exhaustion after 12 attempts", res.Outcome, res.Err)
	}
	var transports []string
	for _, q := range srv.Requests() {
		transports = append(transports, q.Transport)
	}
	want := strings.TrimSpace(strings.Repeat("websocket ", 6) + strings.Repeat("http ", 6))
	if strings.Join(transports, " ") != want {
		t.Fatalf("transports %v, want %s", transports, want)
	}
	if sess.Totals().UncertainMarkers != 12 {
		t.Fatalf("markers %d, want 12", sess.Totals().UncertainMarkers)
	}
}

// TestLoopOutageEndsWhenAuxiliaryOpens: an outage met by the compaction
// request ends when that request opens; its healthy body may outlive the
// outage bound, and the main request after it is not cut by the stale
// deadline.
func TestLoopOutageEndsWhenAuxiliaryOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		small := provider.Model{Name: "small", ContextWindow: 20_000, MaxOutputTokens: 100_000, Features: provider.FeatureCodexProfile}
		g := newRecRig(t, recRigOpt{model: small})
		g.srv.Enqueue(providertest.Text("ok one").WithUsage(provider.Usage{InputTokens: 3700, OutputTokens: 10}))
		if res, _ := g.run(context.Background(), "FIRSTPROMPT "+strings.Repeat("x ", 7000)); res.Outcome != OutcomeCompleted {
			t.Fatalf("first run %s: %v", res.Outcome, res.Err)
		}
		g.policy.SetMaxNetworkWait(time.Minute)
		start := time.Now()
		g.gate = func(*http.Request) error {
			if time.Since(start) < 30*time.Second {
				return netUnreachable()
			}
			return nil
		}
		g.srv.Enqueue(
			providertest.Text("SUMMARY of a slow but healthy compaction").Pace(10*time.Second),
			providertest.Text("answer after compaction"),
		)
		res, evs := g.run(context.Background(), "again")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		if time.Since(start) < 2*time.Minute {
			t.Fatal("the compaction body did not outlive the outage bound; the test proves nothing")
		}
		waits := eventsOf[*ProviderRetry](evs)
		if len(waits) == 0 || waits[0].Operation == nil || *waits[0].Operation != OperationCompaction || waits[0].RetryKind != RetryWaitingForNetwork {
			t.Fatalf("retries %+v, want compaction-scoped network waits", waits)
		}
	})
}

// TestLoopLaterCeilingActivationFailsClosed: a session whose uncertainty
// arose with no ceiling (the run recovered and completed) is refused before
// sending once it is reopened under a hard token ceiling.
func TestLoopLaterCeilingActivationFailsClosed(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{dir: dir})
		g.srv.Enqueue(eofTurn(), providertest.Text("recovered"))
		if res, _ := g.run(context.Background(), "first"); res.Outcome != OutcomeCompleted || res.Usage.Complete {
			t.Fatalf("first run: outcome %s complete %v (%v)", res.Outcome, res.Usage.Complete, res.Err)
		}
		g.sess.Close()
	})
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{dir: t.TempDir(), budget: &Budget{Ceilings: Ceilings{MaxTokens: 1_000_000}}})
		s, err := session.Open(onlySession(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		a, err := New(Config{Session: s, Transport: g.agent.cfg.Transport, Model: codexModel, Host: tools.NewHost(),
			Broker: tools.NewBroker(tools.BrokerConfig{}), Retry: g.policy, Principal: "test"})
		if err != nil {
			t.Fatal(err)
		}
		g.srv.Enqueue(providertest.Text("never"))
		r, err := a.Prompt(context.Background(), "after activation", PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for range r.Events() {
		}
		res := r.Wait()
		if ce, ok := errors.AsType[*CeilingError](res.Err); !ok || !ce.Uncertain || res.Outcome != OutcomeFailed {
			t.Fatalf("outcome %s err %v, want an uncertainty ceiling refusal", res.Outcome, res.Err)
		}
		if n := len(g.srv.Requests()); n != 0 {
			t.Fatalf("%d requests sent despite outstanding uncertainty", n)
		}
	})
}

// TestLoopInterruptedReasoningAndTextRecovered: an attempt interrupted
// after streaming reasoning and text yields one recovered_output per
// channel (reasoning first), each exactly the provisional prefix that
// provider_retry invalidated; neither reaches the committed answer, the
// replacement request or the usage.
func TestLoopInterruptedReasoningAndTextRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{})
		full := providertest.Reply(providertest.Reasoning("enc-1", "weighing the options carefully"), providertest.Message("the final answer text"))
		g.srv.Enqueue(full.DropAfter(full.FrameCount()-3), full)
		res, evs := g.run(context.Background(), "q")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		prov := map[string]string{}
		var retried bool
		var recovered []*RecoveredOutput
		for _, e := range evs {
			switch e := e.(type) {
			case *OutputDelta:
				if !retried {
					prov[e.Channel] += e.Text
				}
			case *ProviderRetry:
				retried = true
			case *RecoveredOutput:
				if !retried {
					t.Fatal("recovered_output before provider_retry")
				}
				recovered = append(recovered, e)
			}
		}
		if prov[ChannelReasoning] == "" || prov[ChannelText] == "" {
			t.Fatalf("the interrupted attempt streamed %q; the test needs both channels", prov)
		}
		if len(recovered) != 2 || recovered[0].Channel != ChannelReasoning || recovered[0].Text != prov[ChannelReasoning] ||
			recovered[1].Channel != ChannelText || recovered[1].Text != prov[ChannelText] {
			t.Fatalf("recovered %+v, want reasoning %q then text %q", recovered, prov[ChannelReasoning], prov[ChannelText])
		}
		reqs := g.srv.Requests()
		if len(reqs) != 2 || strings.Contains(string(reqs[1].Raw), recovered[1].Text) || strings.Contains(string(reqs[1].Raw), recovered[0].Text) {
			t.Fatalf("the replacement request replays recovered output: %s", reqs[1].Raw)
		}
		if u := eventsOf[*Usage](evs); len(u) != 1 || u[0].Input != 100 || u[0].Complete {
			t.Fatalf("usage %+v, want only the successful response, as a known subtotal", u)
		}
	})
}
