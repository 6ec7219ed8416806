package agent

import (
	"errors"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// Budget is a session's hard accounting configuration: cumulative ceilings
// and the price table that turns known usage into exact cost. A nil
// *Budget has no ceilings and no prices.
type Budget struct {
	// Ceilings are the hard cumulative limits (zero fields: none).
	Ceilings Ceilings
	// Prices price each request's known usage (nil: cost unknown).
	Prices PriceTable
}

// Active reports whether a hard ceiling is set.
func (b *Budget) Active() bool { return b != nil && b.Ceilings.Active() }

// Cost prices one completed request's known usage in picodollars; ok is
// false when the model has no price (or the counts are inconsistent).
func (b *Budget) Cost(model string, u provider.Usage) (cost Picodollars, ok bool) {
	if b == nil || b.Prices == nil {
		return 0, false
	}
	c, err := b.Prices.Cost(model, TokenUsage{Input: u.InputTokens, CachedInput: u.CachedTokens, Output: u.OutputTokens, Reasoning: u.ReasoningTokens, CacheWrite: u.CacheWriteTokens})
	return c, err == nil
}

// Check decides whether another request for model may be made on a
// session with totals t: nil, or a *CeilingError. The token ceiling counts
// the session's own usage; the cost ceiling counts its mirrored delegated
// children's usage too (session.Totals.Known). It reads the durable
// totals, so a session reopened with an uncertainty marker stays refused
// under a hard ceiling. A cost ceiling also fails closed when model has no
// price, since its cost could not be counted.
func (b *Budget) Check(model string, t session.Totals) error {
	if !b.Active() {
		return nil
	}
	s := UsageState{
		Known:                  TokenUsage{Input: t.Own.Input, CachedInput: t.Own.CachedInput, Output: t.Own.Output, Reasoning: t.Own.Reasoning},
		Cost:                   Picodollars(t.Known.CostPicodollars),
		Uncertain:              t.Uncertain,
		Cause:                  t.Cause,
		UncertainDelegatedOnly: t.Uncertain && t.DelegatedUncertain > 0 && t.UncertainMarkers == 0 && t.UnsettledDispatches == 0,
		Shared:                 t.Known.CostPicodollars != t.Own.CostPicodollars,
	}
	if b.Ceilings.MaxCost > 0 {
		if _, err := b.Prices.Cost(model, TokenUsage{}); errors.Is(err, ErrPriceUnknown) {
			s.CostUnknown = true
		}
	}
	return b.Ceilings.Check(s)
}
