package agent

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// errCancelled is the internal sentinel for a cancelled run.
var errCancelled = errors.New("run cancelled")

// Run is one driven prompt. Its owner goroutine alone touches the loop
// state; other goroutines interact through controls, Cancel and Events.
type Run struct {
	a      *Agent
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	opts   PromptOptions
	ctl    *controls
	events chan Event
	done   chan struct{}
	result RunResult

	// Owner-goroutine state.
	seq              int64
	turn             int
	toolFree         bool // sticky tool-free policy (WithoutTools / FinishNow)
	uncertainEmitted bool
	inflight         *session.Dispatch // the pending dispatch of the attempt in flight
	usage            RunUsage
	priced           bool // some request of the run had a known cost
	// contextTokens is the context size the next usage event reports.
	contextTokens int64
	pending       []pendingCall // calls of the last assistant entry without a durable result
	backlog       []Event       // events of a cancelled run the consumer has not made room for
	started       time.Time
	// compactionFailed suppresses autonomous compaction for the rest of
	// the logical turn after a failed summary the turn survives, so every
	// replacement does not pay for (and reset nothing with) another one.
	compactionFailed bool
	// compactOnly: the run compacts the conversation and ends (Compact).
	compactOnly bool
	// async is the run's started async batch, settled after the next
	// response (nil: none).
	async *asyncJob
	// gateContinuations counts the completion gate's continuations.
	gateContinuations int
	// pin is the model and reasoning selection the run's requests are
	// sent with (see selection.go).
	pin selection
	// nat is the native steering state (steering.go); seg the open
	// stream of a response that ended with an accepted input, whose
	// successor follows on it, and segCalls that response's calls.
	nat      nativeSteering
	seg      provider.SteeringStream
	segCalls []string
}

// newRun prepares a run; drive starts it.
func newRun(a *Agent, parent context.Context, opts PromptOptions) *Run {
	ctx, cancel := context.WithCancel(parent)
	id := newID("run_")
	return &Run{
		a: a, id: id, ctx: ctx, cancel: cancel, opts: opts,
		ctl:      newControls(id),
		events:   make(chan Event, eventBuffer),
		done:     make(chan struct{}),
		toolFree: opts.WithoutTools,
	}
}

// ID returns the run's identifier (also in every entry it writes).
func (r *Run) ID() string { return r.id }

// Events returns the run's event stream. Delivery is must-deliver and
// ordered: every event, provisional deltas included, is delivered exactly
// once with Seq increasing by one (less the events PromptOptions.Deliver
// took, which it got in that same order), and the channel is closed right
// after the single RunFinished. The channel is buffered (256); when it is full
// the live run waits for the consumer, so a slow consumer paces the run but
// never makes it drop an event. A consumer that stops draining must cancel
// the run (Cancel, or the context given to Prompt): a cancelled run never
// waits for the consumer, so it still settles its calls, writes its single
// checkpoint, closes Done and releases the agent; the events the channel
// had no room for (run_finished included) are kept in order and delivered
// when the consumer reads again. A run that is neither drained nor
// cancelled stays paced (and the agent busy) indefinitely.
func (r *Run) Events() <-chan Event { return r.events }

// Steer queues text to be delivered to the model at the next safe boundary
// (after the current tool results are durable). It returns the control's
// message id, or ErrRunEnded once the run has closed.
func (r *Run) Steer(text string) (string, error) {
	if text == "" {
		return "", ErrEmptyInput
	}
	return r.ctl.submitSteer(text, r.steerNative)
}

// FollowUp queues text to be delivered when the run would otherwise end;
// the run then continues with it. It returns ErrRunEnded after closure.
func (r *Run) FollowUp(text string) (string, error) {
	if text == "" {
		return "", ErrEmptyInput
	}
	return r.ctl.submit(controlFollowUp, text)
}

// FinishNow makes the rest of the run tool-free: at the next safe turn
// boundary its text (if any) is persisted as steering input, and every
// later request carries no tool schemas and tool_choice none. Calls of an
// already-open response that have not started are paired with errors. It
// returns ErrRunEnded after closure.
func (r *Run) FinishNow(text string) error {
	_, err := r.ctl.submit(controlFinishNow, text)
	return err
}

// Cancel aborts the run (level-triggered; calling it again does nothing).
// The run still emits RunFinished{cancelled} and writes its checkpoint.
func (r *Run) Cancel() { r.cancel() }

