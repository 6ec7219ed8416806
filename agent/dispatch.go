package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Static model-visible texts of synthetic paired errors. They never echo
// arguments, parser, broker, hook or approval details.
const (
	textTooManyCalls  = "Tool call not executed: the response contained more tool calls than the per-response limit."
	textToolsDisabled = "Tool call not executed: tools are disabled for the rest of this run."
	textTruncatedCall = "Tool call not executed: the response reached its output token limit while emitting tool calls, so the arguments may be incomplete."
	textCorrective    = "Your previous response reached the output token limit while emitting tool calls, so none of them was executed. Reissue the tool calls you still need with complete arguments (split large content into smaller calls)."
	textAbandoned     = "Tool call cancelled; it did not stop in time and its outcome is unknown."
	textIndeterminate = "Tool call outcome is indeterminate: the previous process ended before its result was recorded. It was not run again; check its effects before retrying."
	textToolPanicked  = "Tool failed: internal error."
	toolCancelGrace   = 10 * time.Second
)

// pendingCall is one function call of the last assistant entry.
type pendingCall struct {
	item   session.Item
	done   bool   // its result entry is durable
	denial string // the denial reason, once denied
	// denialNote is the person's reason for denying an approval
	// (bounded, made visible by the broker), passed to the model.
	denialNote string
	// withdrawn is set when FinishNow arrived before the call was
	// admitted (an approval still pending, say): it gets the static
	// tools-disabled error instead of its denial.
	withdrawn bool
	// started is set once the call is committed to execution. From then
	// on only its own outcome may resolve it: if that cannot be saved the
	// call stays unresolved (indeterminate on resume), never "not
	// executed".
	started bool
}

// ResultNotSavedError is the run error when a call ran but its result
// could not be persisted (disk full, a session limit). The call is left
// without a result, so resuming the session pairs it with the
// indeterminate crash-recovery error: its effects may have happened.
type ResultNotSavedError struct {
	Tool   string // the tool the model called
	CallID string
	Err    error // the session's append error
}

func (e *ResultNotSavedError) Error() string {
	return fmt.Sprintf("%s call %s ran but its result could not be saved: %v; the call stays unresolved: "+
		"once the session can be written again (%s), "+
		"resuming records it as indeterminate, since its effects may have happened", e.Tool, e.CallID, e.Err, writeAdvice(e.Err))
}

func (e *ResultNotSavedError) Unwrap() error { return e.Err }

// toolMsg is a decision or progress report from a dispatch, routed to the
// owner goroutine, which alone emits events.
type toolMsg struct {
	callID   string
	decision *tools.ToolPolicyDecision
	progress string
}

// toolSink collects toolMsgs from any goroutine without blocking it.
type toolSink struct {
	mu     sync.Mutex
	msgs   []toolMsg
	notify chan struct{}
	closed bool
}

func newToolSink() *toolSink { return &toolSink{notify: make(chan struct{}, 1)} }

func (s *toolSink) put(m toolMsg) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *toolSink) take() []toolMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs
	s.msgs = nil
	return m
}

func (s *toolSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.msgs = nil
}

// observer returns the broker observer that routes callID's evidence.
func (s *toolSink) observer(callID string) tools.DispatchObserver {
	return tools.DispatchObserver{
		OnDecision: func(d tools.ToolPolicyDecision) { s.put(toolMsg{callID: callID, decision: &d}) },
		OnProgress: func(text string) { s.put(toolMsg{callID: callID, progress: text}) },
	}
}

// observer is sink's observer of callID with, when the agent keeps
// intents, the intended changes of the call kept under its intent key.
func (r *Run) observer(sink *toolSink, callID string) tools.DispatchObserver {
	obs := sink.observer(callID)
	if in := r.a.cfg.Intents; in != nil {
		key := r.a.intentKey(callID)
		obs.OnIntent = func(intent changes.Intent) error { return in.WriteIntent(key, intent) }
	}
	return obs
}

// intentKey names the intended changes of call callID of the session.
func (a *Agent) intentKey(callID string) string {
	return changes.CheckpointID(a.sess.Header().ID, callID)
}

