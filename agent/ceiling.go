package agent

import (
	"fmt"
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
	// Known is the sum of successful requests' usage.
	Known TokenUsage
	// Cost is the known cost of Known.
	Cost Picodollars
	// CostUnknown is true when some known usage could not be priced.
	CostUnknown bool
	// Uncertain is true when the session records usage uncertainty: a
	// failed attempt that may have been billed. It is sticky.
	Uncertain bool
}

// Check returns nil when another request may be made, or a *CeilingError.
func (c Ceilings) Check(s UsageState) error {
	if !c.Active() {
		return nil
	}
	if s.Uncertain {
		return &CeilingError{Uncertain: true}
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
			return &CeilingError{Limit: "cost", Max: int64(c.MaxCost), Used: int64(s.Cost)}
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
}

func (e *CeilingError) Error() string {
	switch {
	case e.Uncertain && e.Err != nil:
		return fmt.Sprintf("hard usage ceiling: usage of a failed attempt is unknown, no further request: %v", e.Err)
	case e.Uncertain:
		return "hard usage ceiling: the session has outstanding usage uncertainty, no further request"
	case e.CostUnknown:
		return "hard cost ceiling: some usage has no known price, no further request"
	case e.Limit == "cost":
		return fmt.Sprintf("hard cost ceiling reached: %s of %s", Picodollars(e.Used), Picodollars(e.Max))
	}
	return fmt.Sprintf("hard %s ceiling reached: %d of %d", e.Limit, e.Used, e.Max)
}

// Unwrap returns the provider failure, if any.
func (e *CeilingError) Unwrap() error { return e.Err }
