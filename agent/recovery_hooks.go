package agent

import (
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// The optional interfaces below let a [RetryPolicy] see what the plain
// Decide/TurnCompleted seam does not carry. The loop checks for them with
// a type assertion; a policy without them behaves as before.

// RequestGate is implemented by policies that must see every prepared
// request before it is opened. The loop calls BeforeRequest at the safe
// preparation boundary of every attempt (main and auxiliary: op is "" or
// the operation), after the request is built and before Transport.Open,
// with the session's durable totals. A non-nil error fails the turn
// without sending anything.
type RequestGate interface {
	BeforeRequest(op string, model provider.Model, req *provider.Request, totals session.Totals) error
}

// UsagePricer is implemented by policies that price known usage. The loop
// asks it for the cost of each completed request before persisting the
// usage record (session.Usage.CostPicodollars); ok false leaves the cost
// unknown (zero).
type UsagePricer interface {
	PriceUsage(model string, u provider.Usage) (picodollars int64, ok bool)
}

// OutageBounder is implemented by policies that bound a network outage.
// While an outage is in progress and bounded, the loop opens the next
// attempt with a context whose deadline is OutageDeadline (opening only:
// credential lookup, connect, headers; never a healthy body). A failure
// caused by that deadline goes to Decide like any other.
type OutageBounder interface {
	OutageDeadline() (time.Time, bool)
}

// OpenObserver is implemented by policies that must know when a request
// opened (the transport returned a stream): the network evidently works,
// so an outage in progress is over. The loop calls Opened after every
// successful opening, main and auxiliary; without it an auxiliary call
// that succeeds after an outage would leave the outage's deadline to cut
// the next request's opening.
type OpenObserver interface {
	Opened()
}

var (
	_ RequestGate   = (*CodexRecovery)(nil)
	_ UsagePricer   = (*CodexRecovery)(nil)
	_ OutageBounder = (*CodexRecovery)(nil)
	_ OpenObserver  = (*CodexRecovery)(nil)
)

// Opened ends the outage in progress, if any: a request got through.
func (p *CodexRecovery) Opened() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endOutage()
}

// BeforeRequest re-qualifies the route for the prepared request and
// refuses it under a hard ceiling that is reached or that outstanding
// usage uncertainty (durable in totals, so also after reopening a
// session) makes uncountable.
func (p *CodexRecovery) BeforeRequest(op string, model provider.Model, req *provider.Request, totals session.Totals) error {
	p.Prepared(model, req)
	p.mu.Lock()
	b := p.budget
	p.mu.Unlock()
	return b.Check(model.Name, totals)
}

// PriceUsage prices one completed request from the budget's price table.
func (p *CodexRecovery) PriceUsage(model string, u provider.Usage) (int64, bool) {
	p.mu.Lock()
	b := p.budget
	p.mu.Unlock()
	c, ok := b.Cost(model, u)
	return int64(c), ok
}
