package agent

import (
	"errors"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
)

// TestFailFastWhereWaitingCannotHelp: a refused connection to a loopback
// endpoint and a 2xx answer that is not an event stream end the turn at
// the first failure on the qualified route (they used to spend the
// admission allowance, 29 replacements, and the stream one, 11).
func TestFailFastWhereWaitingCannotHelp(t *testing.T) {
	cases := []struct {
		name    string
		f       Failure
		reason  string
		unknown bool
	}{
		{"local server not running", Failure{Err: &provider.Error{Phase: provider.Opening, Class: provider.Connect, LocalRefused: true}}, "connection_refused_local", false},
		{"html page", Failure{Err: &provider.Error{Phase: provider.Opening, Class: provider.NotEventStream, Dispatched: true, Status: 200, ContentType: "text/html"}, Dispatched: true}, "not_event_stream", false},
		{"json document", Failure{Err: &provider.Error{Phase: provider.Opening, Class: provider.NotEventStream, Dispatched: true, Status: 200, ContentType: "application/json"}, Dispatched: true}, "not_event_stream", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, _ := newTestPolicy(t, nil)
			p.SetRoute(qualifiedRoute())
			attempts, last := drive(p, repeat(c.f, 40))
			if attempts != 1 || last.Retry || last.Reason != c.reason || last.UsageUnknown != c.unknown {
				t.Fatalf("%d attempts, last %+v; want 1 attempt, reason %s, usage unknown %v", attempts, last, c.reason, c.unknown)
			}
		})
	}
	// A refused connection elsewhere is still an admission failure.
	p, _ := newTestPolicy(t, nil)
	p.SetRoute(qualifiedRoute())
	if d := p.Decide(connectFailure()); !d.Retry {
		t.Fatalf("a refused remote connection is not retried: %+v", d)
	}
}

// TestMaxRetryWaitBoundsAllRetrying: max_retry_wait_secs bounds the time
// a turn spends replacing failed requests, whatever their class; every
// replacement says how long is left, and one whose delay (a Retry-After
// is never shortened) ends past the bound is not made.
func TestMaxRetryWaitBoundsAllRetrying(t *testing.T) {
	p, clk := newTestPolicy(t, func(c *RecoveryConfig) { c.MaxRetryWait = time.Minute })
	p.SetRoute(qualifiedRoute())
	d := p.Decide(status503())
	if !d.Retry || d.GiveUpIn == nil || *d.GiveUpIn != time.Minute {
		t.Fatalf("first retry = %+v, want one that gives up in 1m", d)
	}
	clk.advance(40 * time.Second)
	d = p.Decide(eofFailure())
	if !d.Retry || d.GiveUpIn == nil || *d.GiveUpIn != 20*time.Second {
		t.Fatalf("second retry = %+v, want one that gives up in 20s", d)
	}
	clk.advance(10 * time.Second)
	limited := status503()
	limited.Err.(*provider.Error).RetryAfter, limited.Err.(*provider.Error).HasRetryAfter = 30*time.Second, true
	d = p.Decide(limited)
	var rw *RetryWaitLimit
	if d.Retry || !errors.As(d.Err, &rw) || rw.Delay != 30*time.Second || rw.Limit != time.Minute || !d.UsageUnknown {
		t.Fatalf("a Retry-After past the bound = %+v, want RetryWaitLimit with unknown usage", d)
	}
	if !IsRecoveryTerminal(d.Err) {
		t.Error("RetryWaitLimit is not a recovery terminal")
	}
	// A completed response starts a new turn and a new bound.
	p.TurnCompleted()
	clk.advance(time.Hour)
	if d := p.Decide(status503()); !d.Retry || *d.GiveUpIn != time.Minute {
		t.Fatalf("after a completed turn = %+v", d)
	}
	// Without the bound, a retry says nothing of when it gives up.
	q, _ := newTestPolicy(t, nil)
	q.SetRoute(qualifiedRoute())
	if d := q.Decide(status503()); !d.Retry || d.GiveUpIn != nil {
		t.Fatalf("unbounded retry = %+v", d)
	}
}
