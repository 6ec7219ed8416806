package agent

import (
	"errors"
	"time"

	"github.com/octet-agent/octet/provider"
)

// Retry kinds of a [RetryDecision] (the protocol's provider_retry.retryKind).
const (
	RetryInterruptedInference = "interrupted_inference"
	RetryWaitingForNetwork    = "waiting_for_network"
)

// OperationCompaction is the auxiliary operation name of a local
// compaction summary request ("" is the main assistant request).
const OperationCompaction = "compaction"

// Failure describes one failed provider attempt to a [RetryPolicy].
type Failure struct {
	// Err is the failure, usually a *provider.Error.
	Err error
	// Operation is "" for the main request, else the auxiliary operation
	// (OperationCompaction).
	Operation string
	// PartialText and PartialReasoning are the provisional output the
	// failed attempt streamed before it failed.
	PartialText, PartialReasoning string
	// Dispatched reports the request may have reached the provider, so its
	// usage is unknown.
	Dispatched bool
}

// RetryDecision is a [RetryPolicy]'s answer for one failure.
type RetryDecision struct {
	// Retry replaces the failed attempt with a new one.
	Retry bool
	// Kind is RetryInterruptedInference or RetryWaitingForNetwork.
	Kind string
	// Attempt is the replacement's attempt number (1 for the first retry).
	Attempt int
	// MaxAttempts is the remaining ceiling for the current failure class,
	// nil while waiting for the network.
	MaxAttempts *int
	// Delay is how long to wait (cancellably) before the replacement.
	Delay time.Duration
	// UsageUnknown makes the loop persist a usage-uncertainty marker for
	// the failed attempt before anything else happens.
	UsageUnknown bool
	// Reason is a short, secret-free diagnostic for provider_retry.
	Reason string
	// GiveUpIn, when set, is how long from now the turn may still spend
	// retrying (MaxRetryWait, or the outage bound while waiting for the
	// network): shown with the retry.
	GiveUpIn *time.Duration
	// FallbackHTTP asks the transport to reopen over HTTP (WebSocket
	// refused); the loop passes it on when the transport supports it.
	FallbackHTTP bool
	// Err, when Retry is false, is the error the turn fails with (nil: the
	// failure itself).
	Err error
}

// RetryPolicy decides whether a failed provider attempt is replaced. The
// loop owns the mechanics (dropping the stream, persisting uncertainty,
// events, the cancellable wait, re-preparation); the policy owns budgets.
// A RetryPolicy is used by one run at a time.
type RetryPolicy interface {
	// Decide is called once per failed attempt (never for cancellation).
	Decide(f Failure) RetryDecision
	// TurnCompleted is called after a completed assistant response; a
	// policy resets its per-turn counters here.
	TurnCompleted()
}

// NoRetry is the default policy: a failed attempt ends the turn (and the
// run) as failed, with durable usage uncertainty when it was dispatched.
type NoRetry struct{}

// Decide never retries. Usage is judged as the recovery policy judges it:
// unknown after possible acceptance, but not for a definite refusal status
// (401, 400, …), which is not billed.
func (NoRetry) Decide(f Failure) RetryDecision {
	return RetryDecision{UsageUnknown: classify(f).usageUnknown, Reason: failureReason(f.Err)}
}

// TurnCompleted does nothing.
func (NoRetry) TurnCompleted() {}

var _ RetryPolicy = NoRetry{}

// failureReason is a short secret-free reason for a failure.
func failureReason(err error) string {
	if pe, ok := errors.AsType[*provider.Error](err); ok {
		r := pe.Class.String()
		if pe.Code != "" {
			r += ": " + pe.Code
		}
		return r
	}
	if err == nil {
		return "unknown"
	}
	return "error"
}

// dispatched reports whether err says the request may have been sent. An
// error that is not a provider error is conservatively dispatched.
func dispatched(err error) bool {
	if pe, ok := errors.AsType[*provider.Error](err); ok {
		return pe.Dispatched
	}
	return true
}

// HTTPFallback is implemented by transports that can move a run from the
// Responses WebSocket to HTTP. The loop calls FallbackToHTTP when a
// RetryDecision sets FallbackHTTP, before the replacement attempt.
type HTTPFallback interface {
	FallbackToHTTP()
}

// RunStarter is implemented by retry policies with per-run state. The loop
// calls RunStarted at the start of every run of the Agent (one policy value
// serves all of an Agent's runs, one at a time), before the first request.
type RunStarter interface {
	RunStarted(runID string)
}
