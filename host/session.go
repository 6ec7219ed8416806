package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Session is one open session with its agent. Its operations are safe
// for concurrent use; a dialect serializes what its protocol orders (one
// prompt at a time, no rewind during a run).
type Session struct {
	rt    *Runtime
	sess  *session.Session
	built *Built
	// startModel is the model the session was built with (configured or
	// asked for at creation): SetModel allows it besides the model table.
	startModel provider.Model
	// rules are the session's standing approvals and recorded policy.
	rules *RuleBook
	// docs is the client's overlay for the workspace (nil: none): a
	// rewind of an open document goes through it, as an edit does.
	docs tools.Documents
	// resolve maps a model name to a model (Host.resolveModel); catalog
	// is the host's catalog.
	resolve func(name string) (provider.Model, error)
	catalog func() Catalog
	// rewindMu serializes rewinds of the session.
	rewindMu sync.Mutex

	// stopWarm cancels the warm-up started when the session opened and
	// waits until it has settled (nil: none was started).
	stopWarm func()

	closeOnce sync.Once
	closeErr  error
}

// startPrewarm starts the agent's warm-up of the next request when the
// runtime asked for it; Close cancels it and waits for its settlement
// before the agent and the session file are closed. A failed warm-up
// is logged and otherwise changes nothing.
func (s *Session) startPrewarm(log *slog.Logger) {
	if !s.built.Prewarm {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := s.built.Agent.StartPrewarm(ctx)
	if done == nil {
		cancel()
		return
	}
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		if err := <-done; err != nil {
			log.Warn("warm-up request failed; the next prompt is sent as usual", "session", s.ID(), "error", err)
		}
	}()
	s.stopWarm = func() { cancel(); <-settled }
}

// ID is the session's id.
func (s *Session) ID() string { return s.sess.Header().ID }

// Cwd is the session's workspace.
func (s *Session) Cwd() string { return s.sess.Header().Cwd }

// Title is the session's title ("" when it has none).
func (s *Session) Title() string { return s.sess.Title() }

// Head is the active head entry id ("" for an empty session).
func (s *Session) Head() string { return s.sess.Head() }

// Ledger is the session's file, for a dialect that reads its records.
func (s *Session) Ledger() *session.Session { return s.sess }

// Agent is the agent that drives the session.
func (s *Session) Agent() *agent.Agent { return s.built.Agent }

// Broker is the session's effect broker.
func (s *Session) Broker() *tools.Broker { return s.built.Agent.Broker() }

// Rules are the session's standing approvals and recorded policy.
func (s *Session) Rules() *RuleBook { return s.rules }

// Extensions are the session's MCP servers (nil: none).
func (s *Session) Extensions() Extensions { return s.built.Extensions }

// Policy is the session's EffectiveToolPolicy snapshot.
func (s *Session) Policy() tools.EffectiveToolPolicy { return s.Broker().EffectiveToolPolicy() }

// Branch is the active branch, root to head.
func (s *Session) Branch() []session.Entry { return s.sess.Branch() }

// Prompt starts one run of text (agent.ErrBusy while one is active).
// Images (opts.Images, from DecodeImage) are refused with an *InputError,
// before anything is kept or sent, when there are too many or the
// session's model does not take image input (the catalog says which).
func (s *Session) Prompt(ctx context.Context, text string, opts agent.PromptOptions) (*agent.Run, error) {
	if err := s.CheckImages(opts.Images); err != nil {
		return nil, err
	}
	return s.built.Agent.Prompt(ctx, text, opts)
}

// Compact starts a run that summarizes the whole conversation now
// (agent.Agent.Compact; agent.ErrBusy while a run is active).
func (s *Session) Compact(ctx context.Context, opts agent.PromptOptions) (*agent.Run, error) {
	return s.built.Agent.Compact(ctx, opts)
}

// Explain puts the runtime's actionable sentence before a run's failure
// (first, so a shortened message keeps it; err itself stays in the
// chain).
func (s *Session) Explain(err error) error {
	if err == nil || s.rt.ExplainError == nil {
		return err
	}
	if hint := s.rt.ExplainError(err); hint != "" {
		return fmt.Errorf("%s (%w)", hint, err)
	}
	return err
}

// SetHead durably moves the active head to entryID.
func (s *Session) SetHead(entryID string) error {
	if _, ok := s.sess.Entry(entryID); !ok {
		return fmt.Errorf("no entry %q in session %s", entryID, s.ID())
	}
	return s.sess.SetHead(entryID)
}

// SetModel selects the model name for the session's next requests and
// returns the one in effect: the model the session was built with, one
// the runtime resolves, or one the endpoint lists (its list read again,
// for at most 5 s, when stale).
func (s *Session) SetModel(name string) (string, error) {
	m := s.startModel // the model the session was built with is always allowed
	if name != s.startModel.Name {
		var err error
		if m, err = s.resolve(name); err != nil {
			return "", err
		}
	}
	if err := s.built.Agent.SetModel(m); err != nil {
		return "", err
	}
	return s.built.Agent.Model().Name, nil
}

// SetReasoning selects the reasoning effort and returns the one in
// effect.
func (s *Session) SetReasoning(effort string) (string, error) {
	if err := CheckReasoning(effort); err != nil {
		return "", err
	}
	return s.built.Agent.SetReasoning(effort)
}

// Model is the model the session's next request uses.
func (s *Session) Model() provider.Model { return s.built.Agent.Model() }

// Reasoning is the session's reasoning effort ("" for the provider's
// default).
func (s *Session) Reasoning() string { return s.built.Agent.Reasoning() }

