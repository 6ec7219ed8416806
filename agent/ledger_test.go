package agent

import (
	"errors"
	"testing"

	"github.com/octet-agent/octet/session"
)

// TestLedgerTotals: the shared ledger's cost and uncertainty count toward
// the cost ceiling; the token ceiling counts only the agent's own session,
// so another agent's unknown usage does not refuse under it alone.
func TestLedgerTotals(t *testing.T) {
	own := session.Totals{Own: session.Usage{Input: 10, Output: 5, CostPicodollars: 100}, Known: session.Usage{Input: 10, Output: 5, CostPicodollars: 100}}
	ledger := session.Totals{Known: session.Usage{Input: 900, CostPicodollars: 1000}}
	prices := PriceTable{"m": {Input: 1}}
	cost := &Budget{Ceilings: Ceilings{MaxCost: 1000}, Prices: prices}
	var ce *CeilingError
	if err := cost.Check("m", LedgerTotals(own, ledger)); !errors.As(err, &ce) || ce.Limit != "cost" || !ce.Shared || ce.Used != 1000 {
		t.Fatalf("cost ceiling on the ledger: %v", err)
	}
	if err := cost.Check("m", own); err != nil {
		t.Fatalf("the session alone is below the ceiling: %v", err)
	}
	tokens := &Budget{Ceilings: Ceilings{MaxTokens: 100}, Prices: prices}
	if err := tokens.Check("m", LedgerTotals(own, ledger)); err != nil {
		t.Fatalf("the token ceiling counted the ledger: %v", err)
	}
	uncertain := ledger
	uncertain.Uncertain, uncertain.Cause = true, session.UsageUncertain{Reason: "cancelled_after_dispatch", RunID: "run_c"}
	if err := tokens.Check("m", LedgerTotals(own, uncertain)); err != nil {
		t.Fatalf("another agent's unknown usage refused under the token ceiling: %v", err)
	}
	below := &Budget{Ceilings: Ceilings{MaxCost: 1 << 40}, Prices: prices}
	if err := below.Check("m", LedgerTotals(own, uncertain)); !errors.As(err, &ce) || !ce.Uncertain {
		t.Fatalf("another agent's unknown usage under the cost ceiling: %v, want refused", err)
	}
	ownUncertain := own
	ownUncertain.Uncertain, ownUncertain.UncertainMarkers = true, 1
	if err := tokens.Check("m", LedgerTotals(ownUncertain, ledger)); !errors.As(err, &ce) || !ce.Uncertain {
		t.Fatalf("own unknown usage under the token ceiling: %v, want refused", err)
	}
}
