package agent

import (
	"errors"
	"testing"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

func TestBudgetCheckFromTotals(t *testing.T) {
	b := &Budget{Ceilings: Ceilings{MaxTokens: 10_000}, Prices: DefaultPrices()}
	under := session.Totals{Known: session.Usage{Input: 4000, Output: 1000}}
	if err := b.Check("gpt-5", under); err != nil {
		t.Fatalf("under the ceiling: %v", err)
	}
	uncertain := under
	uncertain.Uncertain = true
	err := b.Check("gpt-5", uncertain)
	if ce, ok := errors.AsType[*CeilingError](err); !ok || !ce.Uncertain {
		t.Fatalf("outstanding uncertainty under a token ceiling: %v", err)
	}
	if err := (*Budget)(nil).Check("gpt-5", uncertain); err != nil {
		t.Fatalf("no budget refused: %v", err)
	}
	if err := (&Budget{Prices: DefaultPrices()}).Check("gpt-5", uncertain); err != nil {
		t.Fatalf("prices without ceilings refused: %v", err)
	}
	cost := &Budget{Ceilings: Ceilings{MaxCost: 1_000_000_000_000}, Prices: DefaultPrices()}
	if err := cost.Check("unpriced-model", under); err == nil {
		t.Fatal("cost ceiling with an unpriced model did not fail closed")
	}
	spent := session.Totals{Known: session.Usage{CostPicodollars: 1_000_000_000_000}}
	if err := cost.Check("gpt-5", spent); err == nil {
		t.Fatal("cost ceiling reached but not refused")
	}
}

func TestBudgetCost(t *testing.T) {
	b := &Budget{Prices: DefaultPrices()}
	c, ok := b.Cost("gpt-5", provider.Usage{InputTokens: 1_000_000, CachedTokens: 0, OutputTokens: 100_000, ReasoningTokens: 50_000})
	// $1.25 input + 0.1 × $10 output.
	if !ok || c != 2_250_000_000_000 {
		t.Fatalf("Cost = %d, %v; want 2.25 USD", c, ok)
	}
	if _, ok := b.Cost("nope", provider.Usage{InputTokens: 1}); ok {
		t.Fatal("unpriced model priced")
	}
	if _, ok := (*Budget)(nil).Cost("gpt-5", provider.Usage{}); ok {
		t.Fatal("nil budget priced")
	}
}

func TestBeforeRequestQualifiesAndGates(t *testing.T) {
	p, _ := newTestPolicy(t, func(c *RecoveryConfig) { c.Budget = &Budget{Ceilings: Ceilings{MaxTokens: 100}} })
	model := provider.Model{Name: "m", Features: provider.FeatureCodexProfile}
	req := &provider.Request{Model: "m", Input: []provider.Item{{Type: provider.ItemMessage, Role: "user", Text: "x"}}}
	if err := p.BeforeRequest("", model, req, session.Totals{}); err != nil {
		t.Fatalf("clean session refused: %v", err)
	}
	if !p.Decide(eofFailure()).UsageUnknown {
		t.Fatal("EOF usage known")
	}
	err := p.BeforeRequest("", model, req, session.Totals{Uncertain: true, UncertainMarkers: 1})
	if _, ok := errors.AsType[*CeilingError](err); !ok {
		t.Fatalf("uncertain session under a ceiling: %v", err)
	}
	// A request replaying a custom tool call disqualifies recovery.
	q, _ := newTestPolicy(t, nil)
	bad := &provider.Request{Model: "m", Input: []provider.Item{{Type: provider.ItemCustomToolCall}}}
	if err := q.BeforeRequest("", model, bad, session.Totals{}); err != nil {
		t.Fatalf("no ceiling, gate refused: %v", err)
	}
	if d := q.Decide(eofFailure()); d.Retry || !errors.Is(d.Err, ErrUnqualifiedRoute) {
		t.Fatalf("unqualified request replayed: %+v", d)
	}
	// The next clean preparation qualifies again.
	_ = q.BeforeRequest("", model, req, session.Totals{})
	if d := q.Decide(eofFailure()); !d.Retry {
		t.Fatalf("requalified request not replaced: %v", d.Err)
	}
	// A model change to one without the Codex feature disqualifies.
	_ = q.BeforeRequest("", provider.Model{Name: "plain"}, req, session.Totals{})
	if d := q.Decide(eofFailure()); d.Retry {
		t.Fatal("model without the Codex feature replayed")
	}
}

// TestBudgetDelegatedUsage: mirrored child usage counts toward the cost
// ceiling, never toward the parent's own-context token ceiling, and a
// child's uncertainty refuses only what it can affect (the cost ceiling).
func TestBudgetDelegatedUsage(t *testing.T) {
	own := session.Usage{Input: 400, Output: 100, CostPicodollars: 1_000}
	child := session.Usage{Input: 90_000, Output: 9_000, CostPicodollars: 4_000}
	var known session.Usage
	for _, u := range []session.Usage{own, child} {
		known.Input += u.Input
		known.Output += u.Output
		known.CostPicodollars += u.CostPicodollars
	}
	totals := session.Totals{Own: own, Delegated: child, Known: known, Requests: 1, DelegatedRecords: 1}
	tokens := &Budget{Ceilings: Ceilings{MaxTokens: 1_000}, Prices: DefaultPrices()}
	if err := tokens.Check("gpt-5", totals); err != nil {
		t.Fatalf("child tokens charged to the parent's token ceiling: %v", err)
	}
	cost := &Budget{Ceilings: Ceilings{MaxCost: 5_000}, Prices: DefaultPrices()}
	err := cost.Check("gpt-5", totals)
	if ce, ok := errors.AsType[*CeilingError](err); !ok || ce.Limit != "cost" || ce.Used != 5_000 {
		t.Fatalf("own+child cost 5000 under a 5000 ceiling: %v", err)
	}
	if err := (&Budget{Ceilings: Ceilings{MaxCost: 5_001}, Prices: DefaultPrices()}).Check("gpt-5", totals); err != nil {
		t.Fatalf("one picodollar under the cost ceiling refused: %v", err)
	}

	uncertain := totals
	uncertain.Uncertain, uncertain.DelegatedUncertain = true, 1
	uncertain.Cause = session.UsageUncertain{Reason: "delegated_uncertain"}
	if err := tokens.Check("gpt-5", uncertain); err != nil {
		t.Fatalf("a child's uncertainty refused the parent's own token ceiling: %v", err)
	}
	if err := (&Budget{Ceilings: Ceilings{MaxCost: 1 << 40}, Prices: DefaultPrices()}).Check("gpt-5", uncertain); err == nil {
		t.Fatal("a child's unknown usage did not refuse under the cost ceiling")
	}
	uncertain.UncertainMarkers = 1 // and the parent's own usage is unknown too
	if err := tokens.Check("gpt-5", uncertain); err == nil {
		t.Fatal("own uncertainty under a token ceiling not refused")
	}
}