// Done is closed when the run's outcome is durable (checkpoint written).
func (r *Run) Done() <-chan struct{} { return r.done }

// Wait blocks until the run's checkpoint is written and returns its result.
// A live run is paced by its event consumer, so Events must be drained
// concurrently (or before calling Wait) unless the run is cancelled; Wait
// itself does not wait for the final RunFinished to be read.
func (r *Run) Wait() RunResult {
	<-r.done
	return r.result
}

// emit numbers e and delivers it (owner goroutine only): to
// PromptOptions.Deliver when it takes it, else on the channel. While the
// run is live a full channel paces the run. Once the run is cancelled the owner
// never blocks on the consumer: an event that does not fit is held in the
// backlog, in order, and delivered by flush after the checkpoint is
// durable, so an undrained or abandoned stream cannot keep a cancelled run
// from finishing.
func (r *Run) emit(e Event) {
	r.seq++
	e.setSeq(r.seq)
	if len(r.backlog) == 0 {
		if d := r.opts.Deliver; d != nil && r.ctx.Err() == nil && d(e) {
			return
		}
		select {
		case r.events <- e:
			return
		case <-r.ctx.Done():
		}
		select {
		case r.events <- e:
			return
		default:
		}
	}
	r.backlog = append(r.backlog, e)
}

// flush delivers the backlog (the consumer's pace, after the run's outcome
// is durable and the agent released) and closes the channel.
func (r *Run) flush() {
	for _, e := range r.backlog {
		r.events <- e
	}
	r.backlog = nil
	close(r.events)
}

// drive is the run's owner goroutine.
func (r *Run) drive() {
	r.started = time.Now()
	if rs, ok := r.a.retry.(RunStarter); ok {
		rs.RunStarted(r.id)
	}
	r.a.obs.RunStarted(RunInfo{RunID: r.id})
	r.emit(&RunStarted{RunID: r.id, WithoutTools: r.opts.WithoutTools})
	if r.a.sess.Totals().Uncertain {
		r.uncertainEmitted = true
		r.emit(&ProviderUsageUncertain{Reason: "session_usage_uncertain"})
	}
	r.awaitWarmup()
	outcome, runErr := r.loopSafe()
	outcome, runErr = r.finish(outcome, runErr)
	r.result = RunResult{RunID: r.id, Outcome: outcome, Usage: r.usage, Err: runErr}
	r.result.Usage.Complete = !r.a.sess.Totals().Uncertain
	r.cancel()
	r.a.release(r)
	close(r.done)
	r.a.obs.RunFinished(RunInfo{RunID: r.id, Outcome: outcome, Turns: r.turn, Duration: time.Since(r.started)})
	fin := &RunFinished{Outcome: outcome}
	if runErr != nil {
		fin.Error = boundedError(runErr)
	}
	r.emit(fin)
	r.flush()
}

// loopSafe runs the loop, turning a panic into a failed outcome.
func (r *Run) loopSafe() (outcome Outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.a.log.Error("agent: run panicked", "run", r.id, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			outcome, err = OutcomeFailed, fmt.Errorf("internal error: run panicked: %v", p)
		}
	}()
	outcome, err = r.loop()
	if _, unsaved := errors.AsType[*ResultNotSavedError](err); unsaved {
		// Even under cancellation: a result that could not be saved
		// fails the run, and says so.
		return OutcomeFailed, err
	}
	if errors.Is(err, errCancelled) || (err != nil && r.ctx.Err() != nil) {
		return OutcomeCancelled, nil
	}
	return outcome, err
}

