package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/eventgate"
	"github.com/octet-agent/octet/internal/jsonstr"
)

// runState is one active run. Its owner is the goroutine that handles the
// octet/prompt request; other goroutines only cancel it or send controls.
type runState struct {
	id      string
	session *sessionState
	handle  runHandle
	reqID   jsonrpc2.ID
	token   string // tokenKey of the progress token, "" when none

	progMu sync.Mutex
	prog   *progress

	cancelOnce sync.Once
	cancelled  chan struct{} // closed by cancel
	done       chan struct{} // closed once the run has settled and left its session

	// started records which calls' tool_started the client was sent, so
	// an approval is asked only after the events the run emitted before it.
	started eventgate.Gate

	// caps are the client's capabilities (fixed by initialize).
	caps clientCaps
	// fwdMu serializes forwarding the run's events, whichever goroutine
	// does it: driveRun for the events it takes from the handle, or the
	// run's owner goroutine for those deliver takes. fwdSeq is the Seq of
	// the last event forwarded, so deliver takes an event only when every
	// event before it has been forwarded. direct is set once driveRun has
	// started the run's progress: deliver takes nothing before.
	fwdMu  sync.Mutex
	fwdSeq int64
	direct atomic.Bool
	// envPrefix is the envelope of the run's octet/event params up to the
	// seq: {"sessionId":…,"runId":…,"epoch":…,"seq":
	envPrefix []byte
}

// cancel is the one cancel path for $/cancelRequest,
// window/workDoneProgress/cancel, octet/cancel, octet.cancel and shutdown.
func (r *runState) cancel(why string) {
	r.cancelOnce.Do(func() {
		close(r.cancelled)
		r.handle.Cancel()
	})
	_ = why
}

// report sends a progress report for the run, if it has progress.
func (r *runState) report(msg string) {
	r.progMu.Lock()
	p := r.prog
	r.progMu.Unlock()
	if p != nil {
		p.report(msg)
	}
}

// awaitApproval reports that callID waits for a person (see
// progress.awaitApproval).
func (r *runState) awaitApproval(callID, msg string) {
	r.progMu.Lock()
	p := r.prog
	r.progMu.Unlock()
	if p != nil {
		p.awaitApproval(callID, msg)
	}
}

// approvalDone reports the state after callID's approval was decided.
func (r *runState) approvalDone(callID, msg string) {
	r.progMu.Lock()
	p := r.prog
	r.progMu.Unlock()
	if p != nil {
		p.approvalDone(callID, msg)
	}
}

// promptParams are the params of octet/prompt.
type promptParams struct {
	SessionID     string          `json:"sessionId"`
	Text          string          `json:"text"`
	WorkDoneToken json.RawMessage `json:"workDoneToken"`
	WithoutTools  bool            `json:"withoutTools"`
	// Context is what the user attached (attachments.go).
	Context []attachment `json:"context"`
	// withText puts the run's final answer in the result's text
	// (octet.prompt: a stock client sees no octet/event).
	withText bool
}

// promptResult is the final answer to octet/prompt.
type promptResult struct {
	RunID   string `json:"runId"`
	Outcome string `json:"outcome"`
	Usage   any    `json:"usage"`
	Error   string `json:"error,omitempty"`
	// Text is the run's final answer, for octet.prompt only (present,
	// possibly empty, there; absent from octet/prompt's answer).
	Text *string `json:"text,omitempty"`
}

// prompt handles octet/prompt.
func (s *Server) prompt(ctx context.Context, req *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p promptParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	ss, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	return s.runPrompt(ctx, req.ID(), ss, p)
}

