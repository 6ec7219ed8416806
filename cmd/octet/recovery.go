package main

import (
	"errors"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider"
)

// demoRetryPolicy returns the recovery policy the demo runs with.
//
// Stand-in: the agent package does not export its recovery envelope
// (issue 6) yet, so the demo uses streamRetry, which replaces only a main
// request whose body was interrupted or ended early, at most
// maxStreamReplacements times per turn — a strict subset of the
// documented envelope. Swap in the agent's policy once it lands.
func demoRetryPolicy() agent.RetryPolicy { return &streamRetry{delay: 200 * time.Millisecond} }

// maxStreamReplacements is the envelope's per-turn stream allowance.
const maxStreamReplacements = 11

// streamRetry replaces interrupted main-request streams.
type streamRetry struct {
	delay    time.Duration
	attempts int
}

var _ agent.RetryPolicy = (*streamRetry)(nil)

// Decide retries BodyInterrupted and TerminalEOF failures of the main
// request until the allowance is spent; everything else fails the turn.
// Usage of a dispatched attempt is always recorded as unknown.
func (p *streamRetry) Decide(f agent.Failure) agent.RetryDecision {
	no := agent.RetryDecision{UsageUnknown: f.Dispatched}
	pe, ok := errors.AsType[*provider.Error](f.Err)
	if !ok || f.Operation != "" || p.attempts >= maxStreamReplacements {
		return no
	}
	if pe.Class != provider.BodyInterrupted && pe.Class != provider.TerminalEOF {
		return no
	}
	p.attempts++
	remaining := maxStreamReplacements - p.attempts + 1
	return agent.RetryDecision{
		Retry:        true,
		Kind:         agent.RetryInterruptedInference,
		Attempt:      p.attempts,
		MaxAttempts:  &remaining,
		Delay:        p.delay,
		UsageUnknown: f.Dispatched,
		Reason:       pe.Class.String(),
	}
}

// TurnCompleted resets the per-turn allowance.
func (p *streamRetry) TurnCompleted() { p.attempts = 0 }
