package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// loop drives provider turns and tool batches until the run ends. It
// returns errCancelled (or any error while the run context is done) for a
// cancelled run.
func (r *Run) loop() (Outcome, error) {
	if r.compactOnly {
		return r.compactNow()
	}
	for {
		if r.ctx.Err() != nil {
			return OutcomeCancelled, errCancelled
		}
		if r.turn >= r.a.cfg.MaxTurns {
			return OutcomeMaxTurns, nil
		}
		r.turn++
		ar, err := r.mainTurn()
		if err != nil {
			return OutcomeFailed, err
		}
		calls, err := r.commitAssistant(ar)
		if err != nil {
			return OutcomeFailed, err
		}
		// The async calls of the previous response settle after this one,
		// which did not consume them, and before its own calls run.
		settled := r.async != nil
		if err := r.settleAsync(false); err != nil {
			return OutcomeFailed, err
		}
		if r.seg != nil { // the successor of a steering input follows
			r.segCalls = callIDs(calls)
		} else if err := r.abandonOp("ended_without_successor"); err != nil {
			// A response that ended without its successor (its stream
			// failed after it was committed, or ended otherwise): the
			// input goes as ordinary steering.
			return OutcomeFailed, err
		}
		if len(calls) > 0 {
			if r.seg == nil && r.asyncEligible(calls, ar.truncated) {
				err = r.dispatchAsync(calls)
			} else {
				err = r.dispatch(calls, ar.truncated)
			}
			if err != nil {
				return OutcomeFailed, err
			}
			r.emit(&TurnFinished{Turn: r.turn})
			continue
		}
		if settled || r.seg != nil { // the model has not seen those results yet, or a successor follows
			r.emit(&TurnFinished{Turn: r.turn})
			continue
		}
		r.emit(&TurnFinished{Turn: r.turn})
		if r.ctx.Err() != nil { // cancellation has priority over the final drain
			return OutcomeCancelled, errCancelled
		}
		if r.gates() {
			// A gate never returns ahead of queued input: that goes on
			// first, and the gate is asked when the run would end again.
			if next := r.ctl.takeQueued(); len(next) > 0 {
				if err := r.deliver(next); err != nil {
					return OutcomeFailed, err
				}
				continue
			}
			more, err := r.terminalGate()
			if err != nil {
				return OutcomeFailed, err
			}
			if more != nil {
				if err := r.deliver([]control{*more}); err != nil {
					return OutcomeFailed, err
				}
				continue
			}
			if r.ctx.Err() != nil {
				return OutcomeCancelled, errCancelled
			}
		}
		// The atomic final drain/close boundary: queued steering, then one
		// follow-up, continue the run; otherwise the inbox closes. Input
		// accepted during a gate's request (or its final poll) is here.
		next, closed := r.ctl.closeOrNext()
		if closed {
			return OutcomeCompleted, nil
		}
		if err := r.deliver(next); err != nil {
			return OutcomeFailed, err
		}
	}
}

// callIDs returns the call ids of calls.
func callIDs(calls []session.Item) []string {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.CallID
	}
	return ids
}

// deliver persists accepted controls as entries, in order; a FinishNow
// makes the run tool-free from here on.
func (r *Run) deliver(ctls []control) error {
	for _, c := range ctls {
		if err := r.persistControl(c); err != nil {
			return err
		}
		if c.kind == controlFinishNow {
			r.toolFree = true
		}
	}
	return nil
}

// attemptResult is what one provider attempt produced.
type attemptResult struct {
	resp      *provider.Response
	requestID string
	truncated bool // the response stopped at max_output_tokens
	items     []provider.Item
	text      strings.Builder // provisional text of this attempt
	reasoning strings.Builder // provisional reasoning of this attempt
	estimate  int
	op        string // the typed operation ("" for the main request)
	n         int    // the attempt number within the turn
	logErr    error  // recording the dispatch failed: nothing was sent
}

