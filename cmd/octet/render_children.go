package main

import (
	"context"
	"encoding/json"
	"io"
	"sync"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// childRenderer shows a run's delegated children in octet exec: in text
// mode one indented line per status change and per tool a child starts
// (on stderr, under the parent's output); with --json every child event as
// a line naming its session, run, parentSessionId and agentPath, and an
// agent_updated line on the parent for every status change. Lines are
// written by the terminal's owner loop (term.do), between the parent's
// events.
type childRenderer struct {
	term    *terminal
	notes   io.Writer     // text mode
	jr      *jsonRenderer // JSON mode (nil in text mode)
	parent  string        // the root session id
	endLine func()
	// approver is the parent's; a child's prompts name the child.
	approver tools.Approver

	mu   sync.Mutex
	runs map[string]string // child id → run id
}

// install sets the team observers.
func (c *childRenderer) install(_ *session.Session, cfg *team.Config) {
	c.runs = map[string]string{}
	cfg.OnUpdate = c.updated
	cfg.OnEvent = c.event
	if c.approver != nil {
		cfg.Approver = func(s team.Snapshot) tools.Approver { return childApprover{path: s.Path, inner: c.approver} }
	}
}

// childApprover asks the parent's approver, the prompt's title naming the
// child.
type childApprover struct {
	path  string
	inner tools.Approver
}

func (a childApprover) Confirm(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
	req.Title = a.path + ": " + req.Title
	return a.inner.Confirm(ctx, req)
}

func (c *childRenderer) do(fn func()) { _ = c.term.do(context.Background(), fn) }

func (c *childRenderer) updated(s team.Snapshot) {
	c.do(func() {
		if c.jr != nil {
			body, _ := json.Marshal(map[string]any{"kind": "agent_updated", "agentId": s.ID, "agentPath": s.Path, "sessionId": s.SessionID, "status": s.Status})
			c.jr.line(map[string]any{"sessionId": c.parent, "event": json.RawMessage(body)})
			return
		}
		c.endLine()
		line := "  ↳ " + s.Path + " " + string(s.Status)
		switch {
		case s.Status == team.StatusPending:
			line += ": " + visible(oneLine(s.Task, 100))
		case s.Error != "":
			line += ": " + visible(oneLine(s.Error, 200))
		}
		io.WriteString(c.notes, line+"\n")
	})
}

func (c *childRenderer) event(s team.Snapshot, ev agent.Event) {
	c.mu.Lock()
	if rs, ok := ev.(*agent.RunStarted); ok {
		c.runs[s.ID] = rs.RunID
	}
	runID := c.runs[s.ID]
	c.mu.Unlock()
	if c.jr != nil {
		c.do(func() {
			body, err := agent.MarshalEvent(ev)
			if err != nil {
				return
			}
			c.jr.line(map[string]any{"sessionId": s.SessionID, "runId": runID, "seq": ev.Seq(), "parentSessionId": c.parent, "agentPath": s.Path, "event": json.RawMessage(body)})
		})
		return
	}
	if ts, ok := ev.(*agent.ToolStarted); ok {
		c.do(func() {
			c.endLine()
			io.WriteString(c.notes, "  ↳ "+s.Path+" ▸ "+visible(ts.Tool)+"\n")
		})
	}
}
