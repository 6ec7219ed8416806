package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/tools"
)

// sessionState is one open session: its handle, its event counter and
// replay buffer, its active run and its pending approvals.
type sessionState struct {
	id     string
	handle *host.Session
	// epoch names this opening of the session in this process: seq
	// counts from 1 in each epoch, so a cursor is (epoch, seq).
	epoch string

	mu sync.Mutex
	// events numbers the session's notifications and keeps the latest
	// for octet/session/resume (its epoch is epoch).
	events *host.Stream
	active *runState
	// rewinding is set while octet/session/rewind changes the session's
	// files: a prompt then is refused as busy.
	rewinding bool
	pending   map[string]*pendingApproval // by approval key (callId/digest)
	approver  approverFunc
	// lastUsed is when a request last named the session or its last run
	// ended; an idle session is released after Options.SessionIdleTimeout.
	lastUsed time.Time
	// closing is set once the session is being released; closed is
	// closed when its file and agent have been.
	closing bool
	closed  chan struct{}
	// released is set when the server closed the session by itself (idle,
	// or to make room), not because a client asked: a later request
	// naming it opens it again.
	released bool
}

// bufferedEvent is one emitted notification kept for replay.
type bufferedEvent = host.Event

// replay returns the buffered events after the cursor (epoch, afterSeq)
// and whether some events after it are missing (host.Stream.Replay; a v1
// client's cursor has no epoch). The caller holds ss.mu.
func (ss *sessionState) replay(epoch string, afterSeq int64) ([]bufferedEvent, bool) {
	return ss.events.Replay(epoch, afterSeq)
}

// emit assigns the next seq of the session, buffers the notification and,
// when send is true (the client advertised it can show it), sends it.
// build receives the seq and returns the params. Emission for one session
// is serialized, so seq order is wire order.
func (s *Server) emit(ss *sessionState, method string, send bool, build func(seq int64) json.RawMessage) {
	ss.mu.Lock()
	seq := ss.events.Next()
	params := build(seq)
	ss.events.Keep(bufferedEvent{Seq: seq, Method: method, Params: params})
	// The notification is written under the session lock so that two
	// emitters of one session can never reorder seq on the wire.
	if send {
		s.notify(method, params)
	}
	ss.mu.Unlock()
}

// session looks up an open session and marks it used.
func (s *Server) session(id string) (*sessionState, error) {
	if id == "" {
		return nil, invalidParams("sessionId is required")
	}
	s.mu.Lock()
	ss := s.sessions[id]
	reopen := ss == nil && s.released[id]
	s.mu.Unlock()
	if ss != nil {
		ss.mu.Lock()
		closing, released := ss.closing, ss.released
		if !closing {
			ss.lastUsed = time.Now()
		}
		ss.mu.Unlock()
		if !closing {
			return ss, nil
		}
		if !released {
			return nil, closedError(id)
		}
		<-ss.closed
		reopen = true
	}
	if !reopen {
		if cs, ok, _ := s.findChild(id); ok {
			return nil, childReadOnlyError(cs)
		}
		return nil, jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("unknown session %q: create it with octet/session/new or load it with octet/session/resume", id))
	}
	// The server released it, not the client: open it again, as resume
	// would (with a new epoch), so an editor never sees its session vanish.
	s.log.Info("reopening a released session", "session", id)
	return s.openOrReuse(s.ctx, id)
}

func closedError(id string) error {
	return jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("session %s is closed: load it again with octet/session/resume", id))
}

func (s *Server) newSessionState(h *host.Session, approver approverFunc) *sessionState {
	events := host.NewStream(s.opts.EventBuffer, s.opts.EventBufferBytes)
	return &sessionState{
		id:       h.ID(),
		handle:   h,
		epoch:    events.Epoch(),
		events:   events,
		pending:  make(map[string]*pendingApproval),
		approver: approver,
		lastUsed: time.Now(),
		closed:   make(chan struct{}),
	}
}