// mainTurn performs one main provider turn, replacing failed attempts as
// the retry policy decides. Every attempt re-enters the preparation
// boundary (steering delivery, sticky FinishNow, compaction, limits).
func (r *Run) mainTurn() (*attemptResult, error) {
	first := 0
	if r.seg != nil {
		// The successor an accepted steering input asked for follows on
		// the open stream, with the settings of the response it
		// continues: no preparation boundary, no new pin; controls
		// queued meanwhile wait until it settles.
		ar, err := r.successor()
		if err == nil && ar != nil {
			r.a.retry.TurnCompleted()
			return ar, nil
		}
		if err != nil {
			if err := r.handleFailure("", ar, err, 0); err != nil {
				return nil, err
			}
			first = 1
		}
	}
	// A safe response boundary: a selection made since the last one
	// applies from here; the turn's replacements keep it.
	reason := session.BaselineBoundary
	if r.turn == 1 {
		reason = session.BaselineRunStart
	}
	if err := r.repin(reason); err != nil {
		return nil, err
	}
	for attempt := first; ; attempt++ {
		req, est, err := r.prepareMain()
		if err != nil {
			return nil, err
		}
		if err := r.gate("", req); err != nil {
			return nil, err
		}
		ar := &attemptResult{estimate: est, n: attempt}
		t0 := time.Now()
		err = r.attempt(req, ar)
		r.observeRequest("", attempt, req, ar, t0, err)
		if err == nil {
			r.a.retry.TurnCompleted()
			r.compactionFailed = false
			return ar, nil
		}
		if err := r.handleFailure("", ar, err, attempt); err != nil {
			return nil, err
		}
	}
}

// handleFailure applies the retry seam to one failed attempt: cancellation
// (with durable uncertainty when a main request was dispatched; a
// cancelled compaction persists neither usage nor summary, as the
// contract states), or the policy's decision. It returns nil when the
// attempt is to be replaced.
func (r *Run) handleFailure(op string, ar *attemptResult, err error, attempt int) (ferr error) {
	if ar.logErr != nil {
		return ar.logErr
	}
	defer func() { ferr = r.settleFailed(ferr) }()
	if op == "" {
		if r.seg != nil { // a response that ended for a steering input
			r.seg.Close()
			r.seg = nil
		}
		if err := r.abandonOp(failureReason(err)); err != nil {
			return err
		}
	}
	if r.ctx.Err() != nil {
		if dispatched(err) && op != OperationCompaction {
			if uerr := r.markUncertain(op, "cancelled_after_dispatch", true, attempt); uerr != nil {
				return errors.Join(errCancelled, uerr)
			}
		}
		return errCancelled
	}
	f := Failure{Err: err, Operation: op, PartialText: ar.text.String(), PartialReasoning: ar.reasoning.String(), Dispatched: dispatched(err)}
	dec := r.a.retry.Decide(f)
	if dec.UsageUnknown {
		reason := dec.Reason
		if reason == "" {
			reason = failureReason(err)
		}
		if uerr := r.markUncertain(op, reason, f.Dispatched, attempt); uerr != nil {
			return uerr
		}
	}
	if !dec.Retry {
		if dec.Err != nil {
			return dec.Err
		}
		if op != "" {
			return fmt.Errorf("provider %s request failed: %w", op, err)
		}
		return fmt.Errorf("provider request failed: %w", err)
	}
	kind := dec.Kind
	if kind == "" {
		kind = RetryInterruptedInference
	}
	delay, herr := r.hookRetry(op, dec, kind, err)
	if herr != nil {
		return herr
	}
	ev := &ProviderRetry{Attempt: dec.Attempt, MaxAttempts: dec.MaxAttempts, DelayMs: delay.Milliseconds(), RetryKind: kind, Reason: dec.Reason, Cause: describeFailure(err)}
	if dec.GiveUpIn != nil {
		ms := dec.GiveUpIn.Milliseconds()
		ev.GiveUpInMs = &ms
	}
	if op != "" {
		o := op
		ev.Operation = &o
	}
	r.emit(ev)
	if dec.FallbackHTTP {
		if fb, ok := r.a.cfg.Transport.(HTTPFallback); ok {
			fb.FallbackToHTTP()
		}
	}
	if op == "" {
		if err := r.recoverOutput(f, attempt); err != nil {
			return err
		}
	}
	if err := r.settleFailed(nil); err != nil { // settled before the wait
		return err
	}
	return r.sleep(delay)
}

