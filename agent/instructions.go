package agent

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
