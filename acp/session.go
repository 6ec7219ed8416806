package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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

// acpSession is one session open on the connection: the host's open
// session (its agent, its activity, the permission requests it waits
// for, held in the connection's registry) and what ACP keeps beside it.
type acpSession struct {
	*host.OpenSession
	srv *Server
	// files are the client's files (nil: the client has no fs
	// capability).
	files *clientFiles
	// subagents: the client understands child sessions.
	subagents bool

	mu sync.Mutex
	// calls are the requests to the client its tools are waiting on.
	calls clientCalls
	// denials are why octet itself denied a call (an answer without an
	// option), by session and call id, until its decision update is sent.
	denials map[[2]string]string
	// rejected are the reject_always answers: calls of exactly these
	// tools and scopes are denied without asking while the session is
	// open on this connection.
	rejected []rejection
}

var _ tools.Approver = (*acpSession)(nil)

// cwd is the session's workspace.
func (as *acpSession) cwd() string { return as.Session().Cwd() }

// update sends one session/update on the session.
func (as *acpSession) update(u map[string]any) { as.srv.update(as.ID(), u) }

// turn is what holds a session busy on the connection (host.Activity):
// a prompt's run, or a slash command that runs no model (run nil). One
// at a time: a prompt while another holds the session is refused.
type turn struct {
	run *agent.Run
	// gate records the tool_call updates sent for the run: a permission
	// request follows its call's.
	gate *eventgate.Gate
	// cancelled is set by session/cancel (or a close) for the run.
	cancelled atomic.Bool
	done      chan struct{}
}

func newTurn() *turn { return &turn{gate: new(eventgate.Gate), done: make(chan struct{})} }

// Cancel cancels the turn's run (a slash command runs to its end).
func (t *turn) Cancel(string) {
	if t.run != nil {
		t.cancelled.Store(true)
		t.run.Cancel()
	}
}

func (t *turn) Done() <-chan struct{} { return t.done }

// current is the session's turn (nil: none).
func (as *acpSession) current() *turn {
	t, _ := as.Busy().(*turn)
	return t
}

// begin holds the session for t (started by start under the session's
// lock, when given): errPromptRunning while another turn holds it.
func (as *acpSession) begin(t *turn, start func() error) error {
	_, err := as.Start(func() (host.Activity, error) {
		if start != nil {
			if err := start(); err != nil {
				return nil, err
			}
		}
		return t, nil
	})
	if _, busy := errors.AsType[*host.BusyError](err); busy || errors.Is(err, agent.ErrBusy) {
		return errPromptRunning
	}
	if errors.Is(err, host.ErrClosed) {
		return notOpenError(as.ID())
	}
	return err
}

// end releases the session from t.
func (as *acpSession) end(t *turn) {
	as.End(t)
	close(t.done)
}

// broker returns the session's effect broker.
func (as *acpSession) broker() *tools.Broker { return as.Session().Broker() }

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
	as, err := s.session(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	if cmd, arg := slashCommand(p.Prompt); cmd != nil {
		s.log.Info("slash command", "session", as.ID(), "command", cmd.name)
		return cmd.run(as, ctx, arg, p.Prompt[1:])
	}
	in, err := readPrompt(as.cwd(), p.Prompt)
	if err != nil {
		return nil, err
	}
	return as.runInput(ctx, in)
}

// runInput runs in as the user's prompt; the session's first prompt gives it
// its title (session_info_update). Images the session's model does not
// take are refused (invalid params) before anything is kept or sent.
func (as *acpSession) runInput(ctx context.Context, in promptInput) (any, error) {
	if err := as.Session().CheckImages(in.images); err != nil {
		return nil, invalidParams("%v", err)
	}
	text := in.text
	return as.runPrompt(ctx, func(ctx context.Context) (*agent.Run, error) {
		untitled := as.Session().Title() == ""
		r, err := as.Session().Prompt(ctx, text, agent.PromptOptions{Images: in.images})
		if err == nil && untitled {
			if err := as.Session().TitleFromPrompt(text); err != nil {
				as.srv.log.Warn("could not set the session's automatic title", "session", as.ID(), "error", err)
			} else if title := as.Session().Title(); title != "" {
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
	t := newTurn()
	err := as.begin(t, func() (err error) {
		t.run, err = start(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("start prompt: %w", err)
	}
	// Read after the turn was registered: a cancel (or the client's
	// going away) either saw the turn or is seen here.
	if n, ok := readOrder(ctx); as.srv.cancelledAtStart(as.ID(), n, ok) {
		t.Cancel("session/cancel")
	}
	r := t.run
	st := newRunStream(as.srv, as.ID(), as.cwd(), as.Session().Ledger(), r.ID())
	st.gate, st.totals, st.texts, st.denial = t.gate, as.Session().Ledger().Totals, as.Session().FileTexts, as.takeDenial
	for ev := range r.Events() {
		st.event(ev)
	}
	t.gate.End()
	res := r.Wait()
	cancelled := t.cancelled.Load()
	as.end(t)
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
			msg = as.Session().Explain(res.Err).Error()
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
	branch := as.Session().Branch()
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
	t := as.current()
	if t != nil && t.run != nil {
		t.cancelled.Store(true)
	}
	as.calls.cancelAll()
	as.CancelPending(errPromptCancelled)
	if t != nil {
		t.Cancel("session/cancel")
	}
}
