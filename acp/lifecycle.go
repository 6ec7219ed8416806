package acp

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/octet-agent/octet/host"
)

// The stable session methods besides session/new and session/prompt:
// load, resume, list, close and delete, each through the host.

// sessionLoad handles session/load: the session is opened (or, when it
// is already open on this connection, as Zed does after dropping an idle
// thread, attached again) and its branch replayed before the answer.
func (s *Server) sessionLoad(ctx context.Context, raw json.RawMessage) (any, error) {
	return s.reopen(ctx, raw, true)
}

// sessionResume handles session/resume: session/load without the replay.
func (s *Server) sessionResume(ctx context.Context, raw json.RawMessage) (any, error) {
	return s.reopen(ctx, raw, false)
}

// reopen opens session p.sessionId on this connection, or takes it as it
// is when it is open here already, and answers its state.
func (s *Server) reopen(ctx context.Context, raw json.RawMessage, replay bool) (any, error) {
	caps, p, err := s.sessionRequest(raw)
	if err != nil {
		return nil, err
	}
	id := p.SessionID
	if !host.ValidSessionID(id) {
		return nil, invalidParams("invalid sessionId %q", truncate(id, 80))
	}
	mcp, err := mcpServersOf(p.MCPServers)
	if err != nil {
		return nil, err
	}
	as, err := s.load(ctx, caps, id, mcp)
	if err != nil {
		return nil, err
	}
	if p.Cwd != "" && filepath.Clean(p.Cwd) != as.cwd() {
		s.log.Warn("the cwd asked for differs from the session's; the session's is used", "session", id, "cwd", p.Cwd, "sessionCwd", as.cwd())
	}
	if replay {
		as.replay()
	}
	// The replay goes before the answer (the client shows it as the
	// session's history); the session's commands after it, once the
	// client has the session.
	return followed{as.state(), as.ready}, nil
}

// load opens session id on this connection with the MCP servers mcp,
// or takes it as it is when it is open here already.
func (s *Server) load(ctx context.Context, caps clientCapabilities, id string, mcp []host.MCPServer) (*acpSession, error) {
	// One opening at a time: two loads of one session must not both
	// open it.
	s.openMu.Lock()
	defer s.openMu.Unlock()
	if as, ok := s.sessions.Reuse(id); ok {
		s.log.Info("session already open on this connection: attached again", "session", id)
		if len(mcp) > 0 {
			s.log.Warn("the session keeps the MCP servers it was opened with", "session", id)
		}
		return as, nil
	}
	as, err := s.attach(caps, mcp, func(b host.Binding) (*host.Session, error) {
		hs, err := s.host.Open(ctx, id, b)
		if _, agentErr := errors.AsType[*host.AgentError](err); err != nil && !agentErr {
			err = fmt.Errorf("open session %s: %w", id, err)
		}
		return hs, err
	})
	if errors.Is(err, host.ErrNoSession) {
		return nil, &rpcError{Code: codeResourceNotFound, Message: fmt.Sprintf("no session %s in %s", id, s.opts.Runtime.SessionsDir)}
	}
	return as, err
}

// listPage is how many sessions one session/list answers (a variable for
// the tests).
var listPage = 50

// listCursor is the position after which a session/list page starts:
// the last session of the page before, in the listing's order (newest
// first, then by id).
type listCursor struct {
	UpdatedAt time.Time `json:"u"`
	ID        string    `json:"id"`
}

func (c listCursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseCursor(s string) (listCursor, error) {
	var c listCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.ID == "" {
		return c, invalidParams("invalid cursor %q: pass a nextCursor session/list answered", truncate(s, 80))
	}
	return c, nil
}

// newestFirst orders sessions by last update, newest first, then by id.
func newestFirst(a, b host.SessionInfo) int {
	if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.SessionID, b.SessionID)
}

