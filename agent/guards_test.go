package agent

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
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

// TestUnreplayableNoUsageMarkerIsDispatched: the marker for a response
// octet cannot replay says the request was dispatched. (Its reported
// usage is recorded instead, TestUnreplayableOutputKeepsReportedUsage; a
// marker is left when it reported none under a hard ceiling.)
func TestUnreplayableNoUsageMarkerIsDispatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{budget: &Budget{Ceilings: Ceilings{MaxTokens: 1_000_000}, Prices: DefaultPrices()}})
		g.srv.Enqueue(pt.Reply(pt.CustomToolCall("c1", "apply_patch", "*** Begin Patch")).WithoutUsage())
		g.run(context.Background(), "go")
		ro, err := session.Inspect(g.sess.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		if c := ro.Totals().Cause; c.Reason != reasonUsageNotReported || !c.Dispatched {
			t.Fatalf("cause %+v; want usage_not_reported, dispatched", c)
		}
	})
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

// retryN is a hookPolicy that replaces the first n failed attempts
// (after delay), judging usage as NoRetry does.
func retryN(n int, delay time.Duration) *hookPolicy {
	failures := 0
	return &hookPolicy{decide: func(f Failure) RetryDecision {
		d := NoRetry{}.Decide(f)
		if failures++; failures <= n {
			d.Retry, d.Delay = true, delay
		}
		return d
	}}
}

