package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/octet-agent/octet/internal/eventgate"
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
}

// promptResult is the final answer to octet/prompt.
type promptResult struct {
	RunID   string `json:"runId"`
	Outcome string `json:"outcome"`
	Usage   any    `json:"usage"`
	Error   string `json:"error,omitempty"`
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
	text, err := s.withAttachments(ss.handle.Cwd(), p.Text, p.Context)
	if err != nil {
		return nil, err
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
	h, err := ss.handle.Prompt(s.ctx, text, p.WithoutTools)
	if err != nil {
		ss.mu.Unlock()
		if errors.Is(err, errBusy) {
			return nil, busyError(ss.id, "(unknown)")
		}
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("start run: %v", err))
	}
	r := &runState{id: h.ID(), session: ss, handle: h, reqID: reqID, cancelled: make(chan struct{}), done: make(chan struct{})}
	ss.active = r
	ss.mu.Unlock()

	s.mu.Lock()
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

	// Everything later messages need is registered: release the reader.
	jsonrpc2.Async(ctx)

	settled := false
	defer func() {
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
	settled = true
	return rawResult(res)
}

// driveRun pumps the run's events to the client, keeps progress, and
// returns the final answer once the run has settled.
func (s *Server) driveRun(r *runState, clientToken json.RawMessage) promptResult {
	prog := s.startProgress(r, clientToken) // also sets r.prog
	for {
		ev, ok := r.handle.Next()
		if !ok {
			break
		}
		s.forward(r, ev)
		prog.observe(ev)
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
			Type: protocol.MessageTypeError, Message: "octet: the run failed: " + truncate(out.Error, 500),
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
	s.mu.Lock()
	caps := s.caps
	s.mu.Unlock()
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
		return eventEnvelope(ss.id, r.id, ss.epoch, seq, ev.Body)
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
// re-encoding the event body (this is the hot path for output deltas).
func eventEnvelope(sessionID, runID, epoch string, seq int64, body json.RawMessage) json.RawMessage {
	b := make([]byte, 0, len(body)+len(sessionID)+len(runID)+len(epoch)+80)
	b = append(b, `{"sessionId":`...)
	b = appendJSONString(b, sessionID)
	b = append(b, `,"runId":`...)
	b = appendJSONString(b, runID)
	b = append(b, `,"epoch":`...)
	b = appendJSONString(b, epoch)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"event":`...)
	b = append(b, body...)
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
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
