package agent

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// The dispatch write-ahead log: every provider request is recorded
// durably (a session "dispatch" record, synced) before its first byte is
// sent, and settled by the record written with its response's usage or by
// a failure marker. A process that dies with a request in flight leaves
// the dispatch unsettled, and the reopened session's usage is uncertain
// (see session.Dispatch).

// dispatchLogError is a failure to record a dispatch: nothing was sent,
// and the run ends with it rather than sending unrecorded requests.
type dispatchLogError struct{ err error }

func (e *dispatchLogError) Error() string {
	return fmt.Sprintf("record the provider request before sending it (nothing was sent): %v", e.err)
}

func (e *dispatchLogError) Unwrap() error { return e.err }

// notifiesBeforeSend reports whether tr calls provider.WithBeforeSend's
// hook at the real send boundary; for any other transport the dispatch is
// recorded before Open, conservatively.
func notifiesBeforeSend(tr provider.Transport) bool {
	n, ok := tr.(provider.BeforeSendNotifier)
	return ok && n.NotifiesBeforeSend()
}

// NotifiesBeforeSend reports that both of the transport's sides honour
// provider.WithBeforeSend.
func (t *FallbackTransport) NotifiesBeforeSend() bool {
	return notifiesBeforeSend(t.ws) && notifiesBeforeSend(t.http)
}

// benchNoDispatchLog turns the dispatch log off; only BenchmarkDispatchLog
// sets it, for its baseline.
var benchNoDispatchLog atomic.Bool

// logDispatch durably records that the request of ar is about to be sent.
func (r *Run) logDispatch(req *provider.Request, ar *attemptResult) error {
	if benchNoDispatchLog.Load() {
		return nil
	}
	d := session.Dispatch{ID: session.NewID(), RunID: r.id, Operation: ar.op, Model: req.Model, Attempt: ar.n}
	if err := r.a.sess.Append(session.DispatchRecord(d)); err != nil {
		ar.logErr = &dispatchLogError{err: err}
		return ar.logErr
	}
	r.inflight = &d
	return nil
}

// settlement returns the record settling the run's pending dispatch with
// outcome, to be appended in the same batch as what settles it (none when
// nothing is pending). Call settled after that append succeeded.
func (r *Run) settlement(outcome string) []session.Record {
	if r.inflight == nil {
		return nil
	}
	return []session.Record{session.SettledRecord(session.DispatchSettled{ID: r.inflight.ID, RunID: r.id, Outcome: outcome})}
}

// settled forgets the pending dispatch once its settlement is durable.
func (r *Run) settled() { r.inflight = nil }

// settleFailed settles a still-pending dispatch of a failed attempt whose
// usage is known not to be billed (or, cancelled, is not recorded as the
// contract requires of a cancelled compaction), joining any error to err.
func (r *Run) settleFailed(err error) error {
	recs := r.settlement(session.SettledFailed)
	if recs == nil {
		return err
	}
	if r.ctx.Err() != nil {
		recs[0].Settled.Outcome = session.SettledCancelled
	}
	if aerr := r.a.sess.Append(recs...); aerr != nil {
		return errors.Join(err, fmt.Errorf("settle provider request: %w", aerr))
	}
	r.settled()
	return err
}

// settleAtEnd records a dispatch the run leaves unsettled (its response
// could not be committed) as uncertain usage: it may have been billed.
func (r *Run) settleAtEnd() error {
	if r.inflight == nil {
		return nil
	}
	return r.markUncertain(r.inflight.Operation, "usage_not_recorded", true, r.inflight.Attempt)
}

// settledOutcome is the settlement of a completed response with usage u.
func settledOutcome(u *provider.Usage) string {
	if u == nil {
		return session.SettledNoUsage
	}
	return session.SettledUsage
}

// reasonUsageNotReported is the uncertainty reason of a completed
// response that reported no usage under a hard ceiling.
const reasonUsageNotReported = "usage_not_reported"

// completedSettlement returns the records that settle the pending
// dispatch of operation op, whose response completed with usage u, and
// whether they mark usage uncertain: a response without usage under a
// hard ceiling cannot be counted against it, so the ceiling fails closed
// on it as on any unknown usage. Once the records are durable the caller
// calls r.settled and, when uncertain, r.noteUncertain.
func (r *Run) completedSettlement(op string, u *provider.Usage) ([]session.Record, bool) {
	cr, ok := r.a.retry.(CeilingReporter)
	if u != nil || r.inflight == nil || !ok || !cr.HardCeilings() {
		return r.settlement(settledOutcome(u)), false
	}
	un := session.UsageUncertain{RunID: r.id, Operation: op, Reason: reasonUsageNotReported, Dispatched: true, Attempt: r.inflight.Attempt}
	return append([]session.Record{session.UncertainRecord(un)}, r.settlement(session.SettledUncertain)...), true
}

// recoverOutput makes the partial reasoning and text of a replaced main
// attempt durable (session recovered_output records: never replayed to the
// provider, never usage) and then emits them as RecoveredOutput events.
func (r *Run) recoverOutput(f Failure, attempt int) error {
	var recs []session.Record
	var evs []Event
	for _, p := range []struct{ channel, text string }{{ChannelReasoning, f.PartialReasoning}, {ChannelText, f.PartialText}} {
		if p.text == "" {
			continue
		}
		recs = append(recs, session.RecoveredRecord(session.RecoveredOutput{RunID: r.id, Channel: p.channel, Text: p.text, Attempt: attempt}))
		evs = append(evs, &RecoveredOutput{Channel: p.channel, Text: p.text})
	}
	if len(recs) == 0 {
		return nil
	}
	if err := r.a.sess.Append(recs...); err != nil {
		return fmt.Errorf("persist recovered output: %w", err)
	}
	for _, e := range evs {
		r.emit(e)
	}
	return nil
}
