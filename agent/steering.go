package agent

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// Native steering (FeatureNativeSteering and FeatureWebSocket granted by
// both the model and the endpoint, the main response on the Responses
// WebSocket, no hard cumulative ceiling). While such a response is in
// progress (after its response.created), Run.Steer takes the input
// natively instead of queuing it for the next boundary:
//
//  1. local receipt: the control gets its id under the inbox lock, in
//     submission order (only when no ordinary steering is queued ahead
//     of it and no FinishNow was accepted);
//  2. persisted intent: a dispatch record of operation native_steering
//     (its id the operation's, with the local id and the input) is
//     durable before anything is sent;
//  3. dispatch: response.steer on the response's socket.
//
// One operation is outstanding at a time: an input submitted while one
// is (or between the response and its successor) queues and waits until
// the owned successor settles, then goes at the next boundary as
// ordinary steering. The provider answers accepted, pending (tool
// results needed) or failed. A refused input settles its operation
// (steering_failed) and is delivered as ordinary steering. An accepted
// one: the response ends (incomplete, reason "steered", or completed) and
// is committed with its own usage; its calls run and their results are
// durable; the results go back on the same socket (response.create with
// previous_response_id, never repeating the input); when the successor's
// response.created arrives the input becomes a steering entry linked to
// its operation (Entry.NativeSteering), durable before the successor's
// output; the successor is committed with its own usage and the
// operation's settlement (steering_completed) in one batch. Until then
// usage is uncertain (usage events say Complete false). A failure or
// cancellation with an operation outstanding settles it as uncertain
// (a usage_uncertain marker) and, unless it was applied, delivers the
// input as ordinary steering. A crash leaves the intent unsettled: the
// next writable open settles it as unresolved, and Prompt refuses the
// session. More than maxSteeringEvents steering events in one response
// (the update bridge) fail the response closed.

// maxSteeringEvents bounds the steering events of one response: the host
// update bridge holds at most 128, and a stream that sends more fails.
const maxSteeringEvents = 128

// nativeSteering is a run's native steering state. Run.Steer reads and
// sets it from other goroutines: mu guards stream and op (the owner
// alone touches op's fields after it is set).
type nativeSteering struct {
	mu     sync.Mutex
	stream provider.SteeringStream // the response that may take an input now (nil: none)
	model  string
	op     *nativeOp
	events int // steering events of the response in progress
}

// nativeOp is an outstanding native steering operation.
type nativeOp struct {
	intent   session.Dispatch
	accepted bool
	applied  bool // its steering entry is durable
}

// nativeGranted reports whether the run's main responses to model may
// take native steering inputs.
func (r *Run) nativeGranted(model provider.Model) bool {
	cr, ok := r.a.retry.(CeilingReporter)
	if !ok || cr.HardCeilings() {
		return false
	}
	return r.a.granted(model).Has(provider.FeatureNativeSteering | provider.FeatureWebSocket)
}

// current returns the outstanding operation (nil: none).
func (n *nativeSteering) current() *nativeOp {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.op
}

// attach lets Steer send inputs to ss, a main response of model in
// progress.
func (n *nativeSteering) attach(ss provider.SteeringStream, model string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stream, n.model = ss, model
}

// detach stops Steer sending inputs natively.
func (n *nativeSteering) detach() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stream = nil
}

// steerNative is called by the inbox, under its lock, with a steering
// input it accepted (id, text): it persists the intent and sends the
// input when a response can take it, and reports whether it did (false:
// the inbox queues the input).
func (r *Run) steerNative(id, text string) bool {
	n := &r.nat
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stream == nil || n.op != nil {
		return false
	}
	d := session.Dispatch{ID: session.NewID(), RunID: r.id, Operation: session.OperationNativeSteering, Model: n.model, LocalID: id, Input: text}
	if err := r.a.sess.Append(session.DispatchRecord(d)); err != nil {
		r.a.log.Warn("agent: native steering intent not recorded; the input is queued", "run", r.id, "err", err)
		return false
	}
	err := n.stream.Steer(r.ctx, text)
	if err == nil {
		n.op = &nativeOp{intent: d}
		return true
	}
	if pe, ok := errors.AsType[*provider.Error](err); errors.Is(err, provider.ErrSteeringUnavailable) || ok && !pe.Dispatched {
		// Nothing left: the operation settles as not applied.
		if aerr := r.a.sess.Append(session.SettledRecord(session.DispatchSettled{ID: d.ID, RunID: r.id, Outcome: session.SettledSteeringFailed})); aerr != nil {
			n.op = &nativeOp{intent: d} // settled as uncertain when the run ends
			r.a.log.Warn("agent: native steering not sent and not settled", "run", r.id, "err", aerr)
		}
		return false
	}
	// The frame may have left on a connection that failed: the response
	// fails at its next read, which settles the operation as uncertain
	// and delivers the input as ordinary steering.
	n.op = &nativeOp{intent: d}
	return true
}

// steerEvent applies one steering event of the response in progress.
func (r *Run) steerEvent(ev provider.Event) error {
	n := &r.nat
	n.mu.Lock()
	n.events++
	over, op := n.events > maxSteeringEvents, n.op
	n.mu.Unlock()
	if over {
		return &provider.Error{Phase: provider.Body, Class: provider.ProtocolViolation, Dispatched: true,
			Message: fmt.Sprintf("more than %d native steering events in one response: the steering update bridge is full", maxSteeringEvents)}
	}
	if op == nil {
		return nil // not about an input of this run
	}
	switch ev.Type {
	case provider.EventSteerAccepted:
		op.accepted = true
	case provider.EventSteerFailed:
		if op.accepted {
			return nil
		}
		rec := session.SettledRecord(session.DispatchSettled{ID: op.intent.ID, RunID: r.id, Outcome: session.SettledSteeringFailed})
		if err := r.a.sess.Append(rec); err != nil {
			return fmt.Errorf("%w native steering settlement: %w", errPersist, err)
		}
		r.endOp(true)
	}
	return nil
}