// register adds a newly opened session, keeping at most
// Options.MaxSessions open: the least recently used idle session is
// released to make room, and without one the new session is refused. It
// returns the session already registered under the same id, if any (the
// caller then closes its own handle).
func (s *Server) register(ss *sessionState) (*sessionState, error) {
	for {
		s.mu.Lock()
		if existing := s.sessions[ss.id]; existing != nil {
			s.mu.Unlock()
			return existing, nil
		}
		if len(s.sessions) < s.opts.MaxSessions {
			s.sessions[ss.id] = ss
			s.mu.Unlock()
			s.watchExtensions(ss)
			return ss, nil
		}
		open := s.openSessions()
		s.mu.Unlock()
		victim := leastRecentlyUsedIdle(open)
		if victim == nil {
			return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf(
				"%d sessions are open and every one has a run: cancel a run, or close a session with octet/session/close", len(open)))
		}
		s.closeIf(victim, "released for another session (open-session bound)", (*sessionState).idle)
	}
}

// openSessions snapshots the open sessions. The caller holds s.mu.
func (s *Server) openSessions() []*sessionState {
	out := make([]*sessionState, 0, len(s.sessions))
	for _, ss := range s.sessions {
		out = append(out, ss)
	}
	return out
}

// leastRecentlyUsedIdle returns the idle session used longest ago, or nil.
func leastRecentlyUsedIdle(sessions []*sessionState) *sessionState {
	var lru *sessionState
	var lruAt time.Time
	for _, ss := range sessions {
		ss.mu.Lock()
		idle, at := ss.idle(), ss.lastUsed
		ss.mu.Unlock()
		if idle && (lru == nil || at.Before(lruAt)) {
			lru, lruAt = ss, at
		}
	}
	return lru
}

// idle reports whether the session has no run, no pending approval and is
// not closing. The caller holds ss.mu.
func (ss *sessionState) idle() bool {
	return ss.active == nil && len(ss.pending) == 0 && !ss.closing
}

// closeSession releases ss: new requests naming it are refused at once,
// its run (if any) is cancelled and waited for (bounded), then its file
// and agent are closed. Closing a session twice waits for the first close.
func (s *Server) closeSession(ss *sessionState, why string) {
	s.closeIf(ss, why, nil)
}

// closeIf is closeSession when cond, checked under ss.mu as the close
// begins, holds (nil: always); it reports whether it closed ss. A session
// released for being idle is thus never one whose run just started.
func (s *Server) closeIf(ss *sessionState, why string, cond func(*sessionState) bool) bool {
	ss.mu.Lock()
	if ss.closing {
		ss.mu.Unlock()
		<-ss.closed
		return cond == nil
	}
	if cond != nil && !cond(ss) {
		ss.mu.Unlock()
		return false
	}
	ss.closing = true
	ss.released = cond != nil
	run := ss.active
	ss.mu.Unlock()
	if run != nil {
		run.cancel(why)
		t := time.NewTimer(settleTimeout)
		select {
		case <-run.done:
		case <-t.C:
			s.log.Error("run did not settle before its session was closed", "session", ss.id, "run", run.id)
		}
		t.Stop()
	}
	s.mu.Lock()
	if s.sessions[ss.id] == ss {
		delete(s.sessions, ss.id)
	}
	if ss.released {
		s.released[ss.id] = true
	} else {
		delete(s.released, ss.id)
	}
	s.mu.Unlock()
	if err := ss.handle.Close(); err != nil {
		s.opts.Logger.Warn("closing session", "session", ss.id, "error", err)
	}
	close(ss.closed)
	s.log.Info("session closed", "session", ss.id, "why", why)
	return true
}

// sessionClose handles octet/session/close: the session's run, if any, is
// cancelled and settled (its octet/prompt answers cancelled), then the
// session's file, agent and replay buffer are released. A session this
// server does not have open has nothing to release: {} as well.
func (s *Server) sessionClose(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	id, err := sessionIDParam(raw)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	ss := s.sessions[id]
	s.mu.Unlock()
	if ss != nil {
		// The run may take a moment to settle: let later messages in.
		jsonrpc2.Async(ctx)
		s.closeSession(ss, "octet/session/close")
	}
	return json.RawMessage(`{}`), nil
}

