package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"go.lsp.dev/jsonrpc2"
)

// sessionState is one open session: its handle, its event counter and
// replay buffer, its active run and its pending approvals.
type sessionState struct {
	id     string
	handle sessionHandle
	// epoch names this opening of the session in this process: seq
	// counts from 1 in each epoch, so a cursor is (epoch, seq).
	epoch string

	mu       sync.Mutex
	seq      int64
	buf      eventRing
	active   *runState
	pending  map[string]*pendingApproval // by approval key (callId/digest)
	approver approverFunc
}

// bufferedEvent is one emitted notification kept for replay.
type bufferedEvent struct {
	Seq    int64           `json:"seq"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// eventRing keeps the most recent events, bounded by count and bytes.
type eventRing struct {
	maxN, maxBytes int
	bytes          int
	evs            []bufferedEvent
	dropped        bool // some event was evicted
}

func (r *eventRing) add(e bufferedEvent) {
	r.evs = append(r.evs, e)
	r.bytes += len(e.Params)
	n := 0
	for len(r.evs)-n > r.maxN || (r.bytes > r.maxBytes && len(r.evs)-n > 1) {
		r.bytes -= len(r.evs[n].Params)
		n++
	}
	if n > 0 {
		r.dropped = true
		r.evs = slices.Delete(r.evs, 0, n)
	}
}

// after returns the buffered events with seq > after and whether the
// buffer no longer reaches back that far.
func (r *eventRing) after(after, last int64) ([]bufferedEvent, bool) {
	if after >= last {
		return nil, after > last
	}
	oldest := last + 1
	if len(r.evs) > 0 {
		oldest = r.evs[0].Seq
	}
	truncated := oldest > after+1
	i, _ := slices.BinarySearchFunc(r.evs, after+1, func(e bufferedEvent, seq int64) int {
		return int(e.Seq - seq)
	})
	return slices.Clone(r.evs[i:]), truncated
}

// replay returns the buffered events after the cursor (epoch, afterSeq)
// and whether some events after it are missing. A cursor of another epoch
// (another process, or the session closed and opened again) gets every
// buffered event of this one, and is truncated: what came after it in its
// own epoch is only in the transcript. Without an epoch (a v1 client) the
// cursor is taken to be of this epoch; a negative afterSeq means "from the
// start". The caller holds ss.mu.
func (ss *sessionState) replay(epoch string, afterSeq int64) ([]bufferedEvent, bool) {
	var evs []bufferedEvent
	var truncated bool
	if epoch != "" && epoch != ss.epoch {
		evs, _ = ss.buf.after(0, ss.seq)
		truncated = true
	} else {
		evs, truncated = ss.buf.after(max(afterSeq, 0), ss.seq)
	}
	if evs == nil {
		evs = []bufferedEvent{}
	}
	return evs, truncated
}

// emit assigns the next seq of the session, buffers the notification and,
// when send is true (the client advertised it can show it), sends it.
// build receives the seq and returns the params. Emission for one session
// is serialized, so seq order is wire order.
func (s *Server) emit(ss *sessionState, method string, send bool, build func(seq int64) json.RawMessage) {
	ss.mu.Lock()
	ss.seq++
	seq := ss.seq
	params := build(seq)
	ss.buf.add(bufferedEvent{Seq: seq, Method: method, Params: params})
	// The notification is written under the session lock so that two
	// emitters of one session can never reorder seq on the wire.
	if send {
		s.notify(method, params)
	}
	ss.mu.Unlock()
}

// session looks up an open session.
func (s *Server) session(id string) (*sessionState, error) {
	if id == "" {
		return nil, invalidParams("sessionId is required")
	}
	s.mu.Lock()
	ss := s.sessions[id]
	s.mu.Unlock()
	if ss == nil {
		return nil, jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("unknown session %q: create it with octet/session/new or load it with octet/session/resume", id))
	}
	return ss, nil
}

func (s *Server) newSessionState(h sessionHandle, approver approverFunc) *sessionState {
	return &sessionState{
		id:       h.ID(),
		handle:   h,
		epoch:    rand.Text(),
		buf:      eventRing{maxN: s.opts.EventBuffer, maxBytes: s.opts.EventBufferBytes},
		pending:  make(map[string]*pendingApproval),
		approver: approver,
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
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if err := checkReasoning(p.Reasoning); err != nil {
		return nil, invalidParams("%v", err)
	}
	cwd, err := s.resolveCwd(p.Cwd)
	if err != nil {
		return nil, err
	}
	ss, err := s.createSession(ctx, sessionSpec{Cwd: cwd, Title: p.Title, Model: p.Model, Reasoning: p.Reasoning})
	if err != nil {
		return nil, err
	}
	return rawResult(map[string]any{"sessionId": ss.id, "effectiveToolPolicy": ss.handle.Policy()})
}

func (s *Server) createSession(ctx context.Context, spec sessionSpec) (*sessionState, error) {
	holder := &approverHolder{}
	spec.Approver = holder.confirm
	h, err := s.opts.backend.Create(ctx, spec)
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("create session: %v", err))
	}
	ss := s.newSessionState(h, nil)
	holder.set(s.approverFor(ss))
	s.mu.Lock()
	s.sessions[ss.id] = ss
	s.mu.Unlock()
	s.log.Info("session created", "session", ss.id, "cwd", spec.Cwd)
	return ss, nil
}

// approverHolder lets the backend receive the approver before the
// session state it refers to exists.
type approverHolder struct {
	mu sync.Mutex
	f  approverFunc
}

func (h *approverHolder) set(f approverFunc) { h.mu.Lock(); h.f = f; h.mu.Unlock() }

func (h *approverHolder) confirm(ctx context.Context, req approvalRequest) (bool, string, error) {
	h.mu.Lock()
	f := h.f
	h.mu.Unlock()
	if f == nil {
		return false, "", errors.New("approval requested before the session was registered")
	}
	return f(ctx, req)
}

// sessionList handles octet/session/list.
func (s *Server) sessionList(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		Cwd    string `json:"cwd"`
		Cursor string `json:"cursor"`
		Limit  int    `json:"limit"`
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
	infos, err := s.opts.backend.List(ctx)
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("list sessions: %v", err))
	}
	if p.Cwd != "" {
		cwd, err := s.resolveCwd(p.Cwd)
		if err != nil {
			return nil, err
		}
		infos = slices.DeleteFunc(infos, func(i sessionInfo) bool { return filepath.Clean(i.Cwd) != cwd })
	}
	slices.SortStableFunc(infos, func(a, b sessionInfo) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return compareStrings(a.SessionID, b.SessionID)
	})
	res := struct {
		Sessions   []sessionInfo `json:"sessions"`
		NextCursor string        `json:"nextCursor,omitempty"`
	}{Sessions: []sessionInfo{}}
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
	if p.SessionID == "" {
		return nil, invalidParams("sessionId is required")
	}
	s.mu.Lock()
	ss := s.sessions[p.SessionID]
	s.mu.Unlock()
	if ss == nil {
		var err error
		if ss, err = s.openSession(ctx, p.SessionID); err != nil {
			return nil, err
		}
	}
	transcript, err := ss.handle.Transcript()
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("read transcript of %s: %v", ss.id, err))
	}
	usage, uncertain := ss.handle.Usage()
	res := map[string]any{
		"sessionId":      ss.id,
		"head":           ss.handle.Head(),
		"transcript":     transcript,
		"usage":          usage,
		"usageUncertain": uncertain,
	}
	ss.mu.Lock()
	pending := make([]*pendingApproval, 0, len(ss.pending))
	for _, pa := range ss.pending {
		pending = append(pending, pa)
	}
	slices.SortFunc(pending, func(a, b *pendingApproval) int { return a.created.Compare(b.created) })
	views := make([]confirmParams, 0, len(pending))
	for _, pa := range pending {
		views = append(views, pa.params)
	}
	res["pendingApprovals"] = views
	if ss.active != nil {
		res["activeRunId"] = ss.active.id
	}
	if p.AfterSeq != nil {
		evs, truncated := ss.replay(p.Epoch, *p.AfterSeq)
		res["events"] = evs
		res["replayTruncated"] = truncated
	}
	res["epoch"] = ss.epoch
	res["lastSeq"] = ss.seq
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

func (s *Server) openSession(ctx context.Context, id string) (*sessionState, error) {
	holder := &approverHolder{}
	h, err := s.opts.backend.Open(ctx, id, holder.confirm)
	if err != nil {
		if errors.Is(err, errNoSession) {
			return nil, jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("unknown session %q: %v", id, err))
		}
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("open session %s: %v", id, err))
	}
	ss := s.newSessionState(h, nil)
	holder.set(s.approverFor(ss))
	s.mu.Lock()
	if existing := s.sessions[id]; existing != nil {
		s.mu.Unlock()
		_ = h.Close()
		return existing, nil
	}
	s.sessions[id] = ss
	s.mu.Unlock()
	return ss, nil
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
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	ss, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	return rawResult(ss.handle.Policy())
}

func busyError(sessionID, runID string) error {
	data, _ := json.Marshal(map[string]string{"sessionId": sessionID, "activeRunId": runID})
	return &jsonrpc2.Error{
		Code:    CodeSessionBusy,
		Message: fmt.Sprintf("session %s already has an active run %s: one run per session; use octet/steer or octet/followUp to add input, or octet/cancel first", sessionID, runID),
		Data:    data,
	}
}
