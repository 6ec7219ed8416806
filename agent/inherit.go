package agent

import (
	"context"
	"fmt"

	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// RetryCloner is implemented by retry policies that can give a delegated
// child agent a policy of its own: the same configuration and budget
// (prices and hard ceilings, a missing ceiling staying missing), with
// fresh per-run state. A policy is used by one run at a time, so a child
// never shares its parent's.
type RetryCloner interface {
	CloneRetry() RetryPolicy
}

// CloneRetry implements RetryCloner.
func (NoRetry) CloneRetry() RetryPolicy { return NoRetry{} }

// CloneRetry implements RetryCloner: a new policy from the same
// configuration, with its budget, network wait and seed.
func (p *CodexRecovery) CloneRetry() RetryPolicy {
	p.mu.Lock()
	cfg := p.cfg
	cfg.MaxNetworkWait = p.maxWait
	p.mu.Unlock()
	return NewCodexRecovery(cfg)
}

// RunEndHook is called by the run's owner goroutine when a run has ended,
// after its calls and controls are settled and before its checkpoint is
// written. The records it returns are appended in the same durable batch
// as the checkpoint (the delegation manager returns one delegated-usage
// record per child here, after stopping the run's children). ctx is not
// cancelled by the run's own cancellation; the hook bounds its own waits.
type RunEndHook func(ctx context.Context, runID string, outcome Outcome) []session.Record

// Inherit returns the configuration a delegated child of a inherits at
// this moment: the effective system prompt, model, reasoning selection,
// turn and tool-call limits, output reserve, logger, telemetry, transport
// and a clone of the retry policy (its budget carries the session token
// and cost ceilings and the prices). Session, Broker, Host and Principal
// are left for the caller: the child gets its own session, a clone of the
// broker and its own tool scope. RunEnd is not inherited. It fails when
// the retry policy cannot be cloned (it does not implement RetryCloner).
func (a *Agent) Inherit() (Config, error) {
	cfg := a.cfg
	cfg.Session, cfg.Broker, cfg.Host, cfg.Principal, cfg.RunEnd = nil, nil, nil, "", nil
	cfg.Instructions = a.Instructions()
	cfg.Model, cfg.Reasoning = a.snapshot()
	rc, ok := a.retry.(RetryCloner)
	if !ok {
		return Config{}, fmt.Errorf("agent: the retry policy %T cannot be cloned for a child agent (it does not implement RetryCloner)", a.retry)
	}
	cfg.Retry = rc.CloneRetry()
	return cfg, nil
}

// Session returns the session the agent drives.
func (a *Agent) Session() *session.Session { return a.sess }

// Host returns the agent's tool host.
func (a *Agent) Host() *tools.Host { return a.cfg.Host }
