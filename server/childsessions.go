package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/session"
)

// Delegated children's sessions in the session methods (protocol v1.1):
// octet/session/list with parentSessionId lists a session's children;
// resume of a child is read-only and replays its buffered events; resume
// of a parent names its children; diff, fork, rename and delete take a
// child's session; a child that may still write (pending, running, idle)
// cannot be renamed or deleted, nor can its parent be deleted.

// Bounds of the children's replay buffers: each keeps at most
// childRingBytes of events, and at most maxChildRings children keep one
// (the oldest is dropped first; its resume is then truncated, and its
// transcript has everything).
const (
	childRingBytes = 2 << 20
	maxChildRings  = 64
)

// childState is what this server saw of one child's session.
type childState struct {
	rootID, agentID, agentPath, path string
	status                           team.Status
	// epoch and runID are those of its last buffered event; ring holds
	// its events (nil once dropped).
	epoch, runID string
	seq          int64
	ring         *eventRing
}

// live reports whether the child's agent may still write its session.
func (c *childState) live() bool {
	return c.status.Active() || c.status == team.StatusIdle
}

// childLocked returns the state of child, creating it (s.mu held).
func (s *Server) childLocked(child team.Snapshot, rootID string) *childState {
	cs := s.childSessions[child.SessionID]
	if cs == nil {
		cs = &childState{rootID: rootID, agentID: child.ID, agentPath: child.Path, path: child.SessionPath, status: child.Status}
		s.childSessions[child.SessionID] = cs
	}
	return cs
}

// bufferChildLocked keeps one child event for resume (s.mu held).
func (s *Server) bufferChildLocked(child team.Snapshot, rootID, epoch, runID string, seq int64, params json.RawMessage) {
	cs := s.childLocked(child, rootID)
	if cs.ring == nil || cs.epoch != epoch {
		if cs.ring == nil {
			s.childRings = append(s.childRings, child.SessionID)
			for len(s.childRings) > maxChildRings {
				if old := s.childSessions[s.childRings[0]]; old != nil {
					old.ring = nil
				}
				s.childRings = s.childRings[1:]
			}
		}
		cs.ring = &eventRing{maxN: s.opts.EventBuffer, maxBytes: min(s.opts.EventBufferBytes, childRingBytes)}
	}
	cs.epoch, cs.runID, cs.seq = epoch, runID, seq
	cs.ring.add(bufferedEvent{Seq: seq, Method: "octet/event", Params: params})
}

// findChild finds the child session id: on disk through the backend's
// teams, else among the children this server saw.
func (s *Server) findChild(id string) (team.ChildSession, bool, error) {
	cs, found, err := s.host.FindChildSession(id)
	if err != nil {
		return cs, true, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("find child session %s: %v", id, err))
	}
	if found {
		return cs, true, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.childSessions[id]
	if !ok {
		return team.ChildSession{}, false, nil
	}
	return team.ChildSession{SessionID: id, Path: c.path, ParentSessionID: c.rootID, AgentID: c.agentID, AgentPath: c.agentPath, Status: c.status}, true, nil
}

// childStatus is the child's status as this server tells it: live from
// its team, else the last one its provenance recorded; a child recorded
// as pending, running or idle that no team of this server drives is
// disconnected (its octet stopped before it ended).
func (s *Server) childStatus(cs team.ChildSession) (status string, live bool) {
	s.mu.Lock()
	c := s.childSessions[cs.SessionID]
	s.mu.Unlock()
	if c != nil {
		return string(c.status), c.live()
	}
	if cs.Status.Active() || cs.Status == team.StatusIdle {
		return "disconnected", false
	}
	return string(cs.Status), false
}

// childrenOf returns the children of session parentID.
func (s *Server) childrenOf(parentID string) ([]team.ChildSession, error) {
	cs, err := s.host.ChildSessions(parentID)
	if err != nil {
		return cs, fmt.Errorf("list the child sessions of %s: %w", parentID, err)
	}
	return cs, nil
}

