package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/host"
)

// Session lifecycle (protocol v1.1): octet/session/rename, fork, delete
// and transcript, the automatic title, and session_state on resume.

// sessionRename handles octet/session/rename.
func (s *Server) sessionRename(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		Title     string `json:"title"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	title, err := host.CheckTitle(p.Title)
	if err != nil {
		return nil, err
	}
	ss, cs, isChild, err := s.sessionOrChild(ctx, p.SessionID)
	switch {
	case err != nil:
		return nil, err
	case isChild:
		return s.renameChild(cs, title)
	}
	if err := ss.handle.Rename(title); err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("rename session %s: %v", ss.id, err))
	}
	return json.RawMessage(`{}`), nil
}

// titleFromPrompt gives a session without a title the automatic title of
// text. A failure is logged: the prompt does not depend on it.
func (s *Server) titleFromPrompt(ss *sessionState, text string) {
	if err := ss.handle.TitleFromPrompt(text); err != nil {
		s.log.Warn("could not set the session's automatic title", "session", ss.id, "error", err)
	}
}

// sessionFork handles octet/session/fork: a new session whose tree is the
// source's active branch from its root up to entryId (inclusive). The
// source is only read. What the fork does not take is in
// docs/protocol.md (octet/session/fork).
func (s *Server) sessionFork(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		EntryID   string `json:"entryId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.SessionID == "" {
		return nil, invalidParams("sessionId is required")
	}
	if p.EntryID == "" {
		return nil, invalidParams("entryId is required")
	}
	src, cs, isChild, err := s.sessionOrChild(ctx, p.SessionID)
	switch {
	case err != nil:
		return nil, err
	case isChild:
		return s.forkChild(ctx, cs, p.EntryID)
	}
	holder := &approverHolder{}
	h, err := s.host.Fork(ctx, src.handle, p.EntryID, s.binding(holder))
	if _, ok := errors.AsType[*host.InputError](err); ok {
		return nil, err
	}
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("fork session %s at %s: %v", src.id, p.EntryID, err))
	}
	ss := s.newSessionState(h, nil)
	holder.set(s.approverFor(ss))
	if _, err := s.register(ss); err != nil {
		_ = h.Close()
		return nil, err
	}
	s.log.Info("session forked", "session", ss.id, "from", src.id, "entry", p.EntryID)
	return rawResult(map[string]string{"sessionId": ss.id})
}

// sessionDelete handles octet/session/delete: refused while the session
// has a run (or an approval waiting); otherwise the session is closed and
// its file and listing cache are removed. The handler keeps the reader
// (it never waits for a run), so no later request of this client can
// reopen the session between the close and the removal.
func (s *Server) sessionDelete(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	id, err := sessionIDParam(raw)
	if err != nil {
		return nil, err
	}
	if cs, ok, err := s.asChild(id); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return s.deleteChild(cs)
	}
	// A parent goes with its children's sessions and provenance; none of
	// them may still be running.
	kids, err := s.host.DeletableParent(id)
	if err != nil {
		return nil, childError(err)
	}
	s.mu.Lock()
	ss := s.sessions[id]
	s.mu.Unlock()
	if ss != nil {
		free := func(ss *sessionState) bool { return ss.active == nil && len(ss.pending) == 0 }
		if !s.closeIf(ss, "octet/session/delete", free) {
			select {
			case <-ss.closed: // closed meanwhile by someone else
			default:
				ss.mu.Lock()
				runID := "(approval pending)"
				if ss.active != nil {
					runID = ss.active.id
				}
				ss.mu.Unlock()
				return nil, deleteBusyError(ss.id, runID)
			}
		}
	}
	if err := s.host.Delete(id); err != nil {
		if errors.Is(err, host.ErrNoSession) {
			return nil, jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("unknown session %q: nothing to delete", id))
		}
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("delete session %s: %v", id, err))
	}
	s.forgetChildren(kids...)
	if err := s.host.DeleteTeams(kids); err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("session %s was deleted, but not all of its child sessions: %v; remove them by hand", id, err))
	}
	s.mu.Lock()
	if s.defaultID == id {
		s.defaultID = "" // octet.prompt creates a new default session
	}
	s.mu.Unlock()
	s.log.Info("session deleted", "session", id)
	return json.RawMessage(`{}`), nil
}

