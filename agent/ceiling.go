package agent

import (
	"fmt"

	"github.com/octet-agent/octet/session"
)

// Ceilings are hard cumulative limits on a session's provider usage. A zero
// field is no limit. They are checked before every provider request and
// fail closed: outstanding usage uncertainty (a failed attempt that may
// have been billed, recorded durably in the session) refuses the next
// request, because nobody can tell how much of the ceiling is left; so does
// a cost ceiling when the cost of some usage is unknown (unpriced model).
type Ceilings struct {
	// MaxTokens bounds cumulative input plus output tokens.
	MaxTokens int64
	// MaxCost bounds cumulative cost.
	MaxCost Picodollars
}

// Active reports whether any ceiling is set.
func (c Ceilings) Active() bool { return c.MaxTokens > 0 || c.MaxCost > 0 }

// UsageState is the accounting a ceiling is checked against: the session's
// known usage totals, their known cost, and the durable uncertainty marker.
type UsageState struct {
	// Known is the sum of the session's own successful requests' usage
	// (what the token ceiling counts; delegated children's usage never
	// enters the parent's own-context token ceiling).
	Known TokenUsage
	// Cost is the known cost of the session's usage, its mirrored
	// delegated children's included (what the cost ceiling counts).
	Cost Picodollars
	// CostUnknown is true when some known usage could not be priced.
	CostUnknown bool
	// Uncertain is true when the session records usage uncertainty: a
	// failed attempt that may have been billed. It is sticky.
	Uncertain bool
	// Cause is the first reason usage became uncertain, if known.
	Cause session.UsageUncertain
	// UncertainDelegatedOnly is true when all of the uncertainty comes
	// from delegated children: the session's own usage is known exactly.
	// The token ceiling counts only the session's own context, so it
	// still applies; the cost ceiling counts the children and refuses.
	UncertainDelegatedOnly bool
	// Shared is true when Cost includes usage other than the session's
	// own requests (delegated children, mirrored or live): the refusal
	// says so.
	Shared bool
}

// Check returns nil when another request may be made, or a *CeilingError.
func (c Ceilings) Check(s UsageState) error {
	if !c.Active() {
		return nil
	}
	if s.Uncertain && (c.MaxCost > 0 || !s.UncertainDelegatedOnly) {
		return &CeilingError{Uncertain: true, Cause: s.Cause}
	}
	if c.MaxTokens > 0 {
		if used := s.Known.Input + s.Known.Output; used >= c.MaxTokens {
			return &CeilingError{Limit: "tokens", Max: c.MaxTokens, Used: used}
		}
	}
	if c.MaxCost > 0 {
		if s.CostUnknown {
			return &CeilingError{Limit: "cost", Max: int64(c.MaxCost), CostUnknown: true}
		}
		if s.Cost >= c.MaxCost {
			return &CeilingError{Limit: "cost", Max: int64(c.MaxCost), Used: int64(s.Cost), Shared: s.Shared}
		}
	}
	return nil
}

// CeilingError refuses a provider request under a hard ceiling.
type CeilingError struct {
	// Limit is "tokens" or "cost" ("" when refused for uncertainty).
	Limit string
	// Max and Used are the ceiling and the known usage (tokens or
	// picodollars).
	Max, Used int64
	// Uncertain is true when the refusal is for outstanding usage
	// uncertainty rather than a reached limit.
	Uncertain bool
	// CostUnknown is true when some usage could not be priced.
	CostUnknown bool
	// Err is the provider failure that made usage uncertain, if the
	// refusal happened while deciding a retry.
	Err error
	// Cause is the session's first usage uncertainty, for a refusal at a
	// request (Err nil) because of it.
	Cause session.UsageUncertain
	// Shared is true when the cost counted delegated child agents' usage
	// with the session's own (one ceiling for the root and its children).
	Shared bool
}

// What a user can do about a refusal: the ceilings are per session, and
// unknown usage could exceed any ceiling.
const (
	adviceUncertain = "start a new session, or remove the hard ceiling (max_session_tokens, max_session_cost_usd) to continue this one; raising it does not help, because unknown usage could exceed any ceiling"
	adviceReached   = "start a new session, or raise or remove the ceiling (max_session_tokens, max_session_cost_usd)"
)