// listChildren is octet/session/list with parentSessionId: the parent's
// child sessions, each described like a session plus its parent, agent
// and status.
func (s *Server) listChildren(parentID string) ([]host.SessionInfo, error) {
	cs, err := s.childrenOf(parentID)
	if err != nil && len(cs) == 0 {
		return nil, err
	}
	infos := map[string]session.Info{}
	listed := map[string]bool{}
	for _, c := range cs {
		if listed[c.Team] {
			continue
		}
		listed[c.Team] = true
		in, _ := session.List(c.Team) // a file that cannot be described is listed from provenance
		for _, i := range in {
			infos[i.ID] = i
		}
	}
	out := make([]host.SessionInfo, 0, len(cs))
	for _, c := range cs {
		if !childFileExists(c) {
			continue // deleted on its own; its provenance stays
		}
		st, _ := s.childStatus(c)
		row := host.SessionInfo{SessionID: c.SessionID, ParentSessionID: c.ParentSessionID, AgentID: c.AgentID, AgentPath: c.AgentPath, Status: st}
		if in, ok := infos[c.SessionID]; ok {
			row.Describe(in)
		}
		out = append(out, row)
	}
	return out, nil
}

// childView names one child in a parent's resume result.
type childView struct {
	SessionID string `json:"sessionId"`
	AgentID   string `json:"agentId"`
	AgentPath string `json:"agentPath"`
	Status    string `json:"status"`
	Task      string `json:"task,omitempty"`
}

// resumeChildren adds the parent's children to its resume result.
func (s *Server) resumeChildren(parentID string, res map[string]any) {
	cs, err := s.childrenOf(parentID)
	if err != nil {
		s.log.Warn("resume: child sessions", "session", parentID, "err", err)
	}
	views := make([]childView, 0, len(cs))
	for _, c := range cs {
		if !childFileExists(c) {
			continue
		}
		st, _ := s.childStatus(c)
		views = append(views, childView{SessionID: c.SessionID, AgentID: c.AgentID, AgentPath: c.AgentPath, Status: st, Task: clip(c.Task, 200)})
	}
	if len(views) > 0 {
		res["children"] = views
	}
}

// childFileExists reports whether the child's session file is still there.
func childFileExists(c team.ChildSession) bool {
	_, err := os.Lstat(c.Path)
	return err == nil
}

// resumeChild answers octet/session/resume for a child's session: its
// transcript and usage read from its file (read-only: its own agent is
// its only writer), its parent, path and status, and the events this
// server buffered for it after the cursor (the parent's epoch; seq the
// child's own).
func (s *Server) resumeChild(cs team.ChildSession, afterSeq *int64, epoch string) (any, error) {
	sess, err := session.Inspect(cs.Path)
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("read child session %s: %v", cs.SessionID, err))
	}
	defer sess.Close()
	u := host.UsageOf(sess.Totals())
	status, _ := s.childStatus(cs)
	res := map[string]any{
		"sessionId": cs.SessionID, "head": sess.Head(), "usage": u, "usageUncertain": !u.Complete,
		"parentSessionId": cs.ParentSessionID, "agentId": cs.AgentID, "agentPath": cs.AgentPath, "status": status,
		"readOnly": true, "pendingApprovals": []any{},
	}
	transcript := func(before string, limit int) (host.TranscriptPage, error) {
		return host.PageTranscript(cs.SessionID, sess.Branch(), before, limit)
	}
	if err := resumeTranscript(transcript, res); err != nil {
		return nil, err
	}
	s.mu.Lock()
	c := s.childSessions[cs.SessionID]
	var ring *eventRing
	var ringEpoch, runID string
	var last int64
	if c != nil {
		ring, ringEpoch, runID, last = c.ring, c.epoch, c.runID, c.seq
		if c.status.Active() {
			res["activeRunId"] = runID
		}
	}
	if afterSeq != nil {
		evs := []bufferedEvent{}
		truncated := ring == nil && last > 0
		if ring != nil {
			if epoch != "" && epoch != ringEpoch {
				evs, _ = ring.after(0, last)
				truncated = true
			} else {
				evs, truncated = ring.after(max(*afterSeq, 0), last)
			}
			evs = append([]bufferedEvent{}, evs...)
		}
		res["events"], res["replayTruncated"] = evs, truncated
	}
	s.mu.Unlock()
	if ringEpoch != "" {
		res["epoch"] = ringEpoch
	}
	res["lastSeq"] = last
	return rawResult(res)
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
	if st, live := s.childStatus(cs); live {
		return nil, childBusyError(cs, st, "renamed")
	}
	sess, err := session.Open(cs.Path)
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("rename child session %s: %v", cs.SessionID, err))
	}
	err = sess.SetTitle(title)
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("rename child session %s: %v", cs.SessionID, err))
	}
	return json.RawMessage(`{}`), nil
}

