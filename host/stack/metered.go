package stack

import (
	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// meteredNoRetry is the policy of a route without recovery authority (any
// runtime_profile but codex): like agent.NoRetry it never replaces a failed
// attempt, and like agent.CodexRecovery it prices known usage and refuses
// a request under a hard ceiling (also for outstanding usage uncertainty),
// so cost and ceilings do not depend on the route.
type meteredNoRetry struct {
	agent.NoRetry
	budget *agent.Budget
}

var (
	_ agent.RetryPolicy     = meteredNoRetry{}
	_ agent.RequestGate     = meteredNoRetry{}
	_ agent.UsagePricer     = meteredNoRetry{}
	_ agent.CeilingReporter = meteredNoRetry{}
)

// BeforeRequest refuses a request under a reached ceiling or while the
// session's usage is uncertain under any hard ceiling.
func (p meteredNoRetry) BeforeRequest(_ string, model provider.Model, _ *provider.Request, totals session.Totals) error {
	return p.budget.Check(model.Name, totals)
}

// PriceUsage prices one completed request from the configured price table.
func (p meteredNoRetry) PriceUsage(model string, u provider.Usage) (int64, bool) {
	c, ok := p.budget.Cost(model, u)
	return int64(c), ok
}

// CloneRetry implements agent.RetryCloner: the policy is stateless, and a
// delegated child shares its budget.
func (p meteredNoRetry) CloneRetry() agent.RetryPolicy { return p }

// HardCeilings implements agent.CeilingReporter: the configured budget's,
// not agent.NoRetry's none.
func (p meteredNoRetry) HardCeilings() bool { return p.budget.Active() }

// CheckCeiling reports the ceiling refusal the next request would get.
func (p meteredNoRetry) CheckCeiling(model string, totals session.Totals) error {
	return p.budget.Check(model, totals)
}