// sleep waits d unless the run is cancelled first.
func (r *Run) sleep(d time.Duration) error {
	if d <= 0 {
		return r.ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return errCancelled
	case <-t.C:
		if r.ctx.Err() != nil { // cancellation wins a same-poll race
			return errCancelled
		}
		return nil
	}
}

// markUncertain durably records unknown usage and emits
// provider_usage_uncertain the first time in a run.
func (r *Run) markUncertain(op, reason string, dispatched bool, attempt int) error {
	u := session.UsageUncertain{RunID: r.id, Operation: op, Reason: reason, Dispatched: dispatched, Attempt: attempt}
	if err := r.a.sess.Append(append([]session.Record{session.UncertainRecord(u)}, r.settlement(session.SettledUncertain)...)...); err != nil {
		return fmt.Errorf("%w usage uncertainty: %w", errPersist, err)
	}
	r.settled()
	r.noteUncertain(op, reason)
	return nil
}

// noteUncertain emits provider_usage_uncertain the first time in a run
// that usage became uncertain (its marker already durable).
func (r *Run) noteUncertain(op, reason string) {
	if !r.uncertainEmitted {
		r.uncertainEmitted = true
		r.emit(&ProviderUsageUncertain{Operation: op, Reason: reason})
	}
}

// prepareMain is the safe preparation boundary before every main attempt:
// it delivers queued steering (and FinishNow), builds the request from the
// active branch, compacts when the estimate crosses the threshold, and
// clamps max_output_tokens to the space that remains.
func (r *Run) prepareMain() (*provider.Request, int, error) {
	if r.ctx.Err() != nil {
		return nil, 0, errCancelled
	}
	if err := r.deliver(r.ctl.takeSteering()); err != nil {
		return nil, 0, err
	}
	req, v, est := r.buildRequest()
	if err := r.checkContext(v); err != nil {
		return nil, 0, err
	}
	model := r.pin.model
	window := model.ContextWindow
	// A pending async job disables compaction: its calls' results are
	// not on the branch yet.
	if window > 0 && est+r.a.cfg.OutputReserve > window && !r.compactionFailed && r.async == nil {
		compacted, err := r.compact(v, est)
		if err != nil {
			return nil, 0, err
		}
		if compacted {
			// The environment context sent at the run's start may be
			// in the summarized part: the model gets the current one
			// again now, not only at the next prompt.
			if err := r.a.syncEnvironment(r.id); err != nil {
				return nil, 0, fmt.Errorf("%w environment context: %w", errPersist, err)
			}
			// The compaction's settlement is a safe boundary: steering
			// accepted while the summary request was pending goes into
			// this request, after the summary.
			if err := r.deliver(r.ctl.takeSteering()); err != nil {
				return nil, 0, err
			}
			req, _, est = r.buildRequest()
		}
	}
	if err := clampOutput(req, model, est); err != nil {
		return nil, 0, err
	}
	return req, est, nil
}

// clampOutput bounds req's max_output_tokens to the model's ceiling and
// the context space that remains after est tokens of input.
func clampOutput(req *provider.Request, model provider.Model, est int) error {
	window := model.ContextWindow
	maxOut := model.MaxOutputTokens
	if window > 0 {
		avail := window - est
		if avail <= 0 {
			return fmt.Errorf("context window exhausted: estimated %d tokens of %d", est, window)
		}
		if maxOut <= 0 || maxOut > avail {
			maxOut = avail
		}
	}
	if model.Assumed && model.MaxOutputTokens <= 0 {
		// The window is a guess and the model's own bound unknown: a
		// bound computed from them could exceed what the server allows
		// and fail the request, so it is left to the server.
		maxOut = 0
	}
	req.MaxOutputTokens = max(maxOut, 0)
	return nil
}

