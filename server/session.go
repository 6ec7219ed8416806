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

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/tools"
)

// emit assigns the next seq of the session, buffers the notification and,
// when send is true (the client advertised it can show it), sends it.
// build receives the seq and returns the params. Emission for one session
// is serialized (host.OpenSession.Emit), so seq order is wire order.
func (s *Server) emit(ss *host.OpenSession, method string, send bool, build func(seq int64) json.RawMessage) {
	ss.Emit(method, &notification{s: s, method: method, send: send, build: build})
}

// notification is one notification of a session (host.Emission).
type notification struct {
	s      *Server
	method string
	send   bool
	build  func(seq int64) json.RawMessage
}

func (n *notification) Params(seq int64) json.RawMessage { return n.build(seq) }

// Send writes the notification under the session's lock, so two
// emitters of one session can never reorder seq on the wire.
func (n *notification) Send(params json.RawMessage) {
	if n.send {
		n.s.notify(n.method, params)
	}
}

// session looks up an open session and marks it used. A session the
// server released by itself (idle, or to make room) is opened again, as
// resume would (with a new epoch), so an editor never sees its session
// vanish.
func (s *Server) session(id string) (*host.OpenSession, error) {
	if id == "" {
		return nil, invalidParams("sessionId is required")
	}
	ss, err := s.sessions.Use(id)
	switch {
	case err == nil:
		return ss, nil
	case errors.Is(err, host.ErrClosed):
		return nil, closedError(id)
	case errors.Is(err, host.ErrReleased):
		s.log.Info("reopening a released session", "session", id)
		return s.openOrReuse(s.ctx, id)
	}
	if cs, ok, _ := s.findChild(id); ok {
		return nil, childReadOnlyError(cs)
	}
	return nil, jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("unknown session %q: create it with octet/session/new or load it with octet/session/resume", id))
}

func closedError(id string) error {
	return jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("session %s is closed: load it again with octet/session/resume", id))
}

// register holds a newly opened session open (host.Registry.Add: at most
// Options.MaxSessions, the least recently used idle one released to make
// room). It returns the session already registered under the same id, if
// any (the caller then closes its own handle).
func (s *Server) register(ss *host.OpenSession) (*host.OpenSession, error) {
	got, err := s.sessions.Add(ss)
	if err != nil {
		return nil, limitError(err)
	}
	if got == ss {
		s.watchExtensions(ss)
	}
	return got, nil
}

// limitError answers a session refused for the open-session bound
// (host.LimitError).
func limitError(err error) error {
	if _, full := errors.AsType[*host.LimitError](err); full {
		return jsonrpc2.NewError(CodeBackend, fmt.Sprintf("%v with octet/session/close", err))
	}
	return err
}

// closeSession releases ss: new requests naming it are refused at once,
// its run (if any) is cancelled and waited for (bounded), then its file
// and agent are closed. Closing a session twice waits for the first close.
func (s *Server) closeSession(ss *host.OpenSession, why string) {
	s.sessions.Close(ss, why)
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
	if ss, ok := s.sessions.Get(id); ok {
		// The run may take a moment to settle: let later messages in.
		jsonrpc2.Async(ctx)
		s.closeSession(ss, "octet/session/close")
	}
	return json.RawMessage(`{}`), nil
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
	return rawResult(map[string]any{"sessionId": ss.ID(), "effectiveToolPolicy": ss.Session().Policy()})
}

