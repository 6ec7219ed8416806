package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/tools"
)

// Delegated children's sessions in the session methods (protocol v1.1):
// octet/session/list with parentSessionId lists a session's children;
// resume of a child is read-only and replays its buffered events; resume
// of a parent names its children; diff, fork, rename and delete take a
// child's session; a child that may still write (pending, running, idle)
// cannot be renamed or deleted, nor can its parent be deleted. The host
// owns the children's sessions (host/children.go); the server keeps the
// events it sent of each, for resume.

// Bounds of the children's replay buffers: each keeps at most
// childRingBytes of events, and at most maxChildRings children keep one
// (the oldest is dropped first; its resume is then truncated, and its
// transcript has everything).
const (
	childRingBytes = 2 << 20
	maxChildRings  = 64
)

// childEvents are the events this server sent of one child's session.
type childEvents struct {
	// epoch and runID are those of its last buffered event; ring holds
	// its events (nil once dropped).
	epoch, runID string
	seq          int64
	ring         *host.EventRing
}

// bufferChildLocked keeps one child event for resume (s.mu held).
func (s *Server) bufferChildLocked(child team.Snapshot, epoch, runID string, seq int64, params json.RawMessage) {
	ce := s.childEvents[child.SessionID]
	if ce == nil {
		ce = &childEvents{}
		s.childEvents[child.SessionID] = ce
	}
	if ce.ring == nil || ce.epoch != epoch {
		if ce.ring == nil {
			s.childRings = append(s.childRings, child.SessionID)
			for len(s.childRings) > maxChildRings {
				if old := s.childEvents[s.childRings[0]]; old != nil {
					old.ring = nil
				}
				s.childRings = s.childRings[1:]
			}
		}
		ce.ring = host.NewEventRing(s.opts.EventBuffer, min(s.opts.EventBufferBytes, childRingBytes))
	}
	ce.epoch, ce.runID, ce.seq = epoch, runID, seq
	ce.ring.Add(host.Event{Seq: seq, Method: "octet/event", Params: params})
}

// forgetChildren drops the events kept of the children cs.
func (s *Server) forgetChildren(cs ...team.ChildSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		delete(s.childEvents, c.SessionID)
	}
}

// findChild finds the child session id (host.FindChild).
func (s *Server) findChild(id string) (team.ChildSession, bool, error) {
	cs, ok, err := s.host.FindChild(id)
	if err != nil {
		return cs, true, jsonrpc2.NewError(CodeBackend, err.Error())
	}
	return cs, ok, nil
}

// asChild finds the child session id names, unless id is an open
// session (the common case costs no disk look-up).
func (s *Server) asChild(id string) (team.ChildSession, bool, error) {
	if _, open := s.sessions.Get(id); open || id == "" {
		return team.ChildSession{}, false, nil
	}
	return s.findChild(id)
}

// sessionOrChild returns the session id names, opened from disk when
// this server has not opened it, or (isChild) the delegated child whose
// session it is: the session methods that take a child's session route
// it through here.
func (s *Server) sessionOrChild(ctx context.Context, id string) (ss *host.OpenSession, cs team.ChildSession, isChild bool, err error) {
	if id == "" {
		return nil, cs, false, invalidParams("sessionId is required")
	}
	if cs, isChild, err = s.asChild(id); isChild || err != nil {
		return nil, cs, isChild, err
	}
	ss, err = s.openOrReuse(ctx, id)
	return ss, cs, false, err
}

// listChildren is octet/session/list with parentSessionId.
func (s *Server) listChildren(parentID string) ([]host.SessionInfo, error) {
	return s.host.ListChildren(parentID)
}

// resumeChildren adds the parent's children to its resume result.
func (s *Server) resumeChildren(parentID string, res map[string]any) {
	views, err := s.host.ChildViews(parentID)
	if err != nil {
		s.log.Warn("resume: child sessions", "session", parentID, "err", err)
	}
	if len(views) > 0 {
		res["children"] = views
	}
}

// resumeChild answers octet/session/resume for a child's session: its
// transcript and usage read from its file (read-only: its own agent is
// its only writer), its parent, path and status, and the events this
// server buffered for it after the cursor (the parent's epoch; seq the
// child's own).
func (s *Server) resumeChild(cs team.ChildSession, afterSeq *int64, epoch string) (any, error) {
	read, err := s.host.ReadChild(cs, "", host.DefaultTranscriptLimit)
	if err != nil {
		return nil, childReadError(err)
	}
	status, _ := s.host.ChildStatus(cs)
	res := map[string]any{
		"sessionId": cs.SessionID, "head": read.Head, "transcript": read.Transcript.OldestFirst(),
		"usage": read.Usage, "usageUncertain": !read.Usage.Complete,
		"parentSessionId": cs.ParentSessionID, "agentId": cs.AgentID, "agentPath": cs.AgentPath, "status": status,
		"readOnly": true, "pendingApprovals": []any{},
	}
	if next := read.Transcript.NextBefore; next != "" {
		res["transcriptNextBefore"] = next
	}
	s.mu.Lock()
	ce := s.childEvents[cs.SessionID]
	if ce == nil {
		ce = &childEvents{}
	}
	if team.Status(status).Active() {
		res["activeRunId"] = ce.runID
	}
	if afterSeq != nil {
		res["events"], res["replayTruncated"] = host.Replay(ce.ring, ce.epoch, ce.seq, epoch, *afterSeq)
	}
	s.mu.Unlock()
	if ce.epoch != "" {
		res["epoch"] = ce.epoch
	}
	res["lastSeq"] = ce.seq
	return rawResult(res)
}

