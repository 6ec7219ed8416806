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
	o.team = nil
	o.mu.Unlock()
	if t == nil {
		return nil
	}
	return t.Shutdown(ctx, runID, SettleTimeout)
}

// Close shuts down a team left running (the root agent is being dropped
// without its run ending normally), mirroring its children's usage into
// the root session as far as that session still accepts records.
func (o *Owner) Close() {
	if recs := o.RunEnd(context.Background(), "", ""); len(recs) > 0 && o.root != nil {
		_ = o.root.Session().Append(recs...)
	}
}