// TestUncertaintyMarkersOfCutAttempts: each dispatched attempt cut
// mid-stream is recorded as uncertain and dispatched, its dispatch settled
// "uncertain"; provider_usage_uncertain is emitted once per run, and no
// usage event claims the usage is complete.
func TestUncertaintyMarkersOfCutAttempts(t *testing.T) {
	h := newHarness(t, harnessOpt{retry: retryN(2, 0)})
	full := pt.Text("The answer is forty two and nothing else")
	h.srv.Enqueue(full.DropAfter(full.FrameCount()/2), full.DropAfter(full.FrameCount()/2), full)
	r := h.prompt("go", PromptOptions{})
	evs := drain(t, r)
	if res := r.Wait(); res.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	if n := len(eventsOf[*ProviderUsageUncertain](evs)); n != 1 {
		t.Errorf("%d provider_usage_uncertain events, want 1", n)
	}
	for _, u := range eventsOf[*Usage](evs) {
		if u.Complete {
			t.Errorf("usage event says complete after an uncertain attempt: %+v", u)
		}
	}
	recs := readFile(t, h.sess.Path())
	if got := settledOutcomes(recs); len(got) != 3 || got[0] != session.SettledUncertain || got[1] != session.SettledUncertain || got[2] != session.SettledUsage {
		t.Errorf("settlements %v, want uncertain twice, then usage", got)
	}
	ro, err := session.Inspect(h.sess.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if c := ro.Totals().Cause; !c.Dispatched {
		t.Errorf("cause %+v, want dispatched", c)
	}
}

// TestUnsentAttemptSettledBeforeReplacement: an attempt that failed
// before sending is settled "failed" before its replacement is made.
func TestUnsentAttemptSettledBeforeReplacement(t *testing.T) {
	var h *harness
	tr := &plainTransport{}
	tr.open = func(context.Context) (provider.Stream, error, bool) {
		if tr.opens.Load() == 1 {
			return nil, refusedConn, true
		}
		if got := settledOutcomes(readFile(t, h.sess.Path())); len(got) != 1 || got[0] != session.SettledFailed {
			t.Errorf("settlements before the replacement opened: %v, want the first failed", got)
		}
		return nil, nil, false
	}
	h = newHarness(t, harnessOpt{transport: tr, retry: retryN(1, 0)})
	tr.Transport = provider.NewHTTP(provider.HTTPConfig{BaseURL: h.srv.URL()})
	h.srv.Enqueue(pt.Text("hello"))
	r := h.prompt("go", PromptOptions{})
	drain(t, r)
	if res := r.Wait(); res.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
}

// TestCancelDuringRetryDelay: the failed attempt is settled before the
// wait, and cancelling while a replacement waits ends the run at once.
func TestCancelDuringRetryDelay(t *testing.T) {
	tr := &plainTransport{open: func(context.Context) (provider.Stream, error, bool) { return nil, refusedConn, true }}
	h := newHarness(t, harnessOpt{transport: tr, retry: retryN(1, time.Hour)})
	r := h.prompt("go", PromptOptions{})
	done := make(chan Outcome, 1)
	go func() {
		for e := range r.Events() {
			if _, ok := e.(*ProviderRetry); ok {
				// The retry event precedes the settlement; cancel once it
				// is durable (or after a while, if it never comes).
				for i := 0; i < 100 && len(settledOutcomes(readFileNoT(h.sess.Path()))) == 0; i++ {
					time.Sleep(20 * time.Millisecond)
				}
				r.Cancel()
			}
		}
		done <- r.Wait().Outcome
	}()
	select {
	case o := <-done:
		if o != OutcomeCancelled {
			t.Fatalf("outcome %s, want cancelled", o)
		}
		if got := settledOutcomes(readFile(t, h.sess.Path())); len(got) != 1 || got[0] != session.SettledFailed {
			t.Fatalf("settlements %v; want the unsent attempt settled failed before the wait", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run kept waiting out its retry delay after it was cancelled")
	}
}

// TestUncertaintyMarkerUnwritable: when the uncertainty of a failed
// attempt cannot be recorded the run ends saying so.
func TestUncertaintyMarkerUnwritable(t *testing.T) {
	var h *harness
	pol := &hookPolicy{decide: func(f Failure) RetryDecision {
		h.sess.Close()
		return RetryDecision{UsageUnknown: true, Reason: "cut"}
	}}
	h = newHarness(t, harnessOpt{retry: pol})
	full := pt.Text("The answer is forty two")
	h.srv.Enqueue(full.DropAfter(full.FrameCount() / 2))
	r := h.prompt("go", PromptOptions{})
	drain(t, r)
	if res := r.Wait(); res.Err == nil || !strings.Contains(res.Err.Error(), "usage uncertainty") {
		t.Fatalf("run error %v; want it to say the uncertainty was not recorded", res.Err)
	}
}

// closeOnCompleted closes the session when the stream is about to
// deliver its completed response.
type closeOnCompleted struct {
	provider.Transport
	sess *session.Session
}

func (c closeOnCompleted) NotifiesBeforeSend() bool { return true }

func (c closeOnCompleted) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	s, err := c.Transport.Open(ctx, req)
	if err != nil {
		return nil, err
	}
	return closingStream{s, c.sess}, nil
}

type closingStream struct {
	provider.Stream
	sess *session.Session
}

func (s closingStream) Next(ctx context.Context) (provider.Event, error) {
	ev, err := s.Stream.Next(ctx)
	if ev.Type == provider.EventCompleted {
		s.sess.Close()
	}
	return ev, err
}

// TestAssistantNotCommittedUnpersisted: a response whose commit cannot be
// written is never reported committed, and the run says why.
func TestAssistantNotCommittedUnpersisted(t *testing.T) {
	var h *harness
	tr := &closeOnCompleted{}
	h = newHarness(t, harnessOpt{transport: tr})
	tr.Transport, tr.sess = provider.NewHTTP(provider.HTTPConfig{BaseURL: h.srv.URL()}), h.sess
	h.srv.Enqueue(pt.Text("hello"))
	r := h.prompt("go", PromptOptions{})
	evs := drain(t, r)
	res := r.Wait()
	if n := len(eventsOf[*AssistantCommitted](evs)); n != 0 {
		t.Errorf("%d assistant_committed events for an unpersisted response", n)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "persist assistant message") {
		t.Fatalf("run error %v", res.Err)
	}
}

// TestResponseWithoutUsageSettledNoUsage: a completed response that
// reports no usage settles its dispatch "no_usage", not "usage".
func TestResponseWithoutUsageSettledNoUsage(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	h.srv.Enqueue(pt.Text("hello").WithoutUsage())
	r := h.prompt("go", PromptOptions{})
	drain(t, r)
	if res := r.Wait(); res.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	if got := settledOutcomes(readFile(t, h.sess.Path())); len(got) != 1 || got[0] != session.SettledNoUsage {
		t.Fatalf("settlements %v, want one no_usage", got)
	}
}

// emptyCompleted is a stream whose completed event carries no response.
type emptyCompleted struct{}

func (emptyCompleted) Next(context.Context) (provider.Event, error) {
	return provider.Event{Type: provider.EventCompleted}, nil
}
func (emptyCompleted) Close() error                    { return nil }
func (emptyCompleted) RequestID() string               { return "" }
func (emptyCompleted) RateLimits() provider.RateLimits { return provider.RateLimits{} }

// TestCompletedWithoutResponseFails: a completed event without its
// response is a protocol violation that fails the run (its usage
// unknown), never a commit of nothing.
func TestCompletedWithoutResponseFails(t *testing.T) {
	tr := &plainTransport{open: func(context.Context) (provider.Stream, error, bool) { return emptyCompleted{}, nil, true }}
	h := newHarness(t, harnessOpt{transport: tr})
	r := h.prompt("go", PromptOptions{})
	evs := drain(t, r)
	if res := r.Wait(); res.Outcome != OutcomeFailed || len(eventsOf[*AssistantCommitted](evs)) != 0 ||
		res.Err == nil || !strings.Contains(res.Err.Error(), "completed without response") {
		t.Fatalf("outcome %s (%v); want a failed run naming the protocol violation, nothing committed", res.Outcome, res.Err)
	}
	ro, err := session.Inspect(h.sess.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if tot := ro.Totals(); !tot.Uncertain || tot.UnsettledDispatches != 0 {
		t.Errorf("totals %+v; want the dispatched request's usage uncertain, settled", tot)
	}
}

// eofStream ends before any event, with a bare io.EOF.
type eofStream struct{ emptyCompleted }

func (eofStream) Next(context.Context) (provider.Event, error) { return provider.Event{}, io.EOF }

// TestEOFBeforeCompletedIsUncertain: a stream that ends (bare io.EOF)
// before its completed event was dispatched: its usage is recorded as
// unknown.
func TestEOFBeforeCompletedIsUncertain(t *testing.T) {
	tr := &plainTransport{open: func(context.Context) (provider.Stream, error, bool) { return eofStream{}, nil, true }}
	h := newHarness(t, harnessOpt{transport: tr})
	r := h.prompt("go", PromptOptions{})
	drain(t, r)
	if res := r.Wait(); res.Outcome != OutcomeFailed {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	ro, err := session.Inspect(h.sess.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if tot := ro.Totals(); !tot.Uncertain || !tot.Cause.Dispatched || tot.UnsettledDispatches != 0 {
		t.Fatalf("totals %+v; want the cut request's usage uncertain and dispatched", tot)
	}
}

// responseStream completes at once with resp.
type responseStream struct {
	emptyCompleted
	resp *provider.Response
}

func (s responseStream) Next(context.Context) (provider.Event, error) {
	return provider.Event{Type: provider.EventCompleted, Response: s.resp}, nil
}

// TestRefusalWithCallIsNotARefusal: a message of refusal parts is a
// refusal only when the response calls no tool.
func TestRefusalWithCallIsNotARefusal(t *testing.T) {
	for _, c := range []struct {
		items []provider.Item
		want  string
	}{
		{[]provider.Item{{Type: provider.ItemMessage, Refusal: "no"}}, "refusal"},
		{[]provider.Item{{Type: provider.ItemMessage, Refusal: "no"}, {Type: provider.ItemFunctionCall, CallID: "c1", Name: "read", Arguments: `{}`}}, "completed"},
	} {
		resp := &provider.Response{ID: "r", Status: "completed", Output: c.items}
		tr := &plainTransport{open: func(context.Context) (provider.Stream, error, bool) { return responseStream{resp: resp}, nil, true }}
		h := newHarness(t, harnessOpt{transport: tr, maxTurns: 1})
		r := h.prompt("go", PromptOptions{})
		drain(t, r)
		r.Wait()
		var got []string
		for _, e := range entries(readFile(t, h.sess.Path())) {
			if e.str("type") == "assistant" {
				got = append(got, e.str("stop_reason"))
			}
		}
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("stop reasons %v, want [%s]", got, c.want)
		}
	}
}

// TestLedgerTotalsKeepOwnCause: joining an uncertain ledger keeps the
// session's own first cause of uncertainty.
func TestLedgerTotalsKeepOwnCause(t *testing.T) {
	own := session.Totals{Uncertain: true, Cause: session.UsageUncertain{Reason: "cancelled_after_dispatch", RunID: "own"}}
	ledger := session.Totals{Uncertain: true, Cause: session.UsageUncertain{Reason: "unsettled_dispatch", RunID: "child"}}
	if got := LedgerTotals(own, ledger); got.Cause != own.Cause || !got.Uncertain || got.DelegatedUncertain != 1 {
		t.Fatalf("LedgerTotals = %+v, want the own cause kept", got)
	}
}

// TestCeilingRefusalCountsTheLedger: the refusal a client shows before a
// prompt counts the shared cost ledger, as the request gate does.
func TestCeilingRefusalCountsTheLedger(t *testing.T) {
	sess, err := session.Create(t.TempDir(), session.Header{Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	model := provider.Model{Name: "m", Features: provider.FeatureCodexProfile}
	a, err := New(Config{
		Session: sess, Transport: &plainTransport{}, Model: model, Host: tools.NewHost(), Broker: tools.NewBroker(tools.BrokerConfig{}),
		Retry: NewCodexRecovery(RecoveryConfig{Profile: ProfileCodex, Model: model, Budget: &Budget{Ceilings: Ceilings{MaxCost: 1_000_000}}}),
		Ledger: func() (session.Totals, bool) {
			return session.Totals{Uncertain: true, Cause: session.UsageUncertain{Reason: "unsettled_dispatch", RunID: "child"}}, true
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ce *CeilingError
	if err := a.CeilingRefusal(); !errors.As(err, &ce) || !ce.Uncertain {
		t.Fatalf("CeilingRefusal = %v; want a refusal for the ledger's unknown usage", err)
	}
}

// TestUnreplayableOutputKeepsReportedUsage: a completed response whose
// output octet cannot replay (a provider-hosted item) fails the run
// closed, but the usage the provider reported for it is recorded, once,
// as known usage: it was billed, and it is not unknown.
func TestUnreplayableOutputKeepsReportedUsage(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	h.srv.Enqueue(pt.Events(
		[]byte(`{"type":"response.created","response":{"id":"resp_1"}}`),
		[]byte(`{"type":"response.output_item.done","output_index":0,"item":{"type":"web_search_call","id":"ws_1","status":"completed"}}`),
		[]byte(`{"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":70,"output_tokens":5}}}`),
	))
	r := h.prompt("go", PromptOptions{})
	drain(t, r)
	res := r.Wait()
	if res.Outcome != OutcomeFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "cannot replay") {
		t.Fatalf("outcome %s: %v, want a fail-closed refusal of the output", res.Outcome, res.Err)
	}
	tot := h.sess.Totals()
	if tot.Uncertain || tot.Own.Input != 70 || tot.Own.Output != 5 || tot.Requests != 1 {
		t.Fatalf("totals %+v, want the reported 70+5 tokens once and no uncertainty", tot)
	}
	if res.Usage.Input != 70 || !res.Usage.Complete {
		t.Errorf("run usage %+v", res.Usage)
	}
}