// childReadError answers a child's session that could not be read: a
// page the caller must change as it is, anything else as the backend's.
func childReadError(err error) error {
	if _, ok := errors.AsType[*host.InputError](err); ok {
		return err
	}
	return jsonrpc2.NewError(CodeBackend, err.Error())
}

// childError answers the host's refusal to change a child's session (a
// live child: SessionBusy) or its failure.
func childError(err error) error {
	if busy, ok := errors.AsType[*host.ChildBusyError](err); ok {
		return childBusyError(busy.Child, busy.Status, busy.What)
	}
	if _, ok := errors.AsType[*host.InputError](err); ok {
		return err
	}
	return jsonrpc2.NewError(CodeBackend, err.Error())
}

// childBusyError refuses to change the session of a child whose agent may
// still write it.
func childBusyError(cs team.ChildSession, status, what string) error {
	data, _ := json.Marshal(map[string]string{"sessionId": cs.SessionID, "agentPath": cs.AgentPath, "status": status})
	return &jsonrpc2.Error{
		Code:    CodeSessionBusy,
		Message: fmt.Sprintf("session %s is the delegated child %s of session %s and is %s: its own agent still writes it, so it cannot be %s; interrupt it (octet/cancel on its run) or wait for the parent's run to end", cs.SessionID, cs.AgentPath, cs.ParentSessionID, status, what),
		Data:    data,
	}
}

// childReadOnlyError refuses a method that would drive a child's session
// (prompt, policy, approvals): only its own agent does.
func childReadOnlyError(cs team.ChildSession) error {
	return jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("session %s is the delegated child %s of session %s: it is driven only by its own agent; resume, transcript, list (parentSessionId), diff, fork, rename and delete take it, and its parent's agents_followup gives it more work", cs.SessionID, cs.AgentPath, cs.ParentSessionID))
}

// renameChild sets an ended child's title.
func (s *Server) renameChild(cs team.ChildSession, title string) (any, error) {
	if err := s.host.RenameChild(cs, title); err != nil {
		return nil, childError(err)
	}
	return json.RawMessage(`{}`), nil
}

// deleteChild removes an ended child's session file (its provenance and
// the parent's mirrored usage stay).
func (s *Server) deleteChild(cs team.ChildSession) (any, error) {
	if err := s.host.DeleteChild(cs); err != nil {
		return nil, childError(err)
	}
	s.forgetChildren(cs)
	s.log.Info("child session deleted", "session", cs.SessionID, "parent", cs.ParentSessionID)
	return json.RawMessage(`{}`), nil
}

// forkChild forks a child's session: a new, ordinary session (no parent)
// whose transcript is the child's up to entryID, with its parent's live
// policy when the parent is open here.
func (s *Server) forkChild(ctx context.Context, cs team.ChildSession, entryID string) (any, error) {
	var policy *tools.Policy
	if parent, ok := s.sessions.Get(cs.ParentSessionID); ok {
		p := parent.Session().Broker().Policy()
		policy = &p
	}
	ss, err := s.hold(func(b host.Binding) (*host.Session, error) {
		h, err := s.host.ForkChild(ctx, cs, entryID, b, policy)
		if err != nil {
			return nil, childError(err)
		}
		return h, nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("child session forked", "session", ss.ID(), "from", cs.SessionID, "entry", entryID)
	return rawResult(map[string]string{"sessionId": ss.ID()})
}

// diffChild answers octet/session/diff for a child's session: its runs'
// changes, read with its parent's change store.
func (s *Server) diffChild(ctx context.Context, cs team.ChildSession, runID string) (any, error) {
	parent, err := s.openOrReuse(ctx, cs.ParentSessionID)
	if err != nil {
		return nil, err
	}
	jsonrpc2.Async(ctx)
	chs, run, err := parent.Session().DiffChild(cs.Path, runID)
	if err != nil {
		return nil, err
	}
	if chs == nil {
		chs = []changes.Change{}
	}
	return rawResult(diffResult{RunID: run, Changes: chs})
}
