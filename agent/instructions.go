package agent

import (
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// SetInstructions replaces the system prompt for later provider requests.
// Hosts call it when context files (AGENTS.md) change, so a session that
// is already open follows the current text. It is safe to call from any
// goroutine at any time: a request that is already prepared or in flight
// keeps the instructions it was built with, and the change applies at the
// next request preparation boundary (the next main attempt, a replacement
// attempt included, or the next run).
func (a *Agent) SetInstructions(s string) {
	a.instructions.Store(&s)
}

// Instructions returns the system prompt the next request will carry.
func (a *Agent) Instructions() string {
	if p := a.instructions.Load(); p != nil {
		return *p
	}
	return a.cfg.Instructions
}

// syncEnvironment appends the current environment context (see
// Config.Environment) as a context entry of run runID when it differs
// from the last one the model sees on the active branch.
func (a *Agent) syncEnvironment(runID string) error {
	if a.cfg.Environment == nil {
		return nil
	}
	text := a.cfg.Environment(a.cfg.Broker.Policy())
	if text == "" || text == lastContext(a.sess.Branch()) {
		return nil
	}
	_, err := a.sess.AppendEntry(session.Entry{Type: session.EntryContext, RunID: runID, Text: text})
	return err
}

// lastContext is the text of the last context entry the provider context
// of branch holds ("" when none: never sent, or compacted away).
func lastContext(branch []session.Entry) string {
	v := contextView(branch)
	for i := len(v.entries) - 1; i >= 0; i-- {
		if v.entries[i].Type == session.EntryContext {
			return v.entries[i].Text
		}
	}
	return ""
}

// offered reports whether model m is offered tool name (Config.Offer).
func (a *Agent) offered(m provider.Model, name string) bool {
	return a.cfg.Offer == nil || a.cfg.Offer(m, name)
}