func (e *CeilingError) Error() string {
	switch {
	case e.Uncertain && e.Err != nil:
		return fmt.Sprintf("hard usage ceiling: a failed request may have been billed, so this session's usage is unknown and it makes no further request under the ceiling (%v); %s", e.Err, adviceUncertain)
	case e.Uncertain:
		return fmt.Sprintf("hard usage ceiling: this session's usage is not completely known since %s, so it makes no further request under the ceiling; %s", DescribeUncertainty(e.Cause), adviceUncertain)
	case e.CostUnknown:
		return "hard cost ceiling: some usage has no known price, no further request; add a price for the model or remove max_session_cost_usd"
	case e.Limit == "cost" && e.Shared:
		return fmt.Sprintf("hard cost ceiling reached: %s of %s, the root session's max_session_cost_usd counting its delegated child agents' usage with its own; %s", Picodollars(e.Used), Picodollars(e.Max), adviceReached)
	case e.Limit == "cost":
		return fmt.Sprintf("hard cost ceiling reached: %s of %s; %s", Picodollars(e.Used), Picodollars(e.Max), adviceReached)
	}
	return fmt.Sprintf("hard %s ceiling reached: %d of %d; %s", e.Limit, e.Used, e.Max, adviceReached)
}

// DescribeUncertainty says in words why usage became uncertain, for
// refusals and session displays: "a request was cancelled after it was
// sent (run …)".
func DescribeUncertainty(u session.UsageUncertain) string {
	var what string
	switch u.Reason {
	case "":
		return "an earlier request failed after it may have been sent"
	case "cancelled_after_dispatch":
		what = "a request was cancelled after it was sent"
	case session.ReasonUnsettledDispatch:
		what = "a request was in flight when octet stopped (crash or kill), so it may have been billed unrecorded"
	case "usage_not_recorded":
		what = "a completed response's usage could not be recorded"
	case reasonUsageNotReported:
		what = "the provider completed a response without reporting its usage, which a hard ceiling cannot count"
	case "delegated_uncertain":
		return "a delegated agent's usage is unknown"
	default:
		what = fmt.Sprintf("a request failed after it may have been sent (%s)", u.Reason)
	}
	if u.Operation != "" && u.Operation != "main" {
		what += " during " + u.Operation
	}
	if u.RunID != "" {
		what += " in run " + u.RunID
	}
	return what
}

// Unwrap returns the provider failure, if any.
func (e *CeilingError) Unwrap() error { return e.Err }

// CeilingChecker is implemented by retry policies that enforce hard
// ceilings; CheckCeiling is RequestGate's ceiling check without preparing
// a request.
type CeilingChecker interface {
	CheckCeiling(model string, totals session.Totals) error
}

// LedgerTotals combines an agent's own session totals with the shared cost
// ledger's (see Config.Ledger): the result keeps own's token usage and
// own uncertainty (what the token ceiling counts), takes the ledger's
// known cost, and counts the ledger's uncertainty as delegated, so that
// any agent's unknown usage refuses under a cost ceiling only, the way a
// root's uncertain child does.
func LedgerTotals(own, ledger session.Totals) session.Totals {
	t := own
	t.Known = ledger.Known
	if ledger.Uncertain {
		if !t.Uncertain {
			t.Cause = ledger.Cause
			if t.Cause == (session.UsageUncertain{}) {
				t.Cause = session.UsageUncertain{Reason: "delegated_uncertain"}
			}
		}
		t.Uncertain = true
		t.DelegatedUncertain++
	}
	return t
}

// ceilingTotals is what the hard ceilings check: the session's durable
// totals, joined with the shared cost ledger when there is one.
func (a *Agent) ceilingTotals() session.Totals {
	own := a.sess.Totals()
	if a.cfg.Ledger == nil {
		return own
	}
	l, ok := a.cfg.Ledger()
	if !ok {
		return own
	}
	return LedgerTotals(own, l)
}

// CheckCeiling reports the ceiling refusal the next request would get.
func (p *CodexRecovery) CheckCeiling(model string, totals session.Totals) error {
	p.mu.Lock()
	b := p.budget
	p.mu.Unlock()
	return b.Check(model, totals)
}

// CeilingRefusal returns the error (a *CeilingError) with which a hard
// ceiling refuses the session's next request as things stand, or nil; a
// client shows it before the user types a prompt that would fail.
func (a *Agent) CeilingRefusal() error {
	c, ok := a.retry.(CeilingChecker)
	if !ok {
		return nil
	}
	return c.CheckCeiling(a.Model().Name, a.ceilingTotals())
}