func (s *Server) createSession(ctx context.Context, spec host.Spec) (*host.OpenSession, error) {
	ss, err := s.hold(func(b host.Binding) (*host.Session, error) {
		h, err := s.host.Create(ctx, spec, b)
		if _, ok := errors.AsType[*host.InputError](err); ok || errors.Is(err, tools.ErrPolicyLooser) {
			return nil, invalidParams("create session: %v", err)
		}
		if err != nil {
			return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("create session: %v", err))
		}
		return h, nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("session created", "session", ss.ID(), "cwd", spec.Cwd)
	return ss, nil
}

// hold opens a session with open, given this server's binding, and holds
// it open (register): the session already held under the same id, if
// any, is returned instead. open's error is returned as it is.
func (s *Server) hold(open func(host.Binding) (*host.Session, error)) (*host.OpenSession, error) {
	// Room first: a session refused for the bound leaves nothing behind.
	if err := s.sessions.MakeRoom(); err != nil {
		return nil, limitError(err)
	}
	holder := &approverHolder{}
	h, err := open(s.binding(holder))
	if err != nil {
		return nil, err
	}
	ss := host.NewOpenSession(h, s.opts.EventBuffer, s.opts.EventBufferBytes)
	holder.set(s.approverFor(ss))
	got, err := s.register(ss)
	if got != ss {
		_ = h.Close()
	}
	return got, err
}

// binding is what the host builds a session of this server with: its
// approver (through holder, set once the session is registered), the
// editor's document overlay of its workspace and name, and its children's
// hooks.
func (s *Server) binding(holder *approverHolder) host.Binding {
	return host.Binding{Approver: holder, Documents: s.docs.forWorkspace, Delegation: s.delegate, Editor: s.editorFor}
}

// approverHolder lets the host receive the approver before the
// session state it refers to exists.
type approverHolder struct {
	mu sync.Mutex
	f  approverFunc
}

func (h *approverHolder) set(f approverFunc) { h.mu.Lock(); h.f = f; h.mu.Unlock() }

// Confirm implements tools.Approver.
func (h *approverHolder) Confirm(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
	h.mu.Lock()
	f := h.f
	h.mu.Unlock()
	if f == nil {
		return tools.Approval{}, errors.New("approval requested before the session was registered")
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
	usage := ss.Session().Usage()
	res := map[string]any{
		"sessionId":      ss.ID(),
		"head":           ss.Session().Head(),
		"usage":          usage,
		"usageUncertain": !usage.Complete,
		// The selection the session's next request is sent with: the
		// one it recorded last, over the configuration.
		"model":     ss.Session().Model().Name,
		"reasoning": ss.Session().Reasoning(),
	}
	if err := resumeTranscript(ss.Session().Transcript, res); err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("read transcript of %s: %v", ss.ID(), err))
	}
	res["recoveredOutput"] = ss.Session().RecoveredOutput()
	if plan := ss.Session().Plan(); plan != nil {
		res["plan"] = plan
	}
	s.resumeChildren(ss.ID(), res)
	snap := ss.Reattach(p.Epoch, p.AfterSeq, func(r host.Reattachment, seq int64) {
		s.sendSessionState(ss, r, seq)
	})
	res["pendingApprovals"] = host.Views(snap.Pending)
	if run := runOf(snap.Busy); run != nil {
		res["activeRunId"] = run.id
	}
	if p.AfterSeq != nil {
		res["events"] = snap.Events
		res["replayTruncated"] = snap.Truncated
	}
	res["epoch"] = snap.Epoch
	res["lastSeq"] = snap.LastSeq
	for _, pa := range snap.Resend {
		go s.askApproval(pa.Context(), ss, pa)
	}
	return rawResult(res)
}

// openHere returns the session id when this server has it open (and is
// not closing it), or nil.
func (s *Server) openHere(id string) *host.OpenSession {
	ss, _ := s.sessions.Lookup(id)
	return ss
}

// openOrReuse returns the open session id, marked used, or opens it from
// disk (after a close of it still under way has finished).
func (s *Server) openOrReuse(ctx context.Context, id string) (*host.OpenSession, error) {
	if ss, ok := s.sessions.Reuse(id); ok {
		return ss, nil
	}
	return s.openSession(ctx, id)
}

func (s *Server) openSession(ctx context.Context, id string) (*host.OpenSession, error) {
	return s.hold(func(b host.Binding) (*host.Session, error) {
		h, err := s.host.Open(ctx, id, b)
		if err == nil {
			return h, nil
		}
		if cs, ok, _ := s.findChild(id); ok && errors.Is(err, host.ErrNoSession) {
			return nil, childReadOnlyError(cs)
		}
		if errors.Is(err, host.ErrNoSession) {
			return nil, jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("unknown session %q: %v", id, err))
		}
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("open session %s: %v", id, err))
	})
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
	if run := runOf(ss.Busy()); run != nil {
		return nil, busyError(ss.ID(), run.id)
	}
	if err := ss.Session().SetHead(p.EntryID); err != nil {
		return nil, invalidParams("branch %s to %s: %v", ss.ID(), p.EntryID, err)
	}
	return rawResult(map[string]string{"head": ss.Session().Head()})
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
	eff, err := ss.Session().SetReasoning(p.Effort)
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
	eff, err := ss.Session().SetModel(p.Model)
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
	return rawResult(ss.Session().Policy())
}

// sessionParam is the open session that params {sessionId} name.
func (s *Server) sessionParam(raw jsonrpc2.RawMessage) (*host.OpenSession, error) {
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
