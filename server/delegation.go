package server

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/tools"
)

// children connects the delegated child agents of one root session to
// the editor: each child's run events go out as octet/event with the
// child's own sessionId and runId plus parentSessionId and agentPath (a
// seq of their own, not kept for resume); every status change reaches the
// root session's stream as agent_updated; a child's approvals go through
// the root session's approver naming the child (agentPath,
// childSessionId); octet/cancel on a child's run interrupts that child
// only.
type children struct {
	s    *Server
	root string // the root session id

	mu   sync.Mutex
	seq  map[string]int64  // by child session id
	runs map[string]string // child agent id → its current run id
}

// delegate is the hook a runtime installs in the team configuration of
// the root session rootID (host.Binding.Delegation).
func (s *Server) delegate(rootID string, cfg *team.Config) {
	c := &children{s: s, root: rootID, seq: map[string]int64{}, runs: map[string]string{}}
	cfg.OnEvent = c.event
	cfg.OnUpdate = c.updated
	cfg.Approver = c.approver
}

// rootSession returns the open root session, or nil.
func (c *children) rootSession() *host.OpenSession {
	ss, _ := c.s.sessions.Get(c.root)
	return ss
}

// event forwards one child run event.
func (c *children) event(child team.Snapshot, ev agent.Event) {
	body, err := agent.MarshalEvent(ev)
	if err != nil {
		body = mustJSON(map[string]string{"kind": ev.Kind(), "error": err.Error()})
	}
	c.mu.Lock()
	if rs, ok := ev.(*agent.RunStarted); ok {
		c.runs[child.ID] = rs.RunID
		c.s.mu.Lock()
		c.s.childRuns[rs.RunID] = child
		c.s.mu.Unlock()
	}
	runID := c.runs[child.ID]
	c.seq[child.SessionID]++
	seq := c.seq[child.SessionID]
	c.mu.Unlock()
	if _, fin := ev.(*agent.RunFinished); fin {
		defer func() {
			c.s.mu.Lock()
			delete(c.s.childRuns, runID)
			c.s.mu.Unlock()
			c.s.ended.add(runID)
		}()
	}
	ss := c.rootSession()
	if ss == nil {
		return
	}
	params := childEnvelope(child, runID, ss, seq, body)
	c.s.mu.Lock()
	send := c.s.caps.sendEvents
	c.s.bufferChildLocked(child, ss.Epoch(), runID, seq, params)
	c.s.mu.Unlock()
	if send {
		c.s.notify("octet/event", params)
	}
}

// childEnvelope is an octet/event of a child: the root's envelope fields
// for the child's session and run, plus parentSessionId and agentPath.
func childEnvelope(child team.Snapshot, runID string, root *host.OpenSession, seq int64, body json.RawMessage) json.RawMessage {
	b := make([]byte, 0, len(body)+200)
	b = append(b, `{"sessionId":`...)
	b = appendJSONString(b, child.SessionID)
	b = append(b, `,"runId":`...)
	b = appendJSONString(b, runID)
	b = append(b, `,"epoch":`...)
	b = appendJSONString(b, root.Epoch())
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"parentSessionId":`...)
	b = appendJSONString(b, root.ID())
	b = append(b, `,"agentPath":`...)
	b = appendJSONString(b, child.Path)
	b = append(b, `,"event":`...)
	b = append(b, body...)
	return append(b, '}')
}

// agentUpdated is the agent_updated event body.
type agentUpdated struct {
	Kind      string      `json:"kind"`
	AgentID   string      `json:"agentId"`
	AgentPath string      `json:"agentPath"`
	SessionID string      `json:"sessionId"`
	Status    string      `json:"status"`
	Task      string      `json:"task,omitempty"`
	Error     string      `json:"error,omitempty"`
	Usage     *agentUsage `json:"usage,omitempty"`
}

// agentUsage is a settled child's known usage.
type agentUsage struct {
	Input           int64 `json:"input"`
	CachedInput     int64 `json:"cachedInput"`
	Output          int64 `json:"output"`
	Reasoning       int64 `json:"reasoning"`
	CostPicodollars int64 `json:"costPicodollars"`
	Complete        bool  `json:"complete"`
}

// updated sends agent_updated on the root session's stream (the host
// has recorded the child's status).
func (c *children) updated(child team.Snapshot) {
	ss := c.rootSession()
	if ss == nil {
		return
	}
	ev := agentUpdated{Kind: "agent_updated", AgentID: child.ID, AgentPath: child.Path, SessionID: child.SessionID, Status: string(child.Status), Task: host.Clip(child.Task, 200), Error: host.Clip(child.Error, 500)}
	if !child.Status.Active() {
		u := child.Usage
		ev.Usage = &agentUsage{Input: u.Input, CachedInput: u.CachedInput, Output: u.Output, Reasoning: u.Reasoning, CostPicodollars: u.CostPicodollars, Complete: !child.Uncertain}
	}
	body := mustJSON(ev)
	runID := ""
	if run := runOf(ss.Busy()); run != nil {
		runID = run.id
	}
	c.s.mu.Lock()
	send := c.s.caps.sendEvents
	c.s.mu.Unlock()
	c.s.emit(ss, "octet/event", send, func(seq int64) json.RawMessage {
		return eventEnvelope(ss.ID(), runID, ss.Epoch(), seq, body)
	})
}

// approver asks the root session's editor for the child's confirmations,
// naming the child.
func (c *children) approver(child team.Snapshot) tools.Approver {
	return approverFunc(func(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
		ss := c.rootSession()
		if ss == nil {
			return tools.Approval{}, errNoRootSession
		}
		return c.s.confirm(ctx, ss, req, child)
	})
}

// errNoRootSession refuses a child's approval once its root session is
// closed.
var errNoRootSession = errors.New("the child's root session is closed")

// childRun returns the child whose run runID is, if it is one.
func (s *Server) childRun(runID string) (team.Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.childRuns[runID]
	return c, ok
}

// childTranscript answers octet/session/transcript for a delegated child's
// session (read-only: the child's own agent is its only writer).
func (s *Server) childTranscript(cs team.ChildSession, before string, limit int) (any, error) {
	read, err := s.host.ReadChild(cs, before, limit)
	if err != nil {
		return nil, childReadError(err)
	}
	return rawResult(read.Transcript)
}
