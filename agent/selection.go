package agent

import (
	"fmt"
	"slices"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// The host's model and reasoning selection. The agent keeps two things
// apart, as typed session.Reasoning records do in the ledger:
//
//   - the effective selection (Agent.model, Agent.reasoning): what the
//     host last chose. Every change is a durable update record, so a
//     resumed session starts from it (host.Open reads Session.Selection).
//   - the pin (Run.pin): the selection a run's requests are sent with.
//     A run pins the effective selection when it starts and again at
//     every safe response boundary (before the first attempt of each
//     turn, after a completed response) and when a compaction settles;
//     replacement attempts of a turn keep the pin of their first
//     attempt. A change made while a run is active therefore applies at
//     the next response boundary, and one made while idle at the next
//     run. Each pin that differs from the ledger's last baseline is a
//     durable baseline record, in the compaction's own batch when a
//     compaction rebased it (a failed compaction writes nothing and
//     leaves the pin).
//
// Only the host writes either kind: a provider output item that claims
// to change the configuration is an item octet cannot replay and fails
// the run closed (sessionItems), and no request field is derived from
// provider output.

// ReasoningEfforts are the effort names SetReasoning accepts.
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// selection is one model and reasoning selection.
type selection struct {
	model     provider.Model
	reasoning *provider.Reasoning
}

// effort is the selection's reasoning effort ("" for the default).
func (s selection) effort() string {
	if s.reasoning == nil {
		return ""
	}
	return s.reasoning.Effort
}

// summary is the selection's reasoning summary setting.
func (s selection) summary() string {
	if s.reasoning == nil {
		return ""
	}
	return s.reasoning.Summary
}

// record is s as a typed reasoning record.
func (s selection) record(op, runID, reason string) session.Reasoning {
	return session.Reasoning{Op: op, RunID: runID, Model: s.model.Name, Effort: s.effort(), Summary: s.summary(), Reason: reason, Time: time.Now().UTC()}
}

// same reports whether rec records s.
func (s selection) same(rec session.Reasoning) bool {
	return rec.Model == s.model.Name && rec.Effort == s.effort() && rec.Summary == s.summary()
}

// SetModel selects the model for subsequent provider requests (an active
// run picks it up at its next response boundary) and records the change
// durably; on a write failure nothing changes. An empty name changes
// nothing.
func (a *Agent) SetModel(m provider.Model) error {
	if m.Name == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.selectLocked(selection{model: m, reasoning: a.reasoning})
}

// SetSelection selects the model and the reasoning effort together (one
// update record at most): how a host restores a resumed session's
// effective selection, or records the one a session was created with.
// An unknown effort is an error; "" is the provider's default.
func (a *Agent) SetSelection(m provider.Model, effort string) error {
	if m.Name == "" {
		return fmt.Errorf("agent: a selection needs a model")
	}
	if effort != "" && !slices.Contains(ReasoningEfforts, effort) {
		return fmt.Errorf("agent: unknown reasoning effort %q", effort)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	next := selection{model: m}
	if effort != "" {
		next.reasoning = &provider.Reasoning{Effort: effort}
		if a.reasoning != nil {
			next.reasoning.Summary = a.reasoning.Summary
		}
	}
	return a.selectLocked(next)
}

// SetReasoning selects the reasoning effort for subsequent requests (an
// active run applies it at its next response boundary), records the
// change durably and returns the effective effort. An empty effort
// clears the selection (provider default) and returns ""; an unknown
// effort changes nothing and returns the current effective effort. On a
// write failure nothing changes.
func (a *Agent) SetReasoning(effort string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := selection{model: a.model, reasoning: a.reasoning}
	if effort != "" && !slices.Contains(ReasoningEfforts, effort) {
		return cur.effort(), nil
	}
	next := cur
	next.reasoning = nil
	if effort != "" {
		next.reasoning = &provider.Reasoning{Effort: effort, Summary: cur.summary()}
	}
	if err := a.selectLocked(next); err != nil {
		return cur.effort(), err
	}
	return effort, nil
}

// selectLocked makes s the effective selection, first appending an update
// record when it differs from the ledger's effective selection. a.mu is
// held, so the records are in the order the changes took effect.
func (a *Agent) selectLocked(s selection) error {
	if last, ok := a.sess.Selection(); !ok || !s.same(last) {
		runID := ""
		if a.active != nil {
			runID = a.active.id
		}
		if err := a.sess.Append(session.ReasoningRecord(s.record(session.ReasoningUpdate, runID, ""))); err != nil {
			return fmt.Errorf("agent: record the model and reasoning selection (%s): %w", writeAdvice(err), err)
		}
	}
	a.model, a.reasoning = s.model, s.reasoning
	return nil
}

// selection returns the effective selection (a copy).
func (a *Agent) selection() selection {
	m, r := a.snapshot()
	return selection{model: m, reasoning: r}
}

// repin pins the effective selection for the run's next requests (a
// safe response boundary) and records it as a baseline when it differs
// from the ledger's last one.
func (r *Run) repin(reason string) error {
	r.pin = r.a.selection()
	if last, ok := r.a.sess.Baseline(); ok && r.pin.same(last) {
		return nil
	}
	if err := r.a.sess.Append(session.ReasoningRecord(r.pin.record(session.ReasoningBaseline, r.id, reason))); err != nil {
		return fmt.Errorf("%w the request baseline: %w", errPersist, err)
	}
	return nil
}

// rebase returns the baseline record a successful compaction writes in
// its own batch, and the selection it pins (nil when the pin stays: the
// effective selection is the ledger's last baseline already).
func (r *Run) rebase() ([]session.Record, *selection) {
	s := r.a.selection()
	if last, ok := r.a.sess.Baseline(); ok && s.same(last) {
		return nil, &s
	}
	return []session.Record{session.ReasoningRecord(s.record(session.ReasoningBaseline, r.id, session.BaselineCompaction))}, &s
}
