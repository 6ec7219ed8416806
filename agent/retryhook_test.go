package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// hookLog records what a retry hook was told and when.
type hookLog struct {
	mu    sync.Mutex
	calls []ProviderRetryContext
	at    []time.Time
}

func (l *hookLog) add(rc ProviderRetryContext) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, rc)
	l.at = append(l.at, time.Now())
}

// TestRetryHookContext follows the seed's ProviderRetryContext sentences:
// max_attempts is null (JSON null) for pre-send waiting and its kind is
// waiting_for_network; qualified inference replacement uses
// interrupted_inference; operation is null for a main request; hooks
// receive the owning run and resource identity; a hook's added delay
// lengthens the wait and its own time never shortens the policy's delay.
func TestRetryHookContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &hookLog{}
		const extra = 3 * time.Second
		g := newRecRig(t, recRigOpt{hook: func(ctx context.Context, rc ProviderRetryContext) RetryHookResult {
			log.add(rc)
			time.Sleep(100 * time.Millisecond) // host work, inside the policy's delay
			return RetryHookResult{Delay: extra}
		}})
		var refused bool
		g.gate = func(*http.Request) error {
			if !refused {
				refused = true
				return netUnreachable()
			}
			return nil
		}
		g.srv.Enqueue(turn503(), eofTurn(), providertest.Text("recovered"))
		res, evs := g.run(context.Background(), "go")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("run %s: %v", res.Outcome, res.Err)
		}
		if len(log.calls) != 3 {
			t.Fatalf("hook called %d times, want 3: %+v", len(log.calls), log.calls)
		}
		wait, adm, eof := log.calls[0], log.calls[1], log.calls[2]
		if wait.Kind != RetryWaitingForNetwork || wait.MaxAttempts != nil {
			t.Errorf("pre-send wait context %+v", wait)
		}
		for _, rc := range []ProviderRetryContext{adm, eof} {
			if rc.Kind != RetryInterruptedInference || rc.MaxAttempts == nil || *rc.MaxAttempts > 35 {
				t.Errorf("inference replacement context %+v", rc)
			}
		}
		for _, rc := range log.calls {
			if rc.RunID != res.RunID || rc.SessionID != g.sess.Header().ID || rc.Operation != nil {
				t.Errorf("identity or operation of %+v (run %s, session %s)", rc, res.RunID, g.sess.Header().ID)
			}
		}
		b, _ := json.Marshal(wait)
		if s := string(b); !strings.Contains(s, `"max_attempts":null`) || !strings.Contains(s, `"operation":null`) || !strings.Contains(s, `"kind":"waiting_for_network"`) {
			t.Errorf("waiting context JSON %s", s)
		}
		// Each replacement was sent no earlier than the policy's delay plus
		// the hook's, counted from when the hook was asked.
		g.mu.Lock()
		sends := append([]time.Time(nil), g.sends...)
		g.mu.Unlock()
		if len(sends) != 3 {
			t.Fatalf("%d sends", len(sends))
		}
		retries := eventsOf[*ProviderRetry](evs)
		for i, rc := range log.calls {
			var next time.Time
			if i == 0 {
				next = sends[0] // the refused opening was never a send
			} else {
				next = sends[i]
			}
			want := time.Duration(rc.DelayMs)*time.Millisecond + extra
			if got := next.Sub(log.at[i]); got < want-time.Millisecond {
				t.Errorf("replacement %d sent %v after the hook, want ≥ %v (policy %d ms + hook %v)", i+1, got, want, rc.DelayMs, extra)
			}
			if retries[i].DelayMs < rc.DelayMs {
				t.Errorf("provider_retry %d says %d ms, shorter than the policy's %d", i+1, retries[i].DelayMs, rc.DelayMs)
			}
		}
	})
}

// TestRetryHookStops: a hook may stop a replacement: the turn fails with
// *RetryStoppedError wrapping the failure, after exactly one request, and
// the failed attempt's uncertainty is durable before the hook was asked.
func TestRetryHookStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g *recRig
		var markersSeen int
		g = newRecRig(t, recRigOpt{hook: func(ctx context.Context, rc ProviderRetryContext) RetryHookResult {
			markersSeen = g.sess.Totals().UncertainMarkers
			return RetryHookResult{Stop: true}
		}})
		g.srv.Enqueue(eofTurn(), providertest.Text("never"))
		res, evs := g.run(context.Background(), "go")
		if _, ok := errors.AsType[*RetryStoppedError](res.Err); res.Outcome != OutcomeFailed || !ok {
			t.Fatalf("run %s: %v", res.Outcome, res.Err)
		}
		if n := len(g.srv.Requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
		if markersSeen != 1 {
			t.Errorf("the hook saw %d durable markers, want the failed attempt's 1", markersSeen)
		}
		if len(eventsOf[*ProviderRetry](evs)) != 0 {
			t.Errorf("a stopped replacement was announced as provider_retry")
		}
	})
}