// deleteBusyError is SessionBusy for octet/session/delete.
func deleteBusyError(sessionID, runID string) error {
	data, _ := json.Marshal(map[string]string{"sessionId": sessionID, "activeRunId": runID})
	return &jsonrpc2.Error{
		Code:    CodeSessionBusy,
		Message: fmt.Sprintf("session %s has an active run %s: cancel it with octet/cancel (and wait for its answer) before deleting the session", sessionID, runID),
		Data:    data,
	}
}

// sessionTranscript handles octet/session/transcript.
func (s *Server) sessionTranscript(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID     string `json:"sessionId"`
		BeforeEntryID string `json:"beforeEntryId"`
		Limit         int    `json:"limit"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.SessionID == "" {
		return nil, invalidParams("sessionId is required")
	}
	if p.Limit < 0 {
		return nil, invalidParams("limit must not be negative")
	}
	if cs, isChild, err := s.asChild(p.SessionID); err != nil || isChild {
		if err != nil {
			return nil, err
		}
		return s.childTranscript(cs, p.BeforeEntryID, p.Limit)
	}
	var page host.TranscriptPage
	var err error
	if ss := s.openHere(p.SessionID); ss != nil {
		page, err = ss.handle.Transcript(p.BeforeEntryID, p.Limit)
	} else {
		// Not open here: read it from disk without opening it (no agent,
		// no repair, nothing recorded, another process's run untouched).
		page, err = s.host.ReadTranscript(p.SessionID, p.BeforeEntryID, p.Limit)
		if errors.Is(err, host.ErrNoSession) {
			return nil, jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("unknown session %q: create it with octet/session/new", p.SessionID))
		}
	}
	if err != nil {
		return nil, err
	}
	return rawResult(page)
}

// resumeTranscript fills resume's transcript from transcript (a
// session's pages): the newest page, oldest first as v1 put it, with
// transcriptNextBefore naming where octet/session/transcript continues
// when older entries remain.
func resumeTranscript(transcript func(before string, limit int) (host.TranscriptPage, error), res map[string]any) error {
	page, err := transcript("", host.DefaultTranscriptLimit)
	if err != nil {
		return err
	}
	res["transcript"] = page.OldestFirst()
	if page.NextBefore != "" {
		res["transcriptNextBefore"] = page.NextBefore
	}
	if len(page.Runs) > 0 {
		res["runs"] = page.Runs
	}
	return nil
}

// Session states of session_state.
const (
	stateIdle               = "idle"
	stateRunning            = "running"
	stateWaitingForApproval = "waiting_for_approval"
)

// emitSessionStateLocked sends a resumed session its session_state event
// (the caller holds ss.mu, under which every emission of the session is
// serialized): resume calls it after reading the replay and lastSeq, in
// the same critical section, so the event is the first after the
// resume's cursor and reflects the state that cursor saw. It takes the
// next seq but is not buffered for replay: it is a snapshot, and every
// resume sends a fresh one.
func (s *Server) emitSessionStateLocked(ss *sessionState) {
	s.mu.Lock()
	send := s.caps.sendEvents
	s.mu.Unlock()
	ev := map[string]any{"kind": "session_state", "state": stateIdle}
	runID := ""
	if ss.active != nil {
		runID = ss.active.id
		ev["state"] = stateRunning
		ev["activeRunId"] = runID
	}
	if len(ss.pending) > 0 {
		ev["state"] = stateWaitingForApproval
	}
	body, _ := json.Marshal(ev)
	params := eventEnvelope(ss.id, runID, ss.epoch, ss.events.Next(), body)
	if send {
		s.notify("octet/event", params)
	}
}
