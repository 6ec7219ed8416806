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
	if err := ss.Session().Rename(title); err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("rename session %s: %v", ss.ID(), err))
	}
	return json.RawMessage(`{}`), nil
}

// titleFromPrompt gives a session without a title the automatic title of
// text. A failure is logged: the prompt does not depend on it.
func (s *Server) titleFromPrompt(ss *host.OpenSession, text string) {
	if err := ss.Session().TitleFromPrompt(text); err != nil {
		s.log.Warn("could not set the session's automatic title", "session", ss.ID(), "error", err)
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
	ss, err := s.hold(func(b host.Binding) (*host.Session, error) {
		h, err := s.host.Fork(ctx, src.Session(), p.EntryID, b)
		if _, ok := errors.AsType[*host.InputError](err); ok {
			return nil, err
		}
		if err != nil {
			return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("fork session %s at %s: %v", src.ID(), p.EntryID, err))
		}
		return h, nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("session forked", "session", ss.ID(), "from", src.ID(), "entry", p.EntryID)
	return rawResult(map[string]string{"sessionId": ss.ID()})
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
	if ss, ok := s.sessions.Get(id); ok && !s.sessions.CloseIdle(ss, "octet/session/delete") {
		switch busy := ss.Busy().(type) {
		case *runState:
			return nil, deleteBusyError(ss.ID(), busy.id)
		case *host.Hold:
			return nil, rewindingError(ss.ID())
		}
		return nil, deleteBusyError(ss.ID(), "(approval pending)")
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
		page, err = ss.Session().Transcript(p.BeforeEntryID, p.Limit)
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

// sendSessionState sends a resumed session its session_state event,
// with the seq host.OpenSession.Reattach took for it in the same
// critical section as the replay and lastSeq: the event is the first
// after the resume's cursor and reflects the state that cursor saw. It
// is not buffered for replay: it is a snapshot, and every resume sends a
// fresh one.
func (s *Server) sendSessionState(ss *host.OpenSession, r host.Reattachment, seq int64) {
	s.mu.Lock()
	send := s.caps.sendEvents
	s.mu.Unlock()
	ev := map[string]any{"kind": "session_state", "state": stateIdle}
	runID := ""
	if run := runOf(r.Busy); run != nil {
		runID = run.id
		ev["state"] = stateRunning
		ev["activeRunId"] = runID
	}
	if len(r.Pending) > 0 {
		ev["state"] = stateWaitingForApproval
	}
	body, _ := json.Marshal(ev)
	params := eventEnvelope(ss.ID(), runID, ss.Epoch(), seq, body)
	if send {
		s.notify("octet/event", params)
	}
}