// deleteChild removes an ended child's session file (its provenance and
// the parent's mirrored usage stay).
func (s *Server) deleteChild(cs team.ChildSession) (any, error) {
	if st, live := s.childStatus(cs); live {
		return nil, childBusyError(cs, st, "deleted")
	}
	if err := session.Remove(cs.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("delete child session %s: %v", cs.SessionID, err))
	}
	s.mu.Lock()
	delete(s.childSessions, cs.SessionID)
	s.mu.Unlock()
	s.log.Info("child session deleted", "session", cs.SessionID, "parent", cs.ParentSessionID)
	return json.RawMessage(`{}`), nil
}

// parentDeletable refuses the deletion of a session with a live child.
func (s *Server) parentDeletable(parentID string) ([]team.ChildSession, error) {
	cs, err := s.childrenOf(parentID)
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("delete session %s: %v", parentID, err))
	}
	for _, c := range cs {
		if st, live := s.childStatus(c); live {
			return nil, childBusyError(c, st, "deleted with its parent")
		}
	}
	return cs, nil
}

// deleteTeams removes the team directories of the deleted parent's
// children (their sessions and provenance).
func (s *Server) deleteTeams(cs []team.ChildSession) error {
	done := map[string]bool{}
	var errs []error
	for _, c := range cs {
		if done[c.Team] || c.Team == "" {
			continue
		}
		done[c.Team] = true
		if err := os.RemoveAll(c.Team); err != nil {
			errs = append(errs, err)
		}
	}
	s.mu.Lock()
	for _, c := range cs {
		delete(s.childSessions, c.SessionID)
	}
	s.mu.Unlock()
	return errors.Join(errs...)
}

// asChild finds the child session id names, unless id is an open
// session (the common case costs no disk look-up).
func (s *Server) asChild(id string) (team.ChildSession, bool, error) {
	s.mu.Lock()
	_, open := s.sessions[id]
	s.mu.Unlock()
	if open || id == "" {
		return team.ChildSession{}, false, nil
	}
	return s.findChild(id)
}

// forkChild forks a child's session: a new, ordinary session (no parent)
// whose transcript is the child's up to entryID.
func (s *Server) forkChild(ctx context.Context, cs team.ChildSession, entryID string) (any, error) {
	src, err := session.Inspect(cs.Path)
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("read child session %s: %v", cs.SessionID, err))
	}
	hdr := src.Header()
	prefix, err := host.ForkPrefix(cs.SessionID, src.Branch(), entryID)
	_ = src.Close()
	if err != nil {
		return nil, err
	}
	// The fork acts with its parent's authority, as the child did: the
	// parent's live policy when it is open here, else its recorded one.
	policy := s.host.RecordedPolicy(cs.ParentSessionID)
	s.mu.Lock()
	if parent, ok := s.sessions[cs.ParentSessionID]; ok {
		p := parent.handle.Broker().Policy()
		policy = &p
	}
	s.mu.Unlock()
	holder := &approverHolder{}
	h, err := s.host.ForkFrom(ctx, hdr, entryID, prefix, s.binding(holder), policy)
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("fork session %s at %s: %v", cs.SessionID, entryID, err))
	}
	ss := s.newSessionState(h, nil)
	holder.set(s.approverFor(ss))
	if _, err := s.register(ss); err != nil {
		_ = h.Close()
		return nil, err
	}
	s.log.Info("child session forked", "session", ss.id, "from", cs.SessionID, "entry", entryID)
	return rawResult(map[string]string{"sessionId": ss.id})
}

// diffChild answers octet/session/diff for a child's session: its runs'
// changes, read with its parent's change store.
func (s *Server) diffChild(ctx context.Context, cs team.ChildSession, runID string) (any, error) {
	parent, err := s.openOrReuse(ctx, cs.ParentSessionID)
	if err != nil {
		return nil, err
	}
	jsonrpc2.Async(ctx)
	chs, run, err := parent.handle.DiffChild(cs.Path, runID)
	if err != nil {
		return nil, err
	}
	if chs == nil {
		chs = []changes.Change{}
	}
	return rawResult(diffResult{RunID: run, Changes: chs})
}