// buildRequest reconstructs the canonical provider request from the
// active branch.
func (r *Run) buildRequest() (*provider.Request, view, int) {
	model, reasoning := r.pin.model, r.pin.reasoning
	v := contextView(r.a.sess.Branch())
	req := &provider.Request{
		Model:        model.Name,
		Instructions: r.a.Instructions(),
		Input:        r.a.encoded.items(v, imageMode(model), r.a.imagesFor(model)),
	}
	granted := r.a.granted(model)
	if reasoning != nil && model.Reasoning && granted.Has(provider.FeatureReasoning) {
		req.Reasoning = reasoning
	}
	req.EncryptedReasoning = model.Reasoning && granted.Has(provider.FeatureEncryptedReasoning)
	if granted.Has(provider.FeaturePromptCacheKey) {
		req.PromptCacheKey = r.a.sess.Header().ID // one cache prefix per session
	}
	if r.toolFree {
		req.ToolChoice = "none"
	} else {
		req.Tools = r.a.toolDefs(model)
		if r.asyncGranted(model) {
			r.markAsync(req.Tools)
		}
		if len(req.Tools) > 0 {
			req.ToolChoice = "auto"
			req.ParallelToolCalls = granted.Has(provider.FeatureParallelToolCalls)
		} else {
			req.ToolChoice = "none"
		}
	}
	return req, v, estimate(req, v, r.a.calibration())
}

// attempt opens one stream and consumes it to its terminal event (see
// consume). A response that stopped at max_output_tokens is a result
// (truncated), not a failure.
func (r *Run) attempt(req *provider.Request, ar *attemptResult) error {
	openCtx := r.ctx
	if ob, ok := r.a.retry.(OutageBounder); ok {
		if d, bounded := ob.OutageDeadline(); bounded {
			c, cancel := context.WithDeadline(r.ctx, d)
			defer cancel()
			openCtx = c
		}
	}
	if notifiesBeforeSend(r.a.cfg.Transport) {
		openCtx = provider.WithBeforeSend(openCtx, func() error { return r.logDispatch(req, ar) })
	} else if err := r.logDispatch(req, ar); err != nil {
		return err
	}
	stream, err := r.a.cfg.Transport.Open(openCtx, req)
	if err != nil {
		if ar.logErr != nil {
			return ar.logErr
		}
		return err
	}
	if oo, ok := r.a.retry.(OpenObserver); ok {
		oo.Opened() // an outage in progress is over
	}
	// The request is out: tools start what their next call needs while
	// the model works (the bash tool's first snapshot).
	r.a.cfg.Host.WarmUp()
	return r.consume(stream, ar, false)
}

