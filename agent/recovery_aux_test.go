package agent

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// smallCodexModel has a window small enough that the second run of
// newCompactionDueRig must compact first.
var smallCodexModel = provider.Model{Name: "small", ContextWindow: 20_000, MaxOutputTokens: 100_000, Features: provider.FeatureCodexProfile}

// newCompactionDueRig returns a recovery rig whose session already holds a
// completed run large enough that the next prompt compacts before its
// main request.
func newCompactionDueRig(t *testing.T) *recRig {
	t.Helper()
	g := newRecRig(t, recRigOpt{model: smallCodexModel})
	g.srv.Enqueue(providertest.Text("ok one").WithUsage(provider.Usage{InputTokens: 3700, OutputTokens: 10}))
	if res, _ := g.run(context.Background(), "FIRSTPROMPT "+strings.Repeat("x ", 7000)); res.Outcome != OutcomeCompleted {
		t.Fatalf("first run %s: %v", res.Outcome, res.Err)
	}
	return g
}

// splitRequests counts the summary and main requests the server saw.
func splitRequests(g *recRig) (summary, main int) {
	for _, q := range g.srv.Requests() {
		if q.Body["instructions"] == compactionInstructions {
			summary++
		} else {
			main++
		}
	}
	return summary, main
}

// runBounded runs a prompt whose context is cancelled once the server has
// seen more than limit requests or the virtual clock has run past
// horizon, so a run that ignores its envelope fails the test instead of
// looping.
func (g *recRig) runBounded(limit int, horizon time.Duration) (RunResult, []Event) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	prev := g.gate
	g.gate = func(req *http.Request) error {
		if len(g.srv.Requests()) >= limit || time.Since(start) > horizon {
			cancel()
		}
		if prev != nil {
			return prev(req)
		}
		return nil
	}
	return g.run(ctx, "again")
}

// TestLoopFailedCompactionKeepsTheTurnsEnvelope: the summary request shares
// the main request's budgets and outage, and its failure resets neither.
// The contract's bounds per logical turn are 36 requests (mixed), 12
// (stream only) and the host's max_network_wait for the outage.
func TestLoopFailedCompactionKeepsTheTurnsEnvelope(t *testing.T) {
	t.Run("sustained 503s", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newCompactionDueRig(t)
			g.srv.Enqueue(repeatTurn(turn503(), 400)...)
			res, _ := g.runBounded(1+100, 24*time.Hour)
			ex, ok := errors.AsType[*ExhaustedError](res.Err)
			if res.Outcome != OutcomeFailed || !ok || ex.Budget != "admission" || ex.Attempts != MaxAdmissionReplacements+1 {
				t.Fatalf("outcome %s err %v after %d requests, want the compaction's admission exhaustion after 30 attempts", res.Outcome, res.Err, len(g.srv.Requests())-1)
			}
			summary, main := splitRequests(g)
			if main-1 != 0 || summary != 30 || summary+main-1 > MaxTotalReplacements+1 {
				t.Fatalf("%d summary and %d main requests in the turn, want 30 and 0 (at most 36 in all)", summary, main-1)
			}
		})
	})
	t.Run("refused summary then EOFs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newCompactionDueRig(t)
			g.srv.Enqueue(providertest.Status(400, "invalid_request_error", "", "summary refused"))
			g.srv.Enqueue(repeatTurn(eofTurn(), 200)...)
			res, evs := g.runBounded(1+100, 24*time.Hour)
			ex, ok := errors.AsType[*ExhaustedError](res.Err)
			if !ok || ex.Budget != "stream" || ex.Attempts != MaxStreamReplacements+1 {
				t.Fatalf("outcome %s err %v after %d requests, want stream exhaustion after 12 main attempts", res.Outcome, res.Err, len(g.srv.Requests())-1)
			}
			summary, main := splitRequests(g)
			if summary != 1 || main-1 != MaxStreamReplacements+1 {
				t.Fatalf("%d summary and %d main requests, want 1 and 12 (no second summary in the turn)", summary, main-1)
			}
			if n := len(eventsOf[*CompactionStarted](evs)); n != 1 {
				t.Fatalf("%d compactions started, want 1", n)
			}
		})
	})
	t.Run("unreachable network", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newCompactionDueRig(t)
			g.policy.SetMaxNetworkWait(10 * time.Minute)
			dials := 0
			g.gate = func(*http.Request) error { dials++; return netUnreachable() }
			start := time.Now()
			res, _ := g.runBounded(100, 24*time.Hour)
			nw, ok := errors.AsType[*NetworkWaitLimit](res.Err)
			if !ok || nw.UsageUnknown {
				t.Fatalf("outcome %s err %v after %v and %d dials, want NetworkWaitLimit without unknown usage", res.Outcome, res.Err, time.Since(start), dials)
			}
			if d := time.Since(start); d != 10*time.Minute {
				t.Fatalf("gave up after %v (%d dials), want the 10m bound for summary and main together", d, dials)
			}
			if dials > 20 {
				t.Fatalf("%d dials in a 10-minute outage", dials)
			}
			if g.sess.Totals().Uncertain {
				t.Fatal("pre-send outage invented unknown usage")
			}
		})
	})
	t.Run("refused summary does not hide a completed answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newCompactionDueRig(t)
			g.srv.Enqueue(providertest.Status(400, "invalid_request_error", "", "summary refused"), eofTurn(), providertest.Text("answer"))
			res, _ := g.runBounded(1+10, time.Hour)
			if res.Outcome != OutcomeCompleted {
				t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
			}
			if summary, main := splitRequests(g); summary != 1 || main-1 != 2 {
				t.Fatalf("%d summary and %d main requests, want 1 and 2", summary, main-1)
			}
		})
	})
}
