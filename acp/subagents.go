package acp

import (
	"context"
	"fmt"
	"sync"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/internal/eventgate"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// subagents exposes the delegated children of one session as ACP child
// sessions (the subagents proposal, for a client that advertised
// clientCapabilities.subagents): each child is announced on the parent
// session with subagent_update before anything names it, its runs stream
// as ordinary session/update on its own sessionId, its permission
// requests are asked on its own session, its state (running, idle with a
// stop reason) follows on the parent's subagent_update, and session/cancel
// of its sessionId interrupts it alone.
type subagents struct {
	as *acpSession

	mu   sync.Mutex
	kids map[string]*subagent // by child session id
}

// subagent is one exposed child.
type subagent struct {
	announced bool
	// state is the last state sent ("running", "idle:end_turn", …).
	state string
	// stream and gate are the child's run in progress (nil: none).
	stream *runStream
	gate   *eventgate.Gate
}

func (s *subagents) kid(child team.Snapshot) *subagent {
	k := s.kids[child.SessionID]
	if k == nil {
		k = &subagent{}
		s.kids[child.SessionID] = k
	}
	return k
}

// stateOf is a child's StateUpdate.
func stateOf(child team.Snapshot) map[string]any {
	switch child.Status {
	case team.StatusPending, team.StatusRunning:
		return map[string]any{"state": "running"}
	case team.StatusCompleted, team.StatusIdle:
		return map[string]any{"state": "idle", "stopReason": stopEndTurn}
	case team.StatusCancelled:
		return map[string]any{"state": "idle", "stopReason": stopCancelled}
	}
	// Failed: idle, the stop reason not reported, the error in _meta.
	return map[string]any{"state": "idle", "_meta": map[string]any{"octet": map[string]any{"error": childError(child)}}}
}

// updated announces the child or sends its new state; with s.mu held.
func (s *subagents) updatedLocked(child team.Snapshot, k *subagent) {
	first := !k.announced
	state := stateOf(child)
	key := fmt.Sprint(state) // fmt sorts map keys
	if !first && k.state == key {
		return // pending and running are both "running"
	}
	k.announced, k.state = true, key
	u := map[string]any{"sessionUpdate": "subagent_update", "sessionId": child.SessionID, "state": state, "_meta": childMeta(child)}
	if first {
		u["title"] = child.Path
		u["description"] = titleText(child.Task)
		u["cwd"] = s.as.cwd()
	}
	if child.Status.Active() {
		u["capabilities"] = map[string]any{"cancel": map[string]any{}}
		s.as.srv.setKid(child.SessionID, child.Interrupt)
	} else {
		u["capabilities"] = nil
		s.as.srv.setKid(child.SessionID, nil)
	}
	s.as.srv.update(s.as.ID(), u)
	if first {
		// The task, as the child's first message.
		s.as.srv.update(child.SessionID, map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": clip(child.Task, maxToolOutput)}})
	}
}

func (s *subagents) updated(child team.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updatedLocked(child, s.kid(child))
}

// event streams one event of the child's run on the child's session.
func (s *subagents) event(child team.Snapshot, ev agent.Event) {
	s.mu.Lock()
	k := s.kid(child)
	if !k.announced {
		s.updatedLocked(child, k)
	}
	if rs, ok := ev.(*agent.RunStarted); ok {
		k.gate = new(eventgate.Gate)
		k.stream = newRunStream(s.as.srv, child.SessionID, s.as.cwd(), sessionFile(child.SessionPath), rs.RunID)
		k.stream.gate, k.stream.denial = k.gate, s.as.takeDenial
	}
	st, gate := k.stream, k.gate
	if _, fin := ev.(*agent.RunFinished); fin {
		k.stream, k.gate = nil, nil
	}
	s.mu.Unlock()
	if st == nil {
		return
	}
	st.event(ev)
	if _, fin := ev.(*agent.RunFinished); fin {
		gate.End()
	}
}

// approver asks for the child's confirmations on the child's session,
// after the call's tool_call there.
func (s *subagents) approver(child team.Snapshot) tools.Approver {
	return approverFunc(func(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
		s.mu.Lock()
		gate := s.kid(child).gate
		s.mu.Unlock()
		return s.as.confirm(ctx, req, permissionTarget{sessionID: child.SessionID, gate: gate, show: func(call map[string]any) { nameChild(call, child) }})
	})
}

type approverFunc func(context.Context, tools.ConfirmRequest) (tools.Approval, error)

func (f approverFunc) Confirm(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
	return f(ctx, req)
}

// sessionFile reads a child's session file, which its own agent writes:
// each read opens it read-only (appends lock it only while they write).
type sessionFile string

func (p sessionFile) Entry(id string) (session.Entry, bool) {
	s, err := session.Inspect(string(p))
	if err != nil {
		return session.Entry{}, false
	}
	defer s.Close()
	return s.Entry(id)
}

func (p sessionFile) Branch() []session.Entry {
	s, err := session.Inspect(string(p))
	if err != nil {
		return nil
	}
	defer s.Close()
	return s.Branch()
}

// setKid records how session/cancel interrupts the exposed child id (nil:
// it has ended).
func (s *Server) setKid(id string, interrupt func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if interrupt == nil {
		delete(s.kids, id)
		return
	}
	s.kids[id] = interrupt
}

// cancelKid interrupts the exposed child id, reporting whether id is one.
func (s *Server) cancelKid(id string) bool {
	s.mu.Lock()
	interrupt := s.kids[id]
	s.mu.Unlock()
	if interrupt == nil {
		return false
	}
	if err := interrupt(); err != nil {
		s.log.Debug("cancel child", "session", id, "error", err)
	}
	return true
}