// list handles session/list: the sessions on disk (those of cwd when it
// is given), newest first, a page at a time. A cursor names the last
// session of the page before, so sessions made or changed meanwhile do
// not shift the pages.
func (s *Server) list(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Cwd    string `json:"cwd"`
		Cursor string `json:"cursor"`
	}
	if len(raw) > 0 && string(raw) != "null" {
		if err := decode(raw, &p); err != nil {
			return nil, err
		}
	}
	if p.Cwd != "" && !filepath.IsAbs(p.Cwd) {
		return nil, invalidParams("cwd must be an absolute path, got %q", truncate(p.Cwd, 200))
	}
	infos, err := s.host.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	if p.Cwd != "" {
		cwd := filepath.Clean(p.Cwd)
		infos = slices.DeleteFunc(infos, func(i host.SessionInfo) bool { return filepath.Clean(i.Cwd) != cwd })
	}
	slices.SortStableFunc(infos, newestFirst)
	start := 0
	if p.Cursor != "" {
		c, err := parseCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		at := host.SessionInfo{SessionID: c.ID, UpdatedAt: c.UpdatedAt}
		start, _ = slices.BinarySearchFunc(infos, at, newestFirst)
		if start < len(infos) && infos[start].SessionID == c.ID {
			start++
		}
	}
	sessions := []map[string]any{}
	end := max(start, min(start+listPage, len(infos)))
	for _, in := range infos[start:end] {
		sessions = append(sessions, listRow(in))
	}
	res := map[string]any{"sessions": sessions}
	if end < len(infos) {
		last := infos[end-1]
		res["nextCursor"] = listCursor{UpdatedAt: last.UpdatedAt, ID: last.SessionID}.String()
	}
	return res, nil
}

// listRow is one SessionInfo of session/list.
func listRow(in host.SessionInfo) map[string]any {
	row := map[string]any{
		"sessionId": in.SessionID, "cwd": in.Cwd, "updatedAt": in.UpdatedAt.UTC().Format(time.RFC3339Nano),
		"_meta": map[string]any{"octet": map[string]any{"createdAt": in.CreatedAt.UTC().Format(time.RFC3339Nano), "usageUncertain": in.UsageUncertain}},
	}
	if in.Title != "" {
		row["title"] = in.Title
	}
	return row
}

// sessionIDParam decodes the params of a method that names one session.
func sessionIDParam(raw json.RawMessage) (string, error) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if err := decode(raw, &p); err != nil {
		return "", err
	}
	if p.SessionID == "" {
		return "", invalidParams("sessionId is required")
	}
	return p.SessionID, nil
}

// sessionClose handles session/close: the session's prompt is cancelled
// (its pending permission requests answered cancelled) and settled, and
// its agent, tools and file released. It stays on disk, to load again.
func (s *Server) sessionClose(raw json.RawMessage) (any, error) {
	id, err := sessionIDParam(raw)
	if err != nil {
		return nil, err
	}
	as, ok := s.sessions.Get(id)
	if !ok {
		return nil, &rpcError{Code: codeResourceNotFound, Message: fmt.Sprintf("session %q is not open on this connection", truncate(id, 80))}
	}
	s.forget(id)
	as.cancelPrompt()
	if err := s.sessions.Close(as, "session/close"); err != nil {
		return nil, fmt.Errorf("close session %s: %w", id, err)
	}
	return struct{}{}, nil
}

// forget forgets the MCP servers of session id: a client closed or
// deleted it, so it is not opened again by itself.
func (s *Server) forget(id string) {
	s.mu.Lock()
	delete(s.mcp, id)
	delete(s.cancels, id)
	s.mu.Unlock()
}

// sessionDelete handles session/delete: refused while the session has a
// prompt running here or a delegated child still live; otherwise it is
// closed when open here, and its file, listing cache and children's
// sessions are removed.
func (s *Server) sessionDelete(raw json.RawMessage) (any, error) {
	id, err := sessionIDParam(raw)
	if err != nil {
		return nil, err
	}
	if !host.ValidSessionID(id) {
		return nil, invalidParams("invalid sessionId %q", truncate(id, 80))
	}
	kids, err := s.host.DeletableParent(id)
	if err != nil {
		return nil, &rpcError{Code: codeInvalidRequest, Message: err.Error()}
	}
	if as, ok := s.sessions.Get(id); ok && !s.sessions.CloseIdle(as, "session/delete") {
		return nil, &rpcError{Code: codeInvalidRequest, Message: fmt.Sprintf("a prompt is running in session %s (or a permission request of it waits): cancel it (session/cancel) and wait for its answer before deleting the session", id)}
	}
	s.forget(id)
	if err := s.host.Delete(id); err != nil {
		if errors.Is(err, host.ErrNoSession) {
			return nil, &rpcError{Code: codeResourceNotFound, Message: fmt.Sprintf("no session %s: nothing to delete", id)}
		}
		return nil, fmt.Errorf("delete session %s: %w", id, err)
	}
	if err := s.host.DeleteTeams(kids); err != nil {
		return nil, fmt.Errorf("session %s was deleted, but not all of its child sessions: %w; remove them by hand", id, err)
	}
	s.log.Info("session deleted", "session", id)
	return struct{}{}, nil
}
