package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/eventgate"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// ACP stop reasons.
const (
	stopEndTurn         = "end_turn"
	stopMaxTokens       = "max_tokens"
	stopMaxTurnRequests = "max_turn_requests"
	stopRefusal         = "refusal"
	stopCancelled       = "cancelled"
)

// acpSession is one open session with its agent.
type acpSession struct {
	srv *Server
	id  string
	cwd string
	// hs is the session in the host: its ledger, agent and rules.
	hs *host.Session
	// files are the client's files (nil: the client has no fs
	// capability).
	files *clientFiles
	// subagents: the client understands child sessions.
	subagents bool

	mu sync.Mutex
	// run is the prompt in progress (nil: none); cancelled is set by
	// session/cancel for it.
	run       *agent.Run
	cancelled bool
	// busy is set while a slash command that does not run the model
	// (/diff, /rewind) holds the prompt slot.
	busy bool
	// gate records the tool_call updates sent for the prompt in
	// progress: a permission request follows its call's (nil: none).
	gate *eventgate.Gate
	// waits are the session/request_permission requests unanswered.
	waits map[*permissionWait]struct{}
	// denials are why octet itself denied a call (an answer without an
	// option), by session and call id, until its decision update is sent.
	denials map[[2]string]string
	// rejected are the reject_always answers: calls of exactly these
	// tools and scopes are denied without asking while the session is
	// open on this connection.
	rejected []rejection

	closeOnce sync.Once
	closeErr  error
}

var _ tools.Approver = (*acpSession)(nil)

// update sends one session/update on the session.
func (as *acpSession) update(u map[string]any) { as.srv.update(as.id, u) }

// running reports whether a prompt is running in the session.
func (as *acpSession) running() bool {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.run != nil
}

// broker returns the session's effect broker.
func (as *acpSession) broker() *tools.Broker { return as.hs.Broker() }

// errPromptRunning refuses a prompt while another one runs.
var errPromptRunning = &rpcError{Code: codeInvalidRequest, Message: "a prompt is already running in this session: wait for its answer or send session/cancel"}

// prompt handles session/prompt: it runs the prompt (or the slash
// command it starts with), streaming its events as session/update, and
// answers with the stop reason once the run is settled.
func (s *Server) prompt(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		SessionID string         `json:"sessionId"`
		Prompt    []contentBlock `json:"prompt"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	as, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	if cmd, arg := slashCommand(p.Prompt); cmd != nil {
		s.log.Info("slash command", "session", as.id, "command", cmd.name)
		return cmd.run(as, ctx, arg, p.Prompt[1:])
	}
	in, err := readPrompt(as.cwd, p.Prompt)
	if err != nil {
		return nil, err
	}
	return as.runInput(ctx, in)
}

// runInput runs in as the user's prompt; the session's first prompt gives it
// its title (session_info_update). Images the session's model does not
// take are refused (invalid params) before anything is kept or sent.
func (as *acpSession) runInput(ctx context.Context, in promptInput) (any, error) {
	if err := as.hs.CheckImages(in.images); err != nil {
		return nil, invalidParams("%v", err)
	}
	text := in.text
	return as.runPrompt(ctx, func(ctx context.Context) (*agent.Run, error) {
		untitled := as.hs.Title() == ""
		r, err := as.hs.Prompt(ctx, text, agent.PromptOptions{Images: in.images})
		if err == nil && untitled {
			if err := as.hs.TitleFromPrompt(text); err != nil {
				as.srv.log.Warn("could not set the session's automatic title", "session", as.id, "error", err)
			} else if title := as.hs.Title(); title != "" {
				as.update(map[string]any{"sessionUpdate": "session_info_update", "title": title, "updatedAt": now()})
			}
		}
		return r, err
	})
}

// now is the current time as session_info_update's updatedAt.
func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// runPrompt runs the run start begins, streaming its events, and answers
// once it is settled; session_info_update then says the session changed.
func (as *acpSession) runPrompt(ctx context.Context, start func(context.Context) (*agent.Run, error)) (any, error) {
	as.mu.Lock()
	if as.run != nil || as.busy {
		as.mu.Unlock()
		return nil, errPromptRunning
	}
	gate := new(eventgate.Gate)
	as.gate = gate
	r, err := start(ctx)
	if err != nil {
		as.gate = nil
		as.mu.Unlock()
		if errors.Is(err, agent.ErrBusy) {
			return nil, errPromptRunning
		}
		return nil, fmt.Errorf("start prompt: %w", err)
	}
	as.run, as.cancelled = r, false
	as.mu.Unlock()

	st := newRunStream(as.srv, as.id, as.cwd, as.hs.Ledger(), r.ID())
	st.gate, st.totals, st.texts, st.denial = gate, as.hs.Ledger().Totals, as.hs.FileTexts, as.takeDenial
	for ev := range r.Events() {
		st.event(ev)
	}
	gate.End()
	res := r.Wait()
	as.mu.Lock()
	cancelled := as.cancelled
	as.run, as.gate = nil, nil
	as.mu.Unlock()
	as.update(map[string]any{"sessionUpdate": "session_info_update", "updatedAt": now()})
	return as.answer(res, cancelled)
}

// answer maps a settled run onto session/prompt's result.
func (as *acpSession) answer(res agent.RunResult, cancelled bool) (any, error) {
	stop := ""
	switch {
	case cancelled || res.Outcome == agent.OutcomeCancelled:
		// ACP: a cancelled turn answers "cancelled", whatever error the
		// cancellation caused.
		stop = stopCancelled
	case res.Outcome == agent.OutcomeMaxTurns:
		stop = stopMaxTurnRequests
	case res.Outcome == agent.OutcomeFailed:
		msg := "the run failed"
		if res.Err != nil {
			msg = as.hs.Explain(res.Err).Error()
		}
		return nil, &rpcError{Code: codeInternalError, Message: msg, Data: map[string]any{"runId": res.RunID}}
	default:
		stop = as.completedStop(res.RunID)
	}
	return map[string]any{"stopReason": stop, "_meta": map[string]any{"octet": map[string]any{"runId": res.RunID, "outcome": string(res.Outcome)}}}, nil
}

// completedStop is the stop reason of a completed run: max_tokens when
// its last response stopped at the output limit, else end_turn.
func (as *acpSession) completedStop(runID string) string {
	branch := as.hs.Branch()
	for i := len(branch) - 1; i >= 0; i-- {
		e := branch[i]
		if e.RunID != runID {
			break
		}
		if e.Type == session.EntryAssistant {
			switch e.StopReason {
			case "max_output_tokens":
				return stopMaxTokens
			case "refusal":
				return stopRefusal
			}
			return stopEndTurn
		}
	}
	return stopEndTurn
}

// cancelPrompt cancels the prompt in progress and answers its pending
// permission requests as cancelled.
func (as *acpSession) cancelPrompt() {
	as.mu.Lock()
	r := as.run
	if r != nil {
		as.cancelled = true
	}
	waits := make([]*permissionWait, 0, len(as.waits))
	for w := range as.waits {
		waits = append(waits, w)
	}
	as.mu.Unlock()
	for _, w := range waits {
		w.cancelPrompt()
	}
	if r != nil {
		r.Cancel()
	}
}

// close releases the agent and the session file once the run settled.
func (as *acpSession) close() error {
	as.closeOnce.Do(func() {
		as.mu.Lock()
		r := as.run
		as.mu.Unlock()
		if r != nil {
			r.Cancel()
			r.Wait()
		}
		as.closeErr = as.hs.Close()
	})
	return as.closeErr
}