// drainSink emits every queued decision and progress report.
func (r *Run) drainSink(s *toolSink) {
	for _, m := range s.take() {
		if m.decision != nil {
			d := m.decision
			r.emit(&ToolPolicyDecision{CallID: d.CallID, Decision: d.Decision, Reason: d.Reason, Effect: d.Effect, EffectiveToolPolicy: d.EffectiveToolPolicy, RuleID: d.RuleID})
			continue
		}
		r.emit(&ToolOutput{CallID: m.callID, Text: m.progress})
	}
}

// dispatch executes the calls of one committed assistant message in model
// order and persists each result as soon as its outcome is committed.
func (r *Run) dispatch(calls []session.Item, truncated bool) error {
	r.pending = make([]pendingCall, len(calls))
	for i, c := range calls {
		r.pending[i] = pendingCall{item: c}
	}
	// A tool-free run asks for no reissue: its calls get the
	// tools-disabled error below instead.
	if truncated && !r.toolFree && !r.ctl.finishRequested() {
		for i := range calls {
			if err := r.syntheticResult(i, textTruncatedCall); err != nil {
				return err
			}
		}
		if _, err := r.a.sess.AppendEntry(session.Entry{Type: session.EntrySteering, RunID: r.id, Text: textCorrective}); err != nil {
			return fmt.Errorf("persist corrective continuation: %w", err)
		}
		return nil
	}
	sink := newToolSink()
	defer sink.close()
	for i := 0; i < len(calls); {
		if r.ctx.Err() != nil {
			return errCancelled
		}
		switch {
		case i >= r.a.cfg.MaxToolCallsPerTurn:
			if err := r.syntheticResult(i, textTooManyCalls); err != nil {
				return err
			}
			i++
		case r.toolFree || r.ctl.finishRequested():
			if err := r.syntheticResult(i, textToolsDisabled); err != nil {
				return err
			}
			i++
		default:
			n, err := r.dispatchFrom(i, sink)
			if err != nil {
				return err
			}
			i += n
		}
	}
	r.pending = nil
	return nil
}

// admitted is one call that passed admission.
type admitted struct {
	idx   int
	adm   *tools.Admission
	start time.Time
}

// dispatchFrom handles call i and, when it can start a parallel wave, the
// contiguous eligible calls after it. It returns how many calls it settled.
func (r *Run) dispatchFrom(i int, sink *toolSink) (int, error) {
	first, err := r.admit(i, sink)
	if err != nil || first == nil {
		return 1, err
	}
	if !first.adm.Parallel() {
		return 1, r.executeWave([]admitted{*first}, sink)
	}
	wave := []admitted{*first}
	j := i + 1
	var denied bool
	for j < len(r.pending) && len(wave) < MaxParallelWave && j < r.a.cfg.MaxToolCallsPerTurn &&
		!r.ctl.finishRequested() && r.ctx.Err() == nil && r.staticParallel(r.pending[j].item) {
		next, err := r.admitDeferred(j, sink)
		if err != nil {
			r.revoke(wave)
			return j - i, err
		}
		if next == nil { // denied: settled after the wave, in call order
			denied = true
			break
		}
		if !next.adm.Parallel() {
			// Classification changed between the static check and
			// admission: run what we have, then this call alone.
			if err := r.executeWave(wave, sink); err != nil {
				next.adm.Revoke()
				return j - i, err
			}
			return j - i + 1, r.executeWave([]admitted{*next}, sink)
		}
		wave = append(wave, *next)
		j++
	}
	if err := r.executeWave(wave, sink); err != nil {
		return j - i, err
	}
	if denied {
		if err := r.persistDenial(j, sink); err != nil {
			return j - i, err
		}
		j++
	}
	return j - i, nil
}

// staticParallel is the cheap pre-admission test for joining a wave: the
// tool is statically Parallel and the exact call classifies as Pure,
// WorkspaceRead or HostRead. Admission re-checks everything.
func (r *Run) staticParallel(call session.Item) bool {
	t, ok := r.a.cfg.Host.Lookup(call.Name)
	if !ok || t.Concurrency() != tools.Parallel {
		return false
	}
	if r.validate(call) != "" {
		return false // invalid arguments never reach classification
	}
	eff, err := safeClassify(t, json.RawMessage(call.Arguments))
	if err != nil {
		return false
	}
	switch eff {
	case tools.Pure, tools.WorkspaceRead, tools.HostRead:
		return true
	}
	return false
}

