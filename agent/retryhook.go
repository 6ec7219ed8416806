package agent

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// Bounds of a [RetryHook].
const (
	// DefaultRetryHookTimeout is a retry hook's advisory timeout when
	// Config.RetryHookTimeout is zero.
	DefaultRetryHookTimeout = 10 * time.Second
	// MaxRetryHookDelay bounds the delay a hook may add to one wait.
	MaxRetryHookDelay = time.Minute
)

// ProviderRetryContext tells a [RetryHook] about one replacement the retry
// policy has decided. Its JSON form is the seed's: operation and
// max_attempts are null for a main request and for network waiting.
type ProviderRetryContext struct {
	// SessionID and RunID identify the owning resource and run.
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id"`
	// Operation is the typed auxiliary operation (OperationCompaction,
	// OperationTerminalGate), nil for a main assistant request.
	Operation *string `json:"operation"`
	// Kind is RetryInterruptedInference or RetryWaitingForNetwork.
	Kind string `json:"kind"`
	// Attempt is the replacement's number within the logical turn.
	Attempt int `json:"attempt"`
	// MaxAttempts is the cumulative ceiling for the current failure
	// class, nil while waiting for the network (no fictional
	// denominator).
	MaxAttempts *int `json:"max_attempts"`
	// DelayMs is the wait the policy decided (Retry-After and hints
	// included); the hook cannot shorten it.
	DelayMs int64 `json:"delay_ms"`
	// Reason is the policy's short, secret-free reason.
	Reason string `json:"reason"`
}

// RetryHookResult is a [RetryHook]'s answer.
type RetryHookResult struct {
	// Stop ends the turn instead of replacing the attempt: the run fails
	// with a *RetryStoppedError wrapping the failure.
	Stop bool
	// Delay is host work time added to the policy's wait (bounded by
	// MaxRetryHookDelay). It never shortens the wait.
	Delay time.Duration
}

// RetryHook is host code told of every replacement the retry policy
// decided, after the failed stream is dropped and its uncertainty is
// durable, before the wait. It may stop the retry or add bounded host
// delay; it cannot make a failure eligible, grant budget, or shorten the
// policy's or the provider's delay (there is nothing in its answer to do
// so with). ctx ends at the hook's advisory timeout, at the outage
// deadline of a bounded network wait (whichever is first), and when the
// run is cancelled; the loop does not wait for a hook past it, and then
// replaces the attempt as the policy decided. A hook must honour ctx. A
// panic is logged and treated as no answer.
type RetryHook func(ctx context.Context, rc ProviderRetryContext) RetryHookResult

// RetryStoppedError is the failure of a turn whose replacement a
// RetryHook stopped.
type RetryStoppedError struct {
	// Err is the failure the policy would have replaced.
	Err error
}

func (e *RetryStoppedError) Error() string {
	return fmt.Sprintf("provider retry stopped by the host's retry hook: %v", e.Err)
}

func (e *RetryStoppedError) Unwrap() error { return e.Err }

// hookRetry asks the retry hook about a decided replacement of op and
// returns how long to wait from now: the policy's delay (counted from
// the decision at t0) plus the hook's bounded delay. A hook that stops
// the retry yields a *RetryStoppedError.
func (r *Run) hookRetry(op string, dec RetryDecision, kind string, failure error) (time.Duration, error) {
	hook := r.a.cfg.RetryHook
	if hook == nil {
		return dec.Delay, nil
	}
	t0 := time.Now()
	rc := ProviderRetryContext{SessionID: r.a.sess.Header().ID, RunID: r.id, Kind: kind, Attempt: dec.Attempt,
		MaxAttempts: dec.MaxAttempts, DelayMs: dec.Delay.Milliseconds(), Reason: dec.Reason}
	if op != "" {
		o := op
		rc.Operation = &o
	}
	timeout := r.a.cfg.RetryHookTimeout
	if timeout <= 0 {
		timeout = DefaultRetryHookTimeout
	}
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	if ob, ok := r.a.retry.(OutageBounder); ok {
		if d, bounded := ob.OutageDeadline(); bounded {
			// The outage deadline preempts a pending hook, even one
			// whose advisory timeout is longer.
			var c context.CancelFunc
			ctx, c = context.WithDeadline(ctx, d)
			defer c()
		}
	}
	res, answered := r.callHook(ctx, hook, rc)
	if r.ctx.Err() != nil { // cancellation wins over the hook's answer
		return 0, errCancelled
	}
	if answered && res.Stop {
		return 0, &RetryStoppedError{Err: failure}
	}
	extra := time.Duration(0)
	if answered {
		extra = min(max(res.Delay, 0), MaxRetryHookDelay)
	}
	// The policy's delay runs from the decision; the hook's own time
	// counts toward it but never shortens it.
	return max(dec.Delay+extra-time.Since(t0), 0), nil
}

// callHook runs hook with ctx and returns its answer, or answered false
// when ctx ended first (the hook is left to return on its own) or it
// panicked.
func (r *Run) callHook(ctx context.Context, hook RetryHook, rc ProviderRetryContext) (RetryHookResult, bool) {
	type answer struct {
		res RetryHookResult
		ok  bool
	}
	ch := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				r.a.log.Error("agent: retry hook panicked", "run", r.id, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				ch <- answer{}
			}
		}()
		ch <- answer{hook(ctx, rc), true}
	}()
	select {
	case a := <-ch:
		return a.res, a.ok
	case <-ctx.Done():
		return RetryHookResult{}, false
	}
}