// consume reads stream to its terminal event into ar, forwarding
// provisional output as events when ar is a main attempt's (op ""). A
// main response on a route granting native steering takes steering
// inputs once created; one that ends with an accepted input
// (EventSegmentDone) leaves its stream open in r.seg for the successor.
// successor says stream is already past such an end: its
// response.created is the successor's, before which the input is
// applied.
func (r *Run) consume(stream provider.Stream, ar *attemptResult, successor bool) error {
	emitDeltas := ar.op == ""
	ss, steerable := stream.(provider.SteeringStream)
	steerable = steerable && emitDeltas && r.nativeGranted(r.pin.model)
	keep := false
	defer func() {
		if steerable {
			r.nat.detach()
		}
		if !keep {
			stream.Close()
		}
	}()
	r.nat.mu.Lock()
	r.nat.events = 0
	r.nat.mu.Unlock()
	for {
		ev, err := stream.Next(r.ctx)
		if r.ctx.Err() != nil { // cancellation wins a same-poll race
			return &provider.Error{Phase: provider.Body, Class: provider.Canceled, Dispatched: true, Err: r.ctx.Err()}
		}
		if err != nil {
			ar.requestID = stream.RequestID()
			if errors.Is(err, io.EOF) {
				return &provider.Error{Phase: provider.Body, Class: provider.TerminalEOF, Dispatched: true, Err: err}
			}
			if pe, ok := errors.AsType[*provider.Error](err); ok && pe.Class == provider.ResponsesIncomplete &&
				pe.IncompleteReason == "max_output_tokens" && pe.Response != nil {
				ar.resp, ar.truncated = pe.Response, true
				return nil
			}
			return err
		}
		switch ev.Type {
		case provider.EventCreated:
			if successor {
				if err := r.applySteering(); err != nil {
					return err
				}
			} else if steerable {
				r.nat.attach(ss, r.pin.model.Name)
			}
		case provider.EventSteerAccepted, provider.EventSteerPending, provider.EventSteerFailed:
			if steerable || successor {
				if err := r.steerEvent(ev); err != nil {
					return err
				}
			}
		case provider.EventSegmentDone:
			if ev.Response == nil || !steerable {
				return &provider.Error{Phase: provider.Body, Class: provider.ProtocolViolation, Dispatched: true, Message: "a response ended for a steering input octet did not send"}
			}
			ar.resp, ar.requestID = ev.Response, stream.RequestID()
			r.nat.detach() // between the responses new inputs queue
			r.seg, keep = ss, true
			return nil
		case provider.EventTextDelta:
			ar.text.WriteString(ev.Delta)
			if emitDeltas {
				r.emit(&OutputDelta{Channel: ChannelText, Text: ev.Delta})
			}
		case provider.EventReasoningDelta:
			ar.reasoning.WriteString(ev.Delta)
			if emitDeltas {
				r.emit(&OutputDelta{Channel: ChannelReasoning, Text: ev.Delta})
			}
		case provider.EventToolCallStarted:
			if emitDeltas {
				r.emit(&ToolCallStarted{CallID: ev.CallID, Name: ev.Name})
			}
		case provider.EventToolCallDelta:
			if emitDeltas {
				r.emit(&ToolCallDelta{CallID: ev.CallID, Delta: ev.Delta})
			}
		case provider.EventItemDone:
			if ev.Item != nil {
				ar.items = append(ar.items, *ev.Item)
				if emitDeltas && ev.Item.Type == provider.ItemFunctionCall {
					r.emit(&ToolCallEnded{CallID: ev.Item.CallID})
				}
			}
		case provider.EventCompleted:
			if ev.Response == nil {
				return &provider.Error{Phase: provider.Body, Class: provider.ProtocolViolation, Dispatched: true, Message: "completed without response"}
			}
			ar.resp = ev.Response
			ar.requestID = stream.RequestID()
			return nil
		}
	}
}

// commitAssistant persists the complete assistant message of ar together
// with its known usage (one durable write), emits assistant_committed and
// usage, and returns the message's function calls.
func (r *Run) commitAssistant(ar *attemptResult) ([]session.Item, error) {
	out := ar.resp.Output
	if len(out) == 0 {
		out = ar.items
	}
	items, bad := sessionItems(out)
	if bad != "" {
		return nil, r.settleUnused("", ar, fmt.Errorf("provider returned an output item octet cannot replay (%s)", bad))
	}
	stop := "completed"
	switch {
	case ar.truncated:
		stop = "max_output_tokens"
	case ar.resp.IncompleteReason == "steered":
		stop = "steered" // a steering input the provider took ended it
	case refused(out):
		stop = "refusal"
	}
	model := r.pin.model
	recs := []session.Record{session.EntryRecord(session.Entry{Type: session.EntryAssistant, RunID: r.id, Items: items, StopReason: stop})}
	u := ar.resp.Usage
	var cost int64
	var priced bool
	if u != nil {
		var rec session.Record
		rec, cost, priced = r.usageRecord("", model.Name, ar)
		recs = append(recs, rec)
	}
	settle, uncertain := r.completedSettlement("", u)
	recs = append(recs, settle...)
	opDone := r.opSettlement()
	recs = append(recs, opDone...)
	if err := r.a.sess.Append(recs...); err != nil {
		return nil, fmt.Errorf("persist assistant message: %w", err)
	}
	r.settled()
	if uncertain {
		r.noteUncertain("", reasonUsageNotReported)
	}
	if opDone != nil {
		r.endOp(false)
	}
	id := r.a.sess.Head()
	if u != nil {
		r.a.setCalibration(calibration{entryID: id, tokens: int(u.InputTokens + u.OutputTokens)})
		r.contextTokens = u.InputTokens + u.OutputTokens
	}
	r.emit(&AssistantCommitted{EntryID: id})
	if u != nil {
		r.addUsage(u, cost, priced)
	}
	var calls []session.Item
	for _, it := range items {
		if it.Type == session.ItemFunctionCall {
			calls = append(calls, it)
		}
	}
	return calls, nil
}