// safeClassify classifies without letting a panicking tool crash the run.
func safeClassify(t tools.Tool, args json.RawMessage) (eff tools.Effect, err error) {
	defer func() {
		if p := recover(); p != nil {
			eff, err = tools.Unknown, fmt.Errorf("classify panicked: %v", p)
		}
	}()
	return t.Classify(args)
}

// admit opens call i (tool_started), validates its arguments against the
// tool's schema and asks the broker. A denial is persisted at once and
// admit returns nil.
func (r *Run) admit(i int, sink *toolSink) (*admitted, error) {
	a, denied, err := r.admitCall(i, sink)
	if err != nil || !denied {
		return a, err
	}
	return nil, r.persistDenial(i, sink)
}

// admitDeferred is admit for a wave candidate: a denial is returned as nil
// and persisted later by the caller, after the wave's results.
func (r *Run) admitDeferred(i int, sink *toolSink) (*admitted, error) {
	a, denied, err := r.admitCall(i, sink)
	if err != nil || denied {
		return nil, err
	}
	return a, nil
}

// admitCall emits tool_started, validates and admits call i. On denial it
// records the denial for persistDenial.
func (r *Run) admitCall(i int, sink *toolSink) (*admitted, bool, error) {
	call := r.pending[i].item
	r.emit(&ToolStarted{CallID: call.CallID, Tool: call.Name})
	start := time.Now()
	host := r.a.cfg.Host
	if reason := r.validate(call); reason != "" {
		d := tools.ToolPolicyDecision{CallID: call.CallID, Decision: tools.DecisionDenied, Reason: reason, EffectiveToolPolicy: r.a.cfg.Broker.EffectiveToolPolicy()}
		sink.put(toolMsg{callID: call.CallID, decision: &d})
		r.drainSink(sink)
		r.pending[i].denial = d.Reason
		return nil, true, nil
	}
	// FinishNow withdraws a call that is not admitted yet (an approval
	// may be pending): it is paired with an error, never executed.
	actx, stop := context.WithCancel(r.ctx)
	go func() {
		select {
		case <-r.ctl.finished():
			stop()
		case <-actx.Done():
		}
	}()
	adm, d := r.a.cfg.Broker.Admit(actx, host, tools.DispatchRequest{
		Principal: r.a.cfg.Principal, RunID: r.id, CallID: call.CallID, Tool: call.Name, Arguments: json.RawMessage(call.Arguments),
	}, r.observer(sink, call.CallID))
	stop()
	r.drainSink(sink)
	if r.ctx.Err() == nil && r.ctl.finishRequested() {
		if adm != nil {
			adm.Revoke()
		}
		r.pending[i].withdrawn = true
		return nil, true, nil
	}
	if adm == nil {
		r.pending[i].denial, r.pending[i].denialNote = d.Reason, d.Note
		return nil, true, nil
	}
	return &admitted{idx: i, adm: adm, start: start}, false, nil
}

// validate checks the call's arguments before anything classifies them:
// canonical JSON object, then the tool's JSON schema. It returns a denial
// reason or "".
func (r *Run) validate(call session.Item) string {
	host := r.a.cfg.Host
	if _, ok := host.Lookup(call.Name); !ok || !r.a.offered(r.a.Model(), call.Name) {
		return tools.ReasonUnknownTool
	}
	canon, err := tools.CanonicalArguments(json.RawMessage(call.Arguments))
	if err != nil {
		return tools.ReasonInvalidArguments
	}
	if err := host.ValidateArguments(call.Name, canon); err != nil {
		r.a.log.Debug("agent: tool arguments failed schema validation", "tool", call.Name, "call", call.CallID)
		return tools.ReasonInvalidArguments
	}
	return ""
}

// persistDenial persists the static paired error of denied call i.
func (r *Run) persistDenial(i int, sink *toolSink) error {
	if r.pending[i].withdrawn {
		return r.persistResult(i, tools.Result{Text: textToolsDisabled, IsError: true}, false, time.Now())
	}
	d := tools.ToolPolicyDecision{Decision: tools.DecisionDenied, Reason: r.pending[i].denial, Note: r.pending[i].denialNote}
	return r.persistResult(i, d.DenialResult(), false, time.Now())
}

