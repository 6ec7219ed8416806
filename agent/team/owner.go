package team

import (
	"context"
	"errors"
	"sync"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/session"
)

// Owner binds delegation to one root agent: it starts the team of the
// root's current run at its first spawn and shuts it down when that run
// ends. Install RunEnd as the root's agent.Config.RunEnd, register Tools
// in the root's host, then Bind the built agent.
type Owner struct {
	cfg  Config
	mu   sync.Mutex
	root *agent.Agent
	team *Team
	// ending is the team being shut down by RunEnd: its children still
	// count in the ledger until their mirror records are built.
	ending *Team
}

// NewOwner returns an owner whose teams use cfg (Root and RunID are
// filled in per run).
func NewOwner(cfg Config) *Owner { return &Owner{cfg: cfg} }

// Bind sets the root agent (once it is built).
func (o *Owner) Bind(a *agent.Agent) {
	o.mu.Lock()
	o.root = a
	o.mu.Unlock()
}

// errNoRun refuses delegation outside a run of the root.
var errNoRun = errors.New("delegation: the root agent has no active run")

// Team returns the current run's team, starting it at the first call.
func (o *Owner) Team() (*Team, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.team != nil {
		return o.team, nil
	}
	if o.root == nil {
		return nil, errNoRun
	}
	r := o.root.Active()
	if r == nil {
		return nil, errNoRun
	}
	cfg := o.cfg
	cfg.Root, cfg.RunID = o.root, r.ID()
	t, err := Start(cfg)
	if err != nil {
		return nil, err
	}
	o.team = t
	return t, nil
}

// earlierMail reports whether earlier teams of the root's session left
// direct messages to the root that no committed wait result consumed
// (a crash between a wait's lease and its result's append): a team
// started now redelivers them.
func (o *Owner) earlierMail() bool {
	o.mu.Lock()
	root := o.root
	o.mu.Unlock()
	if root == nil || o.cfg.Dir == "" {
		return false
	}
	m, _ := unconsumed(o.cfg.Dir, root.Session(), "")
	return len(m) > 0
}

// Current returns the current run's team, or nil when none started.
func (o *Owner) Current() *Team {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.team
}

// RunEnd is the root's agent.RunEndHook: every end of the owning run
// shuts its team down and mirrors each child's usage into the root
// session with the checkpoint.
func (o *Owner) RunEnd(ctx context.Context, runID string, _ agent.Outcome) []session.Record {
	o.mu.Lock()
	t := o.team
	o.team, o.ending = nil, t
	o.mu.Unlock()
	if t == nil {
		return nil
	}
	recs := t.Shutdown(ctx, runID, SettleTimeout)
	o.mu.Lock()
	o.ending = nil
	o.mu.Unlock()
	return recs
}

// Ledger is the root's agent.Config.Ledger (children inherit it): the
// root session's durable totals (its own requests and the mirrored
// children of earlier runs) plus the settled usage of every child of the
// current run, as each child's session records it, response by response.
// A child's uncertainty makes the ledger uncertain. A child is counted
// here until its team has built its mirror record, which the root then
// appends (from then on the root session counts it): never twice.
func (o *Owner) Ledger() (session.Totals, bool) {
	o.mu.Lock()
	root, t := o.root, o.team
	if t == nil {
		t = o.ending
	}
	o.mu.Unlock()
	if root == nil {
		return session.Totals{}, false
	}
	tot := root.Session().Totals()
	if t != nil {
		t.addLive(&tot)
	}
	return tot, true
}

// Close shuts down a team left running (the root agent is being dropped
// without its run ending normally), mirroring its children's usage into
// the root session as far as that session still accepts records.
func (o *Owner) Close() {
	if recs := o.RunEnd(context.Background(), "", ""); len(recs) > 0 && o.root != nil {
		_ = o.root.Session().Append(recs...)
	}
}