// releaseIdleSessions closes, until the connection ends, every session
// that has stayed idle for Options.SessionIdleTimeout.
func (s *Server) releaseIdleSessions() {
	every := max(s.opts.SessionIdleTimeout/4, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		open := s.openSessions()
		s.mu.Unlock()
		for _, ss := range open {
			s.closeIf(ss, "idle", func(ss *sessionState) bool {
				return ss.idle() && time.Since(ss.lastUsed) >= s.opts.SessionIdleTimeout
			})
		}
	}
}

// resolveCwd turns a client cwd into an absolute path: relative paths are
// taken against the workspace, never against the process cwd.
func (s *Server) resolveCwd(cwd string) (string, error) {
	s.mu.Lock()
	ws := s.workspace
	s.mu.Unlock()
	switch {
	case cwd == "" && ws == "":
		return "", invalidParams("no workspace: the client sent no rootUri or workspaceFolders, so octet/session/new needs an absolute cwd")
	case cwd == "":
		return ws, nil
	case filepath.IsAbs(cwd):
		return filepath.Clean(cwd), nil
	case ws == "":
		return "", invalidParams("cwd %q is relative and the client sent no workspace to resolve it against", cwd)
	default:
		return filepath.Join(ws, cwd), nil
	}
}

// sessionNew handles octet/session/new.
func (s *Server) sessionNew(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		Cwd       string `json:"cwd"`
		Title     string `json:"title"`
		Model     string `json:"model"`
		Reasoning string `json:"reasoning"`
		// EffectPolicy is the session's own policy (v1.1), no looser
		// than the launch policy.
		EffectPolicy string `json:"effectPolicy"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if err := host.CheckReasoning(p.Reasoning); err != nil {
		return nil, invalidParams("%v", err)
	}
	var policy *tools.Policy
	if p.EffectPolicy != "" {
		pol, err := tools.ParsePolicy(p.EffectPolicy)
		if err != nil {
			return nil, invalidParams("%v", err)
		}
		policy = &pol
	}
	cwd, err := s.resolveCwd(p.Cwd)
	if err != nil {
		return nil, err
	}
	ss, err := s.createSession(ctx, host.Spec{Cwd: cwd, Title: p.Title, Model: p.Model, Reasoning: p.Reasoning, Policy: policy})
	if err != nil {
		return nil, err
	}
	return rawResult(map[string]any{"sessionId": ss.id, "effectiveToolPolicy": ss.handle.Policy()})
}

func (s *Server) createSession(ctx context.Context, spec host.Spec) (*sessionState, error) {
	holder := &approverHolder{}
	h, err := s.host.Create(ctx, spec, s.binding(holder))
	if _, ok := errors.AsType[*host.InputError](err); ok || errors.Is(err, tools.ErrPolicyLooser) {
		return nil, invalidParams("create session: %v", err)
	}
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("create session: %v", err))
	}
	ss := s.newSessionState(h, nil)
	holder.set(s.approverFor(ss))
	if _, err := s.register(ss); err != nil {
		_ = h.Close()
		return nil, err
	}
	s.log.Info("session created", "session", ss.id, "cwd", spec.Cwd)
	return ss, nil
}

// binding is what the host builds a session of this server with: its
// approver (through holder, set once the session is registered), the
// editor's document overlay of its workspace and name, and its children's
// hooks.
func (s *Server) binding(holder *approverHolder) host.Binding {
	return host.Binding{Approver: toolsApprover{holder.confirm}, Documents: s.docs.forWorkspace, Delegation: s.delegate, Editor: s.editorFor}
}

// approverHolder lets the host receive the approver before the
// session state it refers to exists.
type approverHolder struct {
	mu sync.Mutex
	f  approverFunc
}

func (h *approverHolder) set(f approverFunc) { h.mu.Lock(); h.f = f; h.mu.Unlock() }

func (h *approverHolder) confirm(ctx context.Context, req approvalRequest) (approvalAnswer, error) {
	h.mu.Lock()
	f := h.f
	h.mu.Unlock()
	if f == nil {
		return approvalAnswer{}, errors.New("approval requested before the session was registered")
	}
	return f(ctx, req)
}

// sessionList handles octet/session/list.
func (s *Server) sessionList(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		Cwd    string `json:"cwd"`
		Cursor string `json:"cursor"`
		Limit  int    `json:"limit"`
		// ParentSessionID lists that session's delegated children instead.
		ParentSessionID string `json:"parentSessionId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		p.Limit = 50
	}
	p.Limit = min(p.Limit, 500)
	start := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 {
			return nil, invalidParams("invalid cursor %q", p.Cursor)
		}
		start = n
	}
	var infos []host.SessionInfo
	var err error
	if p.ParentSessionID != "" {
		infos, err = s.listChildren(p.ParentSessionID)
	} else {
		infos, err = s.host.List(ctx)
	}
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("list sessions: %v", err))
	}
	if p.Cwd != "" {
		cwd, err := s.resolveCwd(p.Cwd)
		if err != nil {
			return nil, err
		}
		infos = slices.DeleteFunc(infos, func(i host.SessionInfo) bool { return filepath.Clean(i.Cwd) != cwd })
	}
	newestFirst := func(a, b host.SessionInfo) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return compareStrings(a.SessionID, b.SessionID)
	}
	// The backend lists newest first already; sorting is then one pass.
	if !slices.IsSortedFunc(infos, newestFirst) {
		slices.SortStableFunc(infos, newestFirst)
	}
	res := struct {
		Sessions   []host.SessionInfo `json:"sessions"`
		NextCursor string             `json:"nextCursor,omitempty"`
	}{Sessions: []host.SessionInfo{}}
	if start < len(infos) {
		end := min(start+p.Limit, len(infos))
		res.Sessions = infos[start:end]
		if end < len(infos) {
			res.NextCursor = strconv.Itoa(end)
		}
	}
	return rawResult(res)
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sessionResume handles octet/session/resume: it loads the session when
// this process has not opened it yet, and answers with the durable
// transcript, usage, pending approvals, the active run and the buffered
// events after the cursor (epoch, afterSeq). Pending approvals are sent
// again, once (see pendingApproval.resendable).
func (s *Server) sessionResume(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		AfterSeq  *int64 `json:"afterSeq"`
		Epoch     string `json:"epoch"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	ss, cs, isChild, err := s.sessionOrChild(ctx, p.SessionID)
	switch {
	case err != nil:
		return nil, err
	case isChild:
		return s.resumeChild(cs, p.AfterSeq, p.Epoch)
	}
	usage := ss.handle.Usage()
	res := map[string]any{
		"sessionId":      ss.id,
		"head":           ss.handle.Head(),
		"usage":          usage,
		"usageUncertain": !usage.Complete,
	}
	if err := resumeTranscript(ss.handle.Transcript, res); err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("read transcript of %s: %v", ss.id, err))
	}
	res["recoveredOutput"] = ss.handle.RecoveredOutput()
	if plan := ss.handle.Plan(); plan != nil {
		res["plan"] = plan
	}
	s.resumeChildren(ss.id, res)
	ss.mu.Lock()
	pending := ss.pendingSorted()
	res["pendingApprovals"] = viewsOf(pending)
	if ss.active != nil {
		res["activeRunId"] = ss.active.id
	}
	if p.AfterSeq != nil {
		evs, truncated := ss.replay(p.Epoch, *p.AfterSeq)
		res["events"] = evs
		res["replayTruncated"] = truncated
	}
	res["epoch"] = ss.epoch
	res["lastSeq"] = ss.events.LastSeq()
	s.emitSessionStateLocked(ss)
	var resend []*pendingApproval
	for _, pa := range pending {
		if pa.resendable() {
			resend = append(resend, pa)
		}
	}
	ss.mu.Unlock()
	for _, pa := range resend {
		go s.askApproval(pa.ctx, ss, pa)
	}
	return rawResult(res)
}

// openOrReuse returns the open session id, marked used, or opens it from
// disk (after a close of it still under way has finished).
// openHere returns the session id when this server has it open (and is
// not closing it), or nil.
func (s *Server) openHere(id string) *sessionState {
	s.mu.Lock()
	ss := s.sessions[id]
	s.mu.Unlock()
	if ss == nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closing {
		return nil
	}
	return ss
}

func (s *Server) openOrReuse(ctx context.Context, id string) (*sessionState, error) {
	s.mu.Lock()
	ss := s.sessions[id]
	s.mu.Unlock()
	if ss != nil {
		ss.mu.Lock()
		closing := ss.closing
		ss.lastUsed = time.Now()
		ss.mu.Unlock()
		if !closing {
			return ss, nil
		}
		<-ss.closed
	}
	return s.openSession(ctx, id)
}

func (s *Server) openSession(ctx context.Context, id string) (*sessionState, error) {
	holder := &approverHolder{}
	h, err := s.host.Open(ctx, id, s.binding(holder))
	if err != nil {
		if cs, ok, _ := s.findChild(id); ok && errors.Is(err, host.ErrNoSession) {
			return nil, childReadOnlyError(cs)
		}
		if errors.Is(err, host.ErrNoSession) {
			return nil, jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("unknown session %q: %v", id, err))
		}
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("open session %s: %v", id, err))
	}
	ss := s.newSessionState(h, nil)
	holder.set(s.approverFor(ss))
	got, err := s.register(ss)
	if got != ss {
		_ = h.Close()
	}
	return got, err
}

// sessionBranch handles octet/session/branch.
func (s *Server) sessionBranch(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		EntryID   string `json:"entryId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.EntryID == "" {
		return nil, invalidParams("entryId is required")
	}
	ss, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	active := ss.active
	ss.mu.Unlock()
	if active != nil {
		return nil, busyError(ss.id, active.id)
	}
	if err := ss.handle.SetHead(p.EntryID); err != nil {
		return nil, invalidParams("branch %s to %s: %v", ss.id, p.EntryID, err)
	}
	return rawResult(map[string]string{"head": ss.handle.Head()})
}