// revoke drops admissions that will not execute.
func (r *Run) revoke(wave []admitted) {
	for _, w := range wave {
		w.adm.Revoke()
	}
}

// outcome is one finished execution.
type outcome struct {
	idx int
	res tools.Result
}

// executeWave runs the admitted calls concurrently (a single call is a
// wave of one) and persists their results in call order, each as soon as it
// and every earlier call of the wave are done. The owner goroutine keeps
// emitting decisions and progress while it waits. Once a result cannot be
// saved, the rest of the wave is cancelled and no later result is
// persisted: each call still gets its tool_finished, marked unrecorded,
// and the first ResultNotSavedError is returned.
func (r *Run) executeWave(wave []admitted, sink *toolSink) error {
	wctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	results := make(chan outcome, len(wave))
	for _, w := range wave {
		r.pending[w.idx].started = true
		go r.execute(wctx, w, results)
	}
	got := make(map[int]tools.Result, len(wave))
	next := 0
	var failed error
	settle := func(w admitted, res tools.Result) {
		if failed != nil {
			commit(res, false)
			r.callFinished(w.idx, res, true, w.start, false)
			return
		}
		if err := r.persistResult(w.idx, res, true, w.start); err != nil {
			failed = err
			cancel()
		}
	}
	var grace <-chan time.Time
	ctxDone := wctx.Done()
	for next < len(wave) {
		select {
		case <-sink.notify:
			r.drainSink(sink)
		case o := <-results:
			got[o.idx] = o.res
			r.drainSink(sink)
			for ; next < len(wave); next++ {
				res, ok := got[wave[next].idx]
				if !ok {
					break
				}
				settle(wave[next], res)
			}
		case <-ctxDone:
			ctxDone = nil
			t := time.NewTimer(toolCancelGrace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			// Tools ignored cancellation: record unknown outcomes and
			// leave them behind rather than hang the run.
			for ; next < len(wave); next++ {
				r.a.log.Warn("agent: tool did not stop after cancellation", "tool", r.pending[wave[next].idx].item.Name)
				settle(wave[next], tools.Result{Text: textAbandoned, IsError: true})
			}
			if failed != nil {
				return failed
			}
			return errCancelled
		}
	}
	return failed
}

// execute runs one admitted call, turning a panic into an error result.
func (r *Run) execute(ctx context.Context, w admitted, out chan<- outcome) {
	res := tools.Result{Text: textToolPanicked, IsError: true}
	defer func() {
		if p := recover(); p != nil {
			r.a.log.Error("agent: tool dispatch panicked", "tool", w.adm.Tool().Name(), "panic", fmt.Sprint(p))
		}
		out <- outcome{idx: w.idx, res: res}
	}()
	res, _ = w.adm.Execute(ctx)
}

// syntheticResult pairs call i with a static error without executing it
// (tool_started and tool_finished frame it; there is no policy decision).
func (r *Run) syntheticResult(i int, text string) error {
	call := r.pending[i].item
	r.emit(&ToolStarted{CallID: call.CallID, Tool: call.Name})
	return r.persistResult(i, tools.Result{Text: text, IsError: true}, false, time.Now())
}

// persistResult durably appends call i's result entry and emits
// tool_finished, marked unrecorded when the append fails. The error for a
// call that ran (executed) is a *ResultNotSavedError.
func (r *Run) persistResult(i int, res tools.Result, executed bool, start time.Time) error {
	call := r.pending[i].item
	imgs := r.a.resultImages(&res)
	e := session.Entry{Type: session.EntryToolResult, RunID: r.id, Result: &session.ToolResult{
		CallID: call.CallID, Tool: call.Name, Text: res.Text, IsError: res.IsError, Details: ledgerDetails(res),
	}}
	if len(imgs) > 0 {
		e.Result.Attached = &session.Attached{Images: imgs}
	}
	if in := r.a.cfg.Intents; in != nil && len(res.Changes) > 0 {
		if err := in.Commit(r.a.intentKey(call.CallID), res.Changes); err != nil {
			// The images stay in the store, unprotected: they expire first.
			r.a.log.Warn("agent: checkpoint not recorded", "tool", call.Name, "call_id", call.CallID, "err", err)
		}
	}
	if _, err := r.a.sess.AppendEntry(e); err != nil {
		commit(res, false)
		r.callFinished(i, res, executed, start, false) // every tool_started is closed
		if !executed {
			return fmt.Errorf("persist result of %s call %s: %w", call.Name, call.CallID, err)
		}
		return &ResultNotSavedError{Tool: call.Name, CallID: call.CallID, Err: err}
	}
	commit(res, true)
	r.pending[i].done = true
	if executed && r.a.cfg.Intents != nil {
		r.a.cfg.Intents.DropIntent(r.a.intentKey(call.CallID)) // the result holds them now
	}
	if p := res.Plan; p != nil && !res.IsError {
		r.emit(&PlanUpdate{CallID: call.CallID, Explanation: p.Explanation, Plan: p.Steps})
	}
	r.callFinished(i, res, executed, start, true)
	return nil
}

// commit reports to the tool whether its result is durable (Result.Commit).
func commit(res tools.Result, durable bool) {
	if res.Commit != nil {
		res.Commit(durable)
	}
}

// callFinished emits call i's tool_finished (unrecorded when its result is
// not durable) and reports it to the observer.
func (r *Run) callFinished(i int, res tools.Result, executed bool, start time.Time, recorded bool) {
	call := r.pending[i].item
	fin := &ToolFinished{CallID: call.CallID, IsError: res.IsError, Unrecorded: !recorded, Changes: wireChanges(res.Changes), CannotUndo: res.CannotUndo}
	if res.IsError {
		fin.Error = clipText(res.Text, MaxToolErrorEventBytes)
	}
	r.emit(fin)
	name := call.Name
	if _, ok := r.a.cfg.Host.Lookup(name); !ok {
		name = "" // a name no tool has is model text, not a host name
	}
	r.a.obs.ToolFinished(ToolInfo{
		RunID: r.id, Tool: name, ArgumentsHash: hashHex(call.Arguments), Executed: executed,
		IsError: res.IsError, ResultBytes: len(res.Text), Duration: time.Since(start),
	})
}

// settlePending pairs every call of the last assistant entry that has no
// durable result and never started with a static error, so the session
// stays replayable. A call that started keeps no synthetic result: it was
// resolved by its own outcome, or (that outcome unsaved) stays unresolved
// for crash recovery to mark indeterminate.
func (r *Run) settlePending(text string) error {
	for i := range r.pending {
		if r.pending[i].done || r.pending[i].started {
			continue
		}
		if err := r.syntheticResult(i, text); err != nil {
			return err
		}
	}
	r.pending = nil
	return nil
}

// toolDefs returns the host's tools the broker's current policy could
// admit (Broker.Offers) and model m is offered (Config.Offer), as
// provider function tools: a session that was tightened is not offered
// tools it would deny at every call.
func (a *Agent) toolDefs(m provider.Model) []provider.FunctionTool {
	ts := a.cfg.Host.Tools()
	out := make([]provider.FunctionTool, 0, len(ts))
	for _, t := range ts {
		if !a.cfg.Broker.Offers(t) || !a.offered(m, t.Name()) {
			continue
		}
		out = append(out, provider.FunctionTool{Name: t.Name(), Description: t.Description(), Parameters: t.Schema()})
	}
	return out
}

// ledgerDetails returns the details a result is recorded with: the tool's
// details plus, under changes.DetailsKey, the files it changed (with the
// hashes of their images in the change store), so the changes survive a
// resume.
func ledgerDetails(res tools.Result) map[string]any {
	if len(res.Changes) == 0 && len(res.CannotUndo) == 0 {
		return res.Details
	}
	d := make(map[string]any, len(res.Details)+2)
	maps.Copy(d, res.Details)
	if len(res.Changes) > 0 {
		d[changes.DetailsKey] = res.Changes
	}
	if len(res.CannotUndo) > 0 {
		d[changes.CannotUndoKey] = res.CannotUndo
	}
	return d
}

// wireChanges is the event form of a result's changes.
func wireChanges(recs []changes.Record) []changes.Change {
	if len(recs) == 0 {
		return nil
	}
	out := make([]changes.Change, len(recs))
	for i, r := range recs {
		out[i] = r.Change
	}
	return out
}