// endOp forgets the outstanding operation; with requeue its input goes
// back to the front of the inbox as ordinary steering.
func (r *Run) endOp(requeue bool) {
	n := &r.nat
	n.mu.Lock()
	op := n.op
	n.op = nil
	n.mu.Unlock()
	if op != nil && requeue {
		r.ctl.requeue(control{kind: controlSteer, id: op.intent.LocalID, text: op.intent.Input})
	}
}

// abandonOp settles an operation the run cannot finish (its response
// failed, the run was cancelled or ended) as uncertain: the provider may
// have applied it and billed a successor. An input not yet applied is
// delivered as ordinary steering: its successor, if any, died with the
// connection and is in no ledger.
func (r *Run) abandonOp(reason string) error {
	op := r.nat.current()
	if op == nil {
		return nil
	}
	u := session.UsageUncertain{RunID: r.id, Operation: session.OperationNativeSteering, Reason: reason, Dispatched: true}
	recs := []session.Record{session.UncertainRecord(u), session.SettledRecord(session.DispatchSettled{ID: op.intent.ID, RunID: r.id, Outcome: session.SettledUncertain})}
	if err := r.a.sess.Append(recs...); err != nil {
		return fmt.Errorf("%w native steering uncertainty: %w", errPersist, err)
	}
	r.endOp(!op.applied)
	if !r.uncertainEmitted {
		r.uncertainEmitted = true
		r.emit(&ProviderUsageUncertain{Operation: session.OperationNativeSteering, Reason: reason})
	}
	return nil
}

// applySteering makes the accepted input durable as a steering entry
// linked to its operation, before the successor's output.
func (r *Run) applySteering() error {
	op := r.nat.current()
	if op == nil || op.applied {
		return nil
	}
	e := session.Entry{Type: session.EntrySteering, RunID: r.id, Text: op.intent.Input,
		NativeSteering: &session.NativeSteering{Operation: op.intent.ID, LocalID: op.intent.LocalID}}
	if _, err := r.a.sess.AppendEntry(e); err != nil {
		return fmt.Errorf("persist native steering input: %w", err)
	}
	op.applied = true
	return nil
}

// opSettlement returns the record settling the outstanding operation
// with its successor (nil: none), to be written with the successor.
func (r *Run) opSettlement() []session.Record {
	op := r.nat.current()
	if op == nil || !op.applied {
		return nil
	}
	return []session.Record{session.SettledRecord(session.DispatchSettled{ID: op.intent.ID, RunID: r.id, Outcome: session.SettledSteeringCompleted})}
}

// successor reads the response an accepted input asked for on the open
// stream of the response that ended (r.seg): it waits for the input's
// answer, returns the segment's tool results on the same socket when it
// called tools, then consumes the successor. It returns nil, nil when
// the input was refused (nothing follows: the next request is an
// ordinary one).
func (r *Run) successor() (*attemptResult, error) {
	ss, calls := r.seg, r.segCalls
	r.seg, r.segCalls = nil, nil
	ar := &attemptResult{}
	for op := r.nat.current(); op != nil && !op.accepted; op = r.nat.current() {
		ev, err := ss.Next(r.ctx)
		if err != nil {
			ss.Close()
			return ar, err
		}
		if err := r.steerEvent(ev); err != nil {
			ss.Close()
			return ar, err
		}
	}
	if r.nat.current() == nil { // refused: the stream ended with it
		ss.Close()
		return nil, nil
	}
	if len(calls) > 0 {
		if err := ss.Continue(r.ctx, r.continuation(calls)); err != nil {
			ss.Close()
			return ar, err
		}
	}
	return ar, r.consume(ss, ar, true)
}

// continuation is the request returning the outputs of calls: the
// run's settings as the next request would carry them, its input only
// those outputs (the provider holds the rest on the connection, and the
// accepted input is never repeated).
func (r *Run) continuation(calls []string) *provider.Request {
	req, _, _ := r.buildRequest()
	var outs []provider.Item
	for _, it := range req.Input {
		if (it.Type == provider.ItemFunctionCallOutput || it.Type == provider.ItemCustomToolCallOutput) && slices.Contains(calls, it.CallID) {
			outs = append(outs, it)
		}
	}
	req.Input = outs
	return req
}

// UnresolvedSteeringError refuses a prompt on a session with a native
// steering operation that a process which ended left unsettled.
type UnresolvedSteeringError struct {
	// Operation and RunID name the operation's intent.
	Operation, RunID string
}

func (e *UnresolvedSteeringError) Error() string {
	return fmt.Sprintf("agent: this session has a native steering operation (%s, run %s) that the process which sent it never settled: "+
		"whether the provider applied that input is unknown, so the session takes no new prompt; start a new session (this one stays readable)", e.Operation, e.RunID)
}

// checkUnresolved refuses a session with an unresolved native steering
// operation: octet never guesses from text whether it was applied, nor
// replays it.
func (a *Agent) checkUnresolved() error {
	if un := a.sess.UnresolvedSteering(); len(un) > 0 {
		return &UnresolvedSteeringError{Operation: un[0].ID, RunID: un[0].RunID}
	}
	return nil
}