// runPrompt starts a run, registers it for every cancel path, releases the
// reader and owns the run until it ends; the answer is its outcome.
func (s *Server) runPrompt(ctx context.Context, reqID jsonrpc2.ID, ss *sessionState, p promptParams) (any, error) {
	if p.Text == "" {
		return nil, invalidParams("text is required")
	}
	text, imgs, err := s.withAttachments(ss.handle.Cwd(), p.Text, p.Context)
	if err != nil {
		return nil, err
	}
	if err := ss.handle.CheckImages(imgs); err != nil {
		return nil, invalidParams("%v", err)
	}
	ss.mu.Lock()
	if ss.closing {
		ss.mu.Unlock()
		return nil, closedError(ss.id)
	}
	if ss.active != nil {
		active := ss.active.id
		ss.mu.Unlock()
		return nil, busyError(ss.id, active)
	}
	if ss.rewinding {
		ss.mu.Unlock()
		return nil, rewindingError(ss.id)
	}
	s.titleFromPrompt(ss, p.Text)
	var live atomic.Pointer[runState] // set once r exists
	deliver := func(ev wireEvent) bool {
		if r := live.Load(); r != nil {
			return s.deliver(r, ev)
		}
		return false
	}
	h, err := startRun(s.ctx, ss.handle, text, agent.PromptOptions{WithoutTools: p.WithoutTools, Images: imgs}, deliver)
	if err != nil {
		ss.mu.Unlock()
		if errors.Is(err, errBusy) {
			return nil, busyError(ss.id, "(unknown)")
		}
		if _, ok := errors.AsType[*host.InputError](err); ok {
			return nil, invalidParams("%v", err)
		}
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("start run: %v", err))
	}
	r := &runState{id: h.ID(), session: ss, handle: h, reqID: reqID, cancelled: make(chan struct{}), done: make(chan struct{})}
	r.envPrefix = eventEnvelopePrefix(ss.id, r.id, ss.epoch, 0)
	ss.active = r
	ss.mu.Unlock()

	s.mu.Lock()
	r.caps = s.caps
	s.runs[r.id] = r
	if reqID.IsValid() {
		s.byRequest[reqID] = r
	}
	if len(p.WorkDoneToken) > 0 && string(p.WorkDoneToken) != "null" {
		r.token = tokenKey(p.WorkDoneToken)
		s.byToken[r.token] = r
	}
	// settleRuns waits on handlerWG/replyWG only after the state is shuttingDown (set
	// under s.mu), so an Add here never races a Wait at zero.
	shutting := s.state == stateShuttingDown
	if !shutting {
		s.handlerWG.Add(1)
		if reqID.IsValid() && !s.awaitingReply[reqID] {
			// Done when the answer has been written (replyWritten).
			s.awaitingReply[reqID] = true
			s.replyWG.Add(1)
		}
	}
	s.mu.Unlock()
	if shutting {
		r.cancel("server shutting down")
	} else {
		defer s.handlerWG.Done()
	}
	live.Store(r)

	// Everything later messages need is registered: release the reader.
	jsonrpc2.Async(ctx)

	settled := false
	defer func() {
		r.direct.Store(false)
		if !settled {
			// driveRun panicked (the panic goes on to the handler's
			// recover, which answers with an error): stop the run and
			// drain its events so it can settle and the session is free.
			r.cancel("server error")
			go func() {
				for {
					if _, ok := h.Next(); !ok {
						break
					}
				}
				h.Wait()
			}()
		}
		s.mu.Lock()
		delete(s.runs, r.id)
		if reqID.IsValid() {
			delete(s.byRequest, reqID)
		}
		if r.token != "" {
			delete(s.byToken, r.token)
		}
		s.mu.Unlock()
		s.ended.add(r.id)
		ss.mu.Lock()
		if ss.active == r {
			ss.active = nil
		}
		ss.lastUsed = time.Now()
		ss.mu.Unlock()
		close(r.done)
	}()
	res := s.driveRun(r, p.WorkDoneToken)
	if p.withText {
		text := host.FinalAnswer(ss.handle.Ledger(), r.id)
		res.Text = &text
	}
	settled = true
	return rawResult(res)
}

// driveRun pumps the run's events to the client, keeps progress, and
// returns the final answer once the run has settled.
func (s *Server) driveRun(r *runState, clientToken json.RawMessage) promptResult {
	prog := s.startProgress(r, clientToken) // also sets r.prog
	r.direct.Store(true)
	for {
		ev, ok := r.handle.Next()
		if !ok {
			break
		}
		r.fwdMu.Lock()
		s.forward(r, ev)
		prog.observe(ev)
		r.fwdSeq = ev.Seq
		r.fwdMu.Unlock()
	}
	r.started.End()
	res := r.handle.Wait()
	out := promptResult{RunID: r.id, Outcome: res.Outcome, Usage: res.Usage}
	if res.Err != nil {
		out.Error = res.Err.Error()
	}
	if out.Outcome == "" {
		out.Outcome = "failed"
	}
	prog.end(out.Outcome)
	s.mu.Lock()
	events := s.caps.events
	s.mu.Unlock()
	if out.Outcome == "failed" && !events {
		// A stock LSP client shows no octet/event; tell it why the run failed.
		s.notify("window/showMessage", &protocol.ShowMessageParams{
			Type: protocol.MessageTypeError, Message: "octet: the run failed: " + host.Clip(out.Error, 500),
		})
	}
	s.log.Info("run finished", "session", r.session.id, "run", r.id, "outcome", out.Outcome)
	return out
}

