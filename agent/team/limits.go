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

// LimitError rejects work (a spawn, a follow-up, a message, a wait) at a
// bound; nothing was written.
type LimitError struct {
	// Limit names the bound: one of the keys of limitText.
	Limit string
	// Max is the bound.
	Max int
}

// limitText is each bound's refusal, with what to do next (%d: Max): the
// model reads it as a tool result.
var limitText = map[string]string{
	"concurrent":                "%d agents already run at once (the root included); wait for a child to finish",
	"depth":                     "children may be at most %d level(s) below the root; do this part yourself",
	"total":                     "%d agents (the root included) were already started in this run; give an idle child a follow-up task or do the rest yourself",
	"active_per_parent":         "this agent already has %d active children; wait for one to finish",
	"retained_per_owner":        "%d child records are already kept for this session's run; give an idle child a follow-up task or do the rest yourself",
	"text":                      "the text is larger than %d bytes; shorten it, or write the details to a file in the workspace and name the file",
	"waits":                     "%d waits are already in progress; let one of them return first",
	"followup_backlog_messages": "%d follow-up tasks are already queued for this child; wait for it to take them",
	"followup_backlog_bytes":    "the follow-up tasks queued for this child already hold up to %d bytes; wait for it to take them",
	"pending_messages":          "%d messages to this child are not delivered yet; wait until it has taken them (at its next step)",
	"pending_bytes":             "the messages to this child not delivered yet hold up to %d bytes; wait until it has taken them (at its next step)",
	"mailbox":                   "the recipient's mailbox is full (%d messages, or 1 MiB); wait until it has read them (its next wait) before sending more",
}

func (e *LimitError) Error() string {
	if f, ok := limitText[e.Limit]; ok {
		return "delegation limit: " + fmt.Sprintf(f, e.Max)
	}
	return "delegation limit: " + e.Limit
}
