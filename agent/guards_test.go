package agent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// The tests in this file each guard one rule of "persist, then act" that
// no other test noticed when it was removed (mutation testing; see
// internal/mutants/mutants.txt).

// plainTransport hides the wrapped transport's before-send notification:
// the loop must then record each dispatch before Open. open, when set,
// runs first and may answer instead of the wrapped transport.
type plainTransport struct {
	provider.Transport
	opens atomic.Int32
	open  func(ctx context.Context) (provider.Stream, error, bool)
}

func (p *plainTransport) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	p.opens.Add(1)
	if p.open != nil {
		if s, err, done := p.open(ctx); done {
			return s, err
		}
	}
	return p.Transport.Open(ctx, req)
}

// hookPolicy is NoRetry with hooks before each request (RequestGate) and
// in Decide, where a test breaks the session at an exact step.
type hookPolicy struct {
	NoRetry
	before func()
	decide func(Failure) RetryDecision
}

func (p *hookPolicy) BeforeRequest(string, provider.Model, *provider.Request, session.Totals) error {
	if p.before != nil {
		p.before()
	}
	return nil
}

func (p *hookPolicy) Decide(f Failure) RetryDecision {
	if p.decide != nil {
		return p.decide(f)
	}
	return p.NoRetry.Decide(f)
}

// settledOutcomes returns the outcome of every dispatch_settled record.
func settledOutcomes(recs []record) []string {
	var out []string
	for _, r := range recs {
		if r.str("kind") == "dispatch_settled" {
			out = append(out, r.str("outcome"))
		}
	}
	return out
}

// TestDispatchBeforeOpenWithoutNotifier: with a transport that does not
// report the send boundary, each request's dispatch record is durable
// before Open is called.
func TestDispatchBeforeOpenWithoutNotifier(t *testing.T) {
	var h *harness
	tr := &plainTransport{}
	tr.open = func(context.Context) (provider.Stream, error, bool) {
		if n := count(readFile(t, h.sess.Path()), "dispatch"); n != int(tr.opens.Load()) {
			t.Errorf("Open %d found %d dispatch records", tr.opens.Load(), n)
		}
		return nil, nil, false
	}
	h = newHarness(t, harnessOpt{transport: tr})
	tr.Transport = provider.NewHTTP(provider.HTTPConfig{BaseURL: h.srv.URL()})
	h.srv.Enqueue(pt.Text("hello"))
	r := h.prompt("go", PromptOptions{})
	drain(t, r)
	if res := r.Wait(); res.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	if got := settledOutcomes(readFile(t, h.sess.Path())); len(got) != 1 || got[0] != session.SettledUsage {
		t.Errorf("settlements %v, want one with usage", got)
	}
}

// TestDispatchLogFailureWithoutNotifier: when the dispatch record cannot
// be written before Open, nothing is opened and the run says why.
func TestDispatchLogFailureWithoutNotifier(t *testing.T) {
	var h *harness
	tr := &plainTransport{}
	h = newHarness(t, harnessOpt{transport: tr, retry: &hookPolicy{before: func() { h.sess.Close() }}})
	tr.Transport = provider.NewHTTP(provider.HTTPConfig{BaseURL: h.srv.URL()})
	h.srv.Enqueue(pt.Text("never"))
	r := h.prompt("go", PromptOptions{})
	drain(t, r)
	res := r.Wait()
	if res.Outcome != OutcomeFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "nothing was sent") {
		t.Fatalf("outcome %s, err %v; want a failed run saying nothing was sent", res.Outcome, res.Err)
	}
	if tr.opens.Load() != 0 || len(h.srv.Requests()) != 0 {
		t.Fatalf("%d opens, %d requests without a dispatch record", tr.opens.Load(), len(h.srv.Requests()))
	}
}

// refusedConn is a failure known to have sent nothing.
var refusedConn = &provider.Error{Phase: provider.Opening, Class: provider.Connect, Err: errors.New("connection refused")}

// TestSettleOfUnsentRequest: a request that failed before sending is
// settled "failed" and nothing else (no uncertainty at the end); when
// that settlement cannot be written the run's error says so.
func TestSettleOfUnsentRequest(t *testing.T) {
	t.Run("written", func(t *testing.T) {
		tr := &plainTransport{open: func(context.Context) (provider.Stream, error, bool) { return nil, refusedConn, true }}
		h := newHarness(t, harnessOpt{transport: tr})
		r := h.prompt("go", PromptOptions{})
		drain(t, r)
		if res := r.Wait(); res.Outcome != OutcomeFailed {
			t.Fatalf("outcome %s", res.Outcome)
		}
		recs := readFile(t, h.sess.Path())
		if got := settledOutcomes(recs); len(got) != 1 || got[0] != session.SettledFailed || count(recs, "usage_uncertain") != 0 {
			t.Fatalf("settlements %v, %d uncertainty markers; want one failed, none", got, count(recs, "usage_uncertain"))
		}
	})
	t.Run("unwritable", func(t *testing.T) {
		var h *harness
		tr := &plainTransport{open: func(context.Context) (provider.Stream, error, bool) {
			h.sess.Close() // the dispatch is recorded; its settlement cannot be
			return nil, refusedConn, true
		}}
		h = newHarness(t, harnessOpt{transport: tr})
		r := h.prompt("go", PromptOptions{})
		drain(t, r)
		if res := r.Wait(); res.Err == nil || !strings.Contains(res.Err.Error(), "settle provider request") {
			t.Fatalf("run error %v; want it to say the settlement failed", res.Err)
		}
	})
}