// forward sends one event: recovered_output only as
// octet/recoveredOutput, everything else as octet/event (each to every
// client that did not turn it off with false). Both are buffered for
// octet/session/resume either way.
func (s *Server) forward(r *runState, ev wireEvent) {
	ss := r.session
	caps := r.caps
	if ev.Kind == "recovered_output" {
		var body struct {
			Channel string `json:"channel"`
			Text    string `json:"text"`
		}
		if err := json.Unmarshal(ev.Body, &body); err != nil {
			s.log.Error("undecodable recovered_output event", "run", r.id, "error", err)
			return
		}
		s.emit(ss, "octet/recoveredOutput", caps.sendRecovered, func(seq int64) json.RawMessage {
			b, _ := json.Marshal(map[string]any{
				"sessionId": ss.id, "runId": r.id, "epoch": ss.epoch, "seq": seq,
				"channel": body.Channel, "text": body.Text,
			})
			return b
		})
		return
	}
	s.emit(ss, "octet/event", caps.sendEvents, func(seq int64) json.RawMessage {
		params, _ := r.envelope(seq, &ev)
		return params
	})
	if ev.Kind == "tool_started" {
		var body struct {
			CallID string `json:"callId"`
		}
		if json.Unmarshal(ev.Body, &body) == nil && body.CallID != "" {
			r.started.Sent(body.CallID)
		}
	}
}

// eventEnvelope builds {"sessionId","runId","epoch","seq","event"} without
// re-encoding the event body.
func eventEnvelope(sessionID, runID, epoch string, seq int64, body json.RawMessage) json.RawMessage {
	b := eventEnvelopePrefix(sessionID, runID, epoch, len(body)+32)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"event":`...)
	b = append(b, body...)
	return append(b, '}')
}

// appendJSONString appends s as json.Marshal encodes it.
func appendJSONString(b []byte, s string) []byte { return jsonstr.Append(b, s) }

// eventEnvelopePrefix is {"sessionId":…,"runId":…,"epoch":…,"seq": of
// one run's octet/event params (encoded once per run), with room for
// extra more bytes.
func eventEnvelopePrefix(sessionID, runID, epoch string, extra int) []byte {
	b := make([]byte, 0, len(sessionID)+len(runID)+len(epoch)+48+extra)
	b = append(b, `{"sessionId":`...)
	b = jsonstr.Append(b, sessionID)
	b = append(b, `,"runId":`...)
	b = jsonstr.Append(b, runID)
	b = append(b, `,"epoch":`...)
	b = jsonstr.Append(b, epoch)
	return append(b, `,"seq":`...)
}

// envelope builds the params {"sessionId","runId","epoch","seq","event"}
// of one octet/event from the run's pre-encoded prefix, encoding the
// event body into it (this is the hot path for output deltas): one
// allocation, which the replay buffer keeps. body is the event object
// within params.
func (r *runState) envelope(seq int64, ev *wireEvent) (params, body json.RawMessage) {
	n := len(ev.Body)
	if n == 0 { // not encoded yet: room for the object and some escapes
		switch d := ev.event.(type) {
		case *agent.OutputDelta:
			n = len(d.Text) + len(d.Text)/8 + 64
		case *agent.ToolCallDelta:
			n = len(d.CallID) + len(d.Delta) + len(d.Delta)/8 + 64
		default:
			n = 256
		}
	}
	b := make([]byte, 0, len(r.envPrefix)+n+64)
	b = append(b, r.envPrefix...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"event":`...)
	at := len(b)
	b = ev.appendBody(b)
	body = b[at:len(b):len(b)]
	return append(b, '}'), body
}

// directKinds are the events deliver may forward on the run's owner
// goroutine: the streamed deltas, whose forwarding touches nothing but
// the session's seq and replay buffer and the stream (and progress only
// when it changes, which deliver leaves to driveRun).
func directKind(kind string) bool {
	return kind == "output_delta" || kind == "tool_call_delta"
}