// TestRetryHookPreemptedByOutageDeadline: "Outage deadlines also preempt
// pending retry hooks, even when shorter than the hook's advisory
// timeout." A hook that would wait an hour is abandoned at the one-minute
// outage bound, and the run ends with NetworkWaitLimit near that bound.
func TestRetryHookPreemptedByOutageDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var preempted []time.Time
		var mu sync.Mutex
		g := newRecRig(t, recRigOpt{hookTimeout: time.Hour, hook: func(ctx context.Context, rc ProviderRetryContext) RetryHookResult {
			<-ctx.Done()
			mu.Lock()
			preempted = append(preempted, time.Now())
			mu.Unlock()
			return RetryHookResult{Delay: MaxRetryHookDelay}
		}})
		g.policy.SetMaxNetworkWait(time.Minute)
		g.gate = func(*http.Request) error { return netUnreachable() }
		start := time.Now()
		res, _ := g.run(context.Background(), "go")
		elapsed := time.Since(start)
		if _, ok := errors.AsType[*NetworkWaitLimit](res.Err); res.Outcome != OutcomeFailed || !ok {
			t.Fatalf("run %s: %v", res.Outcome, res.Err)
		}
		if elapsed > 2*time.Minute {
			t.Fatalf("the run took %v: the hook's advisory hour was waited instead of the one-minute outage bound", elapsed)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(preempted) == 0 || preempted[len(preempted)-1].Sub(start) > time.Minute+time.Second {
			t.Fatalf("hook contexts ended at %v (start %v)", preempted, start)
		}
	})
}

// TestAuxiliaryOpeningBoundedBodyHealthy: "Local summary and gate calls
// expose opening separately from body collection: outage deadlines cover
// opening/backoff, never a healthy reconnected response body." For a
// manual compaction and for a terminal gate: an outage longer than the
// one-minute bound ends the run with NetworkWaitLimit and nothing of the
// operation committed; an outage that ends within the bound is followed
// by a healthy, slow body that outlives the bound and completes.
func TestAuxiliaryOpeningBoundedBodyHealthy(t *testing.T) {
	slow := func(text string) providertest.Turn { return providertest.Text(text).Pace(10 * time.Second) }
	for _, op := range []string{OperationCompaction, OperationTerminalGate} {
		for _, healthy := range []bool{true, false} {
			name := op + "/cut"
			if healthy {
				name = op + "/healthy"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					g := newRecRig(t, recRigOpt{})
					g.srv.Enqueue(providertest.Text("first answer"))
					if op == OperationTerminalGate {
						g.agent.cfg.Completion = testGate()
						g.srv.Enqueue(providertest.Text("DONE")) // the first run's gate
					}
					if res, _ := g.run(context.Background(), "first"); res.Outcome != OutcomeCompleted {
						t.Fatalf("first run %s: %v", res.Outcome, res.Err)
					}
					g.policy.SetMaxNetworkWait(time.Minute)
					start := time.Now()
					g.gate = func(*http.Request) error {
						if !healthy || time.Since(start) < 30*time.Second {
							return netUnreachable()
						}
						return nil
					}
					var res RunResult
					var evs []Event
					if op == OperationCompaction {
						g.srv.Enqueue(slow("SUMMARY of a slow but healthy compaction"))
						res, evs = g.compact()
					} else {
						g.srv.Enqueue(providertest.Text("second answer"), slow("DONE, slowly but healthily"))
						g.gate = func(req *http.Request) error {
							// Only the gate meets the outage: the main
							// request of this run goes through.
							if len(g.srv.Requests()) < 3 {
								return nil
							}
							if !healthy || time.Since(start) < 30*time.Second {
								return netUnreachable()
							}
							return nil
						}
						res, evs = g.run(context.Background(), "second")
					}
					waits := eventsOf[*ProviderRetry](evs)
					if len(waits) == 0 || waits[0].Operation == nil || *waits[0].Operation != op || waits[0].RetryKind != RetryWaitingForNetwork {
						t.Fatalf("retries %+v, want %s-scoped network waits", waits, op)
					}
					var committed bool
					for _, rec := range readFile(t, g.sess.Path()) {
						committed = committed || (rec.str("kind") == session.KindUsage && rec.str("operation") == op && rec.str("run_id") == res.RunID)
					}
					if !healthy {
						if _, ok := errors.AsType[*NetworkWaitLimit](res.Err); res.Outcome != OutcomeFailed || !ok || committed {
							t.Fatalf("run %s: %v (committed %v), want NetworkWaitLimit and nothing committed", res.Outcome, res.Err, committed)
						}
						if time.Since(start) > 2*time.Minute {
							t.Errorf("the outage bound of one minute held the run %v", time.Since(start))
						}
						return
					}
					if res.Outcome != OutcomeCompleted || !committed {
						t.Fatalf("run %s: %v (committed %v)", res.Outcome, res.Err, committed)
					}
					if time.Since(start) < 2*time.Minute {
						t.Fatal("the body did not outlive the outage bound; the test proves nothing")
					}
				})
			})
		}
	}
}