// TestCancelledUnsentRequestSettledCancelled: a request cancelled before
// it was sent is settled "cancelled", not "failed".
func TestCancelledUnsentRequestSettledCancelled(t *testing.T) {
	tr := &plainTransport{open: func(ctx context.Context) (provider.Stream, error, bool) {
		<-ctx.Done()
		return nil, &provider.Error{Phase: provider.Opening, Class: provider.Canceled, Err: ctx.Err()}, true
	}}
	h := newHarness(t, harnessOpt{transport: tr})
	r := h.prompt("go", PromptOptions{})
	waitFor(t, func() bool { return tr.opens.Load() == 1 })
	r.Cancel()
	drain(t, r)
	if got := settledOutcomes(readFile(t, h.sess.Path())); len(got) != 1 || got[0] != session.SettledCancelled {
		t.Fatalf("settlements %v, want one cancelled", got)
	}
}

// TestRecoveredOutputNotEmittedUnpersisted: partial output whose
// recovered_output record cannot be written is not shown as recovered,
// and the run's error says why.
func TestRecoveredOutputNotEmittedUnpersisted(t *testing.T) {
	var h *harness
	pol := &hookPolicy{decide: func(Failure) RetryDecision {
		h.sess.Close() // after the failure is decided, before its output is kept
		return RetryDecision{Retry: true}
	}}
	h = newHarness(t, harnessOpt{retry: pol})
	full := pt.Text("The answer is forty two and nothing else")
	h.srv.Enqueue(full.DropAfter(full.FrameCount()/2), full)
	r := h.prompt("go", PromptOptions{})
	evs := drain(t, r)
	res := r.Wait()
	if n := len(eventsOf[*RecoveredOutput](evs)); n != 0 {
		t.Errorf("%d recovered_output events for output that was not persisted", n)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "persist recovered output") {
		t.Errorf("run error %v; want it to name the recovered output", res.Err)
	}
}

// TestUncommittedResponseMarkerIsDispatched: the end-of-run marker for a
// response that could not be committed says the request was dispatched.
func TestUncommittedResponseMarkerIsDispatched(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	h.srv.Enqueue(pt.Reply(pt.CustomToolCall("c1", "apply_patch", "*** Begin Patch")))
	r := h.prompt("go", PromptOptions{})
	drain(t, r)
	r.Wait()
	ro, err := session.Inspect(h.sess.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if c := ro.Totals().Cause; c.Reason != "usage_not_recorded" || !c.Dispatched {
		t.Fatalf("cause %+v; want usage_not_recorded, dispatched", c)
	}
}

// TestDispatchedFailureEndsOutage: a failure after a request left the
// host ends the outage in progress: its deadline no longer bounds the
// next opening.
func TestDispatchedFailureEndsOutage(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	p.SetMaxNetworkWait(time.Minute)
	if d := p.Decide(netDown()); !d.Retry {
		t.Fatalf("outage wait refused: %+v", d)
	}
	if _, ok := p.OutageDeadline(); !ok {
		t.Fatal("no outage deadline while waiting for the network")
	}
	if d := p.Decide(eofFailure()); !d.Retry {
		t.Fatalf("stream failure not replaced: %+v", d)
	}
	if dl, ok := p.OutageDeadline(); ok {
		t.Fatalf("outage deadline %v still bounds openings after a dispatched failure", dl)
	}
}

// TestRetryAfterNeverShortenedWhileWaiting: the server's Retry-After holds
// during network waiting too.
func TestRetryAfterNeverShortenedWhileWaiting(t *testing.T) {
	p, _ := newTestPolicy(t, nil)
	down := &provider.Error{Phase: provider.PreSend, Class: provider.NetworkUnavailable, RetryAfter: 2 * time.Minute, HasRetryAfter: true}
	if d := p.Decide(Failure{Err: down}); !d.Retry || d.Kind != RetryWaitingForNetwork || d.Delay < 2*time.Minute {
		t.Fatalf("network wait with Retry-After 2m: retry %v kind %s delay %v", d.Retry, d.Kind, d.Delay)
	}
}

// quietTransport implements provider.BeforeSendNotifier but says it does
// not notify.
type quietTransport struct{ *plainTransport }

func (quietTransport) NotifiesBeforeSend() bool { return false }

// TestNotifierThatDeclines: a transport that says it does not notify is
// treated like one without the method: each dispatch is durable before
// Open. A fallback transport notifies only when both of its sides do.
func TestNotifierThatDeclines(t *testing.T) {
	var h *harness
	tr := &plainTransport{}
	tr.open = func(context.Context) (provider.Stream, error, bool) {
		if n := count(readFile(t, h.sess.Path()), "dispatch"); n != int(tr.opens.Load()) {
			t.Errorf("Open %d found %d dispatch records", tr.opens.Load(), n)
		}
		return nil, nil, false
	}
	h = newHarness(t, harnessOpt{transport: quietTransport{tr}})
	tr.Transport = provider.NewHTTP(provider.HTTPConfig{BaseURL: h.srv.URL()})
	h.srv.Enqueue(pt.Text("hello"))
	r := h.prompt("go", PromptOptions{})
	drain(t, r)
	if res := r.Wait(); res.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	notifying := provider.NewHTTP(provider.HTTPConfig{BaseURL: h.srv.URL()})
	if !notifiesBeforeSend(notifying) {
		t.Skip("the HTTP transport does not notify")
	}
	for _, c := range []struct {
		ws, http provider.Transport
		want     bool
	}{{notifying, notifying, true}, {notifying, tr, false}, {tr, notifying, false}} {
		if got := NewFallbackTransport(c.ws, c.http).NotifiesBeforeSend(); got != c.want {
			t.Errorf("fallback over (%T, %T) notifies = %v, want %v", c.ws, c.http, got, c.want)
		}
	}
}