// finish settles what an early ending leaves behind and writes the run's
// single checkpoint: calls of the last assistant entry that never started
// are paired with errors, accepted but undelivered controls are persisted
// as entries (so no accepted input is lost), then the checkpoint is
// appended. When the run already failed, a failure of these writes (most
// often the same full disk) is logged, not added to the run error, which
// names its first cause once.
func (r *Run) finish(outcome Outcome, runErr error) (Outcome, error) {
	var errs []error
	// A run's end cancels its async job and settles it: every started
	// call records its own outcome.
	if err := r.settleAsync(true); err != nil {
		errs = append(errs, err)
	}
	if err := r.settleAtEnd(); err != nil {
		errs = append(errs, err)
	}
	if r.seg != nil {
		r.seg.Close()
		r.seg = nil
	}
	if err := r.abandonOp("run_ended"); err != nil {
		errs = append(errs, err)
	}
	if outcome != OutcomeCompleted {
		if err := r.settlePending(settleText(outcome)); err != nil {
			errs = append(errs, err)
		}
	}
	// Accepted input not delivered (a completed run has none left, but
	// for an unapplied native input that abandonOp gave back).
	for _, c := range r.ctl.closeAll() {
		if err := r.persistControl(c); err != nil {
			errs = append(errs, err)
			break
		}
	}
	var recs []session.Record
	if r.a.cfg.RunEnd != nil {
		recs = r.runEnd(outcome)
		r.addDelegated(recs)
	}
	cp := session.Checkpoint{RunID: r.id, Outcome: string(outcome)}
	if runErr != nil || len(errs) > 0 {
		cp.Error = boundedError(errors.Join(append([]error{runErr}, errs...)...))
	}
	if err := r.a.sess.Append(append(recs, session.CheckpointRecord(cp))...); err != nil {
		errs = append(errs, fmt.Errorf("write checkpoint (%s): %w", writeAdvice(err), err))
		r.keepUnwritten(recs, cp, err)
	}
	if runErr != nil {
		for _, err := range errs {
			r.a.log.Error("agent: run not settled after its failure", "run", r.id, "err", err)
		}
		return outcome, runErr
	}
	if len(errs) > 0 && outcome == OutcomeCompleted {
		outcome = OutcomeFailed
	}
	if len(errs) > 0 {
		r.a.log.Error("agent: run not settled", "run", r.id, "err", errors.Join(errs...))
	}
	return outcome, errors.Join(errs...)
}

// keepUnwritten keeps the run's end (recs and its checkpoint cp), which
// could not be written (err), for the agent's next run to write first;
// the checkpoint then says why it came late. If this process ends
// first, the session's next writable open records the run's end itself.
func (r *Run) keepUnwritten(recs []session.Record, cp session.Checkpoint, err error) {
	note := fmt.Sprintf("this checkpoint could not be written when the run ended (%v; %s) and was written before the next run", err, writeAdvice(err))
	if cp.Error != "" {
		note = cp.Error + "; " + note
	}
	cp.Error = boundedError(errors.New(note))
	r.a.mu.Lock()
	r.a.unwritten = append(slices.Clone(recs), session.CheckpointRecord(cp))
	r.a.mu.Unlock()
}

// writeAdvice says what to do about err, a failed session write.
func writeAdvice(err error) string {
	if a := session.WriteFailureAdvice(err); a != "" {
		return a
	}
	return "fix what the error says, then try again"
}

// runEnd calls the RunEnd hook, turning a panic into a logged error (the
// checkpoint is written regardless).
func (r *Run) runEnd(outcome Outcome) (recs []session.Record) {
	defer func() {
		if p := recover(); p != nil {
			r.a.log.Error("agent: run end hook panicked", "run", r.id, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			recs = nil
		}
	}()
	return r.a.cfg.RunEnd(context.WithoutCancel(r.ctx), r.id, outcome)
}

// addDelegated adds the mirrored usage of the run's delegated children to
// the run's known usage (not to its request count): a run's usage is
// what it cost, its children included.
func (r *Run) addDelegated(recs []session.Record) {
	for _, rec := range recs {
		if rec.Kind != session.KindDelegatedUsage || rec.Delegated == nil {
			continue
		}
		u := rec.Delegated.Usage
		r.usage.Input += u.Input
		r.usage.CachedInput += u.CachedInput
		r.usage.Output += u.Output
		r.usage.Reasoning += u.Reasoning
		r.usage.CostPicodollars += u.CostPicodollars
	}
}

// settleText is the paired error of a call left unresolved by an ending.
func settleText(o Outcome) string {
	if o == OutcomeCancelled {
		return "Tool call cancelled before it ran."
	}
	return "Tool call not executed: the run ended first."
}

// persistControl writes an accepted control as its entry.
func (r *Run) persistControl(c control) error {
	typ := session.EntrySteering
	if c.kind == controlFollowUp {
		typ = session.EntryFollowUp
	}
	if c.text == "" {
		return nil
	}
	if _, err := r.a.sess.AppendEntry(session.Entry{Type: typ, RunID: r.id, Text: c.text}); err != nil {
		return fmt.Errorf("persist %s input: %w", typ, err)
	}
	return nil
}

// boundedError renders err for events and checkpoints, bounded in size.
func boundedError(err error) string {
	const max = 2048
	s := err.Error()
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