// CheckReasoning refuses an effort the Responses API does not know.
func CheckReasoning(effort string) error {
	switch effort {
	case "", "minimal", "low", "medium", "high", "xhigh", "none":
		return nil
	}
	return fmt.Errorf("unknown reasoning effort %q (minimal, low, medium, high, xhigh, none)", effort)
}

// SetEffectPolicy records p in the ledger and moves the session's broker
// to it; one looser than the launch policy is refused
// (tools.ErrPolicyLooser). A call already admitted keeps its decision.
func (s *Session) SetEffectPolicy(p tools.Policy) (tools.EffectiveToolPolicy, error) {
	return s.rules.SetPolicy(s.Broker(), p)
}

// Usage is a session's (or a run's) usage as the dialects report it.
type Usage struct {
	agent.SessionUsage
	Complete bool `json:"complete"`
	// Uncertainty says why usage is not complete; Refusal is the error a
	// hard ceiling gives the next prompt (both omitted when empty).
	Uncertainty string `json:"uncertainty,omitempty"`
	Refusal     string `json:"refusal,omitempty"`
}

// UsageOf is the usage of a session's totals.
func UsageOf(t session.Totals) Usage {
	u := Usage{SessionUsage: agent.SessionUsageOf(t), Complete: !t.Uncertain}
	if t.Uncertain {
		u.Uncertainty = agent.DescribeUncertainty(t.Cause)
	}
	return u
}

// RunUsage is the usage of one settled run.
func RunUsage(u agent.RunUsage) Usage {
	return Usage{SessionUsage: agent.SessionUsage{
		Input: u.Input, CachedInput: u.CachedInput, Output: u.Output, Reasoning: u.Reasoning,
		CostMicros: u.CostPicodollars / 1_000_000, Requests: u.Requests,
	}, Complete: u.Complete}
}

// Usage is the session's known usage totals and, with Refusal, the error
// a hard ceiling gives its next prompt.
func (s *Session) Usage() Usage {
	u := UsageOf(s.sess.Totals())
	if err := s.built.Agent.CeilingRefusal(); err != nil {
		u.Refusal = err.Error()
	}
	return u
}

// maxRecoveredShown bounds the recovered outputs RecoveredOutput returns.
const maxRecoveredShown = 8

// Recovered is one recovered output: partial text or reasoning of an
// attempt that was replaced.
type Recovered struct {
	RunID   string `json:"runId"`
	Channel string `json:"channel"`
	Text    string `json:"text"`
	Attempt int    `json:"attempt"`
}

// RecoveredOutput returns the session's last recovered outputs, oldest
// first.
func (s *Session) RecoveredOutput() []Recovered {
	all := s.sess.RecoveredOutputs()
	all = all[max(0, len(all)-maxRecoveredShown):]
	out := make([]Recovered, 0, len(all))
	for _, o := range all {
		out = append(out, Recovered{RunID: o.RunID, Channel: o.Channel, Text: o.Text, Attempt: o.Attempt})
	}
	return out
}

// Diff returns what octet's tools changed in run runID of the session
// ("" = the last run on the active branch); see [Diff].
func (s *Session) Diff(runID string) ([]changes.Change, string, error) {
	return Diff(s.sess, s.built.Changes, runID)
}

// closeAgent releases the agent's tools, leaving the session file open.
func (s *Session) closeAgent() error {
	if s.built.Close != nil {
		return s.built.Close()
	}
	return nil
}

// Close releases the agent and the session file; the caller has settled
// the session's run. Closing twice returns the first close's error.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		if s.stopWarm != nil {
			s.stopWarm()
		}
		s.closeErr = errors.Join(s.closeAgent(), s.sess.Close())
	})
	return s.closeErr
}

// settleSelection makes the session's model and reasoning selection
// durable when it starts: the one asked for at creation (model,
// reasoning) is recorded, and a resumed session (neither asked for)
// gets back the selection it recorded last (RestoreSelection).
func (s *Session) settleSelection(model, reasoning string, log *slog.Logger) error {
	a := s.built.Agent
	if model != "" || reasoning != "" {
		if reasoning == "" {
			reasoning = a.Reasoning()
		}
		return a.SetSelection(a.Model(), reasoning)
	}
	return RestoreSelection(a, s.sess, func(name string) (provider.Model, error) {
		if name == s.startModel.Name {
			return s.startModel, nil
		}
		return s.resolve(name)
	}, log)
}

// RestoreSelection gives the agent of a reopened session the model and
// reasoning selection the session recorded last (session.Session.Selection),
// over the configuration; resolve maps the recorded model name to a
// model. A recorded model that can no longer be resolved, or an effort
// octet no longer knows, keeps the agent's, with a warning. A session
// that never recorded a selection changes nothing.
func RestoreSelection(a *agent.Agent, sess *session.Session, resolve func(name string) (provider.Model, error), log *slog.Logger) error {
	sel, ok := sess.Selection()
	if !ok {
		return nil
	}
	m := a.Model()
	if sel.Model != m.Name {
		r, err := resolve(sel.Model)
		if err != nil {
			log.Warn("the session's selected model is not available; using the configured one",
				"session", sess.Header().ID, "model", sel.Model, "configured", m.Name, "err", err)
		} else {
			m = r
		}
	}
	effort := sel.Effort
	if CheckReasoning(effort) != nil {
		log.Warn("the session's recorded reasoning effort is unknown; using the configured one", "session", sess.Header().ID, "effort", effort)
		effort = a.Reasoning()
	}
	return a.SetSelection(m, effort)
}
