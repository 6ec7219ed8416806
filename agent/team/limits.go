package team

import (
	"errors"
	"fmt"
)

// Limits bound one team during its owning run. The root counts as one
// agent in Concurrent and Total.
type Limits struct {
	// Concurrent is how many agents may run at once, the root included.
	Concurrent int
	// Depth is how many levels of children may exist below the root.
	Depth int
	// Total is how many agents may exist during the owning run, the root
	// included.
	Total int
}

// DefaultLimits are the team defaults.
var DefaultLimits = Limits{Concurrent: 10, Depth: 2, Total: 32}

// Host validation ranges of [Limits].
const (
	MinConcurrent = 2
	MaxConcurrent = 32
	MinDepth      = 1
	MaxDepth      = 8
	MaxTotal      = 256
)

// MaxTextBytes bounds one task, message or status payload (the durable
// text limit, 128 KiB).
const MaxTextBytes = 128 << 10

// Validate reports limits outside the host's validation ranges: 2–32
// concurrent, depth 1–8, at most 256 total, total never below concurrent.
func (l Limits) Validate() error {
	var errs []error
	if l.Concurrent < MinConcurrent || l.Concurrent > MaxConcurrent {
		errs = append(errs, fmt.Errorf("concurrent agents %d outside %d–%d", l.Concurrent, MinConcurrent, MaxConcurrent))
	}
	if l.Depth < MinDepth || l.Depth > MaxDepth {
		errs = append(errs, fmt.Errorf("depth %d outside %d–%d", l.Depth, MinDepth, MaxDepth))
	}
	if l.Total > MaxTotal {
		errs = append(errs, fmt.Errorf("total agents %d above %d", l.Total, MaxTotal))
	}
	if l.Total < l.Concurrent {
		errs = append(errs, fmt.Errorf("total agents %d below concurrent agents %d", l.Total, l.Concurrent))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("team limits: %w", err)
	}
	return nil
}

// Service is the stricter bound of a delegation service on top of
// [Limits]: its children sit exactly one level below the root.
type Service struct {
	// ActivePerParent bounds a parent's pending or running children.
	ActivePerParent int
	// RetainedPerOwner bounds the child records one owner keeps.
	RetainedPerOwner int
}

// ProductService is the first-party subagents service of octet lsp and
// octet exec.
var ProductService = Service{ActivePerParent: 8, RetainedPerOwner: 32}

// StandardTools are the tools a worker gets from its parent unless the
// spawn narrows them.
var StandardTools = []string{"read", "search", "edit", "write", "bash"}

// LimitError rejects a spawn at a bound; nothing was written.
type LimitError struct {
	// Limit is "concurrent", "depth", "total", "active_per_parent",
	// "retained_per_owner" or "text".
	Limit string
	// Max is the bound.
	Max int
}

func (e *LimitError) Error() string {
	switch e.Limit {
	case "concurrent":
		return fmt.Sprintf("delegation limit: %d agents already run at once (the root included); wait for a child to finish", e.Max)
	case "depth":
		return fmt.Sprintf("delegation limit: children may be at most %d level(s) below the root", e.Max)
	case "total":
		return fmt.Sprintf("delegation limit: %d agents (the root included) were already started in this run", e.Max)
	case "active_per_parent":
		return fmt.Sprintf("delegation limit: this agent already has %d active children; wait for one to finish", e.Max)
	case "retained_per_owner":
		return fmt.Sprintf("delegation limit: %d child records are already kept for this session", e.Max)
	case "text":
		return fmt.Sprintf("delegation limit: the text is larger than %d bytes", e.Max)
	case "waits":
		return fmt.Sprintf("delegation limit: %d waits are already in progress", e.Max)
	}
	return "delegation limit: " + e.Limit
}