// deliver forwards ev from the run's owner goroutine, without the handoff
// to driveRun, when that cannot make the run wait: ev is a delta, every
// earlier event of the run has been forwarded, nothing else is forwarding
// or emitting for the session, the stream is writing nothing else and can
// bound a write (tolerantStream.lockDirect), and the run's progress would
// not change. Otherwise it returns false and the event takes the
// ordinary path (the run's event channel, then driveRun), in order.
func (s *Server) deliver(r *runState, ev wireEvent) bool {
	if !directKind(ev.Kind) || !r.direct.Load() || !r.fwdMu.TryLock() {
		return false
	}
	defer r.fwdMu.Unlock()
	if ev.Seq != r.fwdSeq+1 || !r.prog.quiet(ev) {
		return false
	}
	ss := r.session
	if !ss.mu.TryLock() {
		return false
	}
	defer ss.mu.Unlock()
	send := r.caps.sendEvents
	if send && !s.stream.lockDirect() {
		return false
	}
	seq := ss.events.Next()
	params, body := r.envelope(seq, &ev)
	ss.events.Keep(bufferedEvent{Seq: seq, Method: "octet/event", Params: params})
	if send {
		s.stream.writeDirect("octet/event", params)
	}
	r.fwdSeq = ev.Seq
	if ev.Kind == "tool_call_delta" {
		ev.Body = body
		r.prog.observe(ev)
	}
	return true
}

// runControl finds a run for a control request.
func (s *Server) runControl(runID string) (*runState, error) {
	if runID == "" {
		return nil, invalidParams("runId is required")
	}
	s.mu.Lock()
	r := s.runs[runID]
	s.mu.Unlock()
	if r != nil {
		return r, nil
	}
	if s.ended.has(runID) {
		return nil, runEndedError(runID)
	}
	return nil, jsonrpc2.NewError(CodeNoRun, fmt.Sprintf("unknown run %q", runID))
}

func runEndedError(runID string) error {
	return jsonrpc2.NewError(CodeRunEnded, fmt.Sprintf("RunEnded: run %s has ended; start a new octet/prompt", runID))
}

// cancelRun handles octet/cancel: level-triggered and idempotent; a run
// that has already ended answers {} too.
func (s *Server) cancelRun(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		RunID string `json:"runId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if child, ok := s.childRun(p.RunID); ok {
		// A delegated child's run: interrupt that child only.
		if err := child.Interrupt(); err != nil {
			return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("cancel child run %s: %v", p.RunID, err))
		}
		return json.RawMessage(`{}`), nil
	}
	r, err := s.runControl(p.RunID)
	if err != nil {
		var w *jsonrpc2.Error
		if errors.As(err, &w) && w.Code == CodeRunEnded {
			return json.RawMessage(`{}`), nil
		}
		return nil, err
	}
	r.cancel("octet/cancel")
	return json.RawMessage(`{}`), nil
}

type textControl struct {
	RunID string `json:"runId"`
	Text  string `json:"text"`
}

// steer handles octet/steer.
func (s *Server) steer(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	return s.textControl(raw, "steer", func(r *runState, text string) (string, error) { return r.handle.Steer(text) })
}

// followUp handles octet/followUp.
func (s *Server) followUp(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	return s.textControl(raw, "followUp", func(r *runState, text string) (string, error) { return r.handle.FollowUp(text) })
}

func (s *Server) textControl(raw jsonrpc2.RawMessage, name string, do func(*runState, string) (string, error)) (any, error) {
	var p textControl
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.Text == "" {
		return nil, invalidParams("text is required")
	}
	r, err := s.runControl(p.RunID)
	if err != nil {
		return nil, err
	}
	id, err := do(r, p.Text)
	switch {
	case errors.Is(err, errRunEnded):
		return nil, runEndedError(r.id)
	case err != nil:
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("%s run %s: %v", name, r.id, err))
	}
	return rawResult(map[string]string{"messageId": id})
}

// finishNow handles octet/finishNow.
func (s *Server) finishNow(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p textControl
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	r, err := s.runControl(p.RunID)
	if err != nil {
		return nil, err
	}
	switch err := r.handle.FinishNow(p.Text); {
	case errors.Is(err, errRunEnded):
		return nil, runEndedError(r.id)
	case err != nil:
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("finishNow run %s: %v", r.id, err))
	}
	return json.RawMessage(`{}`), nil
}