// setReasoning handles octet/setReasoning.
func (s *Server) setReasoning(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		Effort    string `json:"effort"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	ss, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	eff, err := ss.handle.SetReasoning(p.Effort)
	if err != nil {
		return nil, invalidParams("set reasoning: %v", err)
	}
	return rawResult(map[string]string{"effective": eff})
}

// setModel handles octet/setModel.
func (s *Server) setModel(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		Model     string `json:"model"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.Model == "" {
		return nil, invalidParams("model is required")
	}
	ss, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	eff, err := ss.handle.SetModel(p.Model)
	if err != nil {
		return nil, invalidParams("set model: %v", err)
	}
	return rawResult(map[string]string{"effective": eff})
}

// policy handles octet/policy.
func (s *Server) policy(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	ss, err := s.sessionParam(raw)
	if err != nil {
		return nil, err
	}
	return rawResult(ss.handle.Policy())
}

// sessionParam is the open session that params {sessionId} name.
func (s *Server) sessionParam(raw jsonrpc2.RawMessage) (*sessionState, error) {
	id, err := sessionIDParam(raw)
	if err != nil {
		return nil, err
	}
	return s.session(id)
}

// sessionIDParam is the session id of params {sessionId}, required.
func sessionIDParam(raw jsonrpc2.RawMessage) (string, error) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return "", err
	}
	if p.SessionID == "" {
		return "", invalidParams("sessionId is required")
	}
	return p.SessionID, nil
}

func busyError(sessionID, runID string) error {
	data, _ := json.Marshal(map[string]string{"sessionId": sessionID, "activeRunId": runID})
	return &jsonrpc2.Error{
		Code:    CodeSessionBusy,
		Message: fmt.Sprintf("session %s already has an active run %s: one run per session; use octet/steer or octet/followUp to add input, or octet/cancel first", sessionID, runID),
		Data:    data,
	}
}