// refused reports whether the response declined: a message of refusal
// parts only, and no function call.
func refused(out []provider.Item) bool {
	declined := false
	for _, it := range out {
		switch {
		case it.Type == provider.ItemFunctionCall:
			return false
		case it.Type == provider.ItemMessage && it.Text == "" && it.Refusal != "":
			declined = true
		}
	}
	return declined
}

// usageRecord builds the usage record of a completed request, priced when
// the retry policy is a UsagePricer.
func (r *Run) usageRecord(op, model string, ar *attemptResult) (session.Record, int64, bool) {
	u := ar.resp.Usage
	reqID := ar.requestID
	if reqID == "" {
		reqID = ar.resp.ID
	}
	var cost int64
	var priced bool
	if p, ok := r.a.retry.(UsagePricer); ok {
		cost, priced = p.PriceUsage(model, *u)
	}
	return session.UsageRecord(session.Usage{
		RunID: r.id, RequestID: reqID, Operation: op, Model: model,
		Input: u.InputTokens, CachedInput: u.CachedTokens, Output: u.OutputTokens, Reasoning: u.ReasoningTokens,
		CostPicodollars: cost, Priced: priced,
	}), cost, priced
}

// addUsage adds a durable request's usage to the run and emits the run's
// known usage subtotal.
func (r *Run) addUsage(u *provider.Usage, cost int64, priced bool) {
	r.usage.Requests++
	r.usage.Input += u.InputTokens
	r.usage.CachedInput += u.CachedTokens
	r.usage.Output += u.OutputTokens
	r.usage.Reasoning += u.ReasoningTokens
	r.usage.CostPicodollars += cost
	if priced {
		r.priced = true
	}
	t := r.a.sess.Totals()
	ev := &Usage{
		Input: r.usage.Input, CachedInput: r.usage.CachedInput, Output: r.usage.Output, Reasoning: r.usage.Reasoning,
		Complete:      !t.Uncertain && r.nat.current() == nil, // a steering input is uncertain until its successor settles
		ContextTokens: r.contextTokens, ContextWindow: int64(r.pin.model.ContextWindow),
		Session: SessionUsageOf(t),
	}
	if r.priced {
		micros := r.usage.CostPicodollars / 1_000_000
		ev.CostMicros = &micros
	}
	r.emit(ev)
}

// gate lets a RequestGate policy refuse a prepared request before it is
// opened (hard ceilings, route qualification).
func (r *Run) gate(op string, req *provider.Request) error {
	g, ok := r.a.retry.(RequestGate)
	if !ok {
		return nil
	}
	if err := g.BeforeRequest(op, r.pin.model, req, r.a.ceilingTotals()); err != nil {
		return fmt.Errorf("request refused before sending: %w", err)
	}
	return nil
}

// observeRequest reports one attempt to the telemetry observer.
func (r *Run) observeRequest(op string, attempt int, req *provider.Request, ar *attemptResult, t0 time.Time, err error) {
	info := RequestInfo{
		RunID: r.id, Operation: op, Turn: r.turn, Attempt: attempt, InputItems: len(req.Input),
		EstimatedTokens: ar.estimate, Duration: time.Since(t0), OK: err == nil,
	}
	names := make([]string, 0, len(req.Tools)+1)
	names = append(names, req.Instructions)
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	info.InstructionsHash = hashHex(names...)
	if err == nil && ar.resp != nil && ar.resp.Usage != nil {
		info.Input, info.Output = ar.resp.Usage.InputTokens, ar.resp.Usage.OutputTokens
	}
	r.a.obs.RequestFinished(info)
}

// calibration returns the last provider-reported context size.
func (a *Agent) calibration() calibration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calib
}

// setCalibration records the provider-reported context size.
func (a *Agent) setCalibration(c calibration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calib = c
}
