package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.lsp.dev/protocol"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/tools"
)

// maxApprovalMessage bounds the window/showMessageRequest fallback: a
// stock client shows the message as plain text, and octet sends only a
// request that fits whole. A larger one is refused (preview_too_large),
// never cut: an approval never shows less than what will run.
const maxApprovalMessage = 2000

// confirmParams are the params of octet/confirmEffect.
type confirmParams struct {
	SessionID string    `json:"sessionId"`
	RunID     string    `json:"runId"`
	CallID    string    `json:"callId"`
	Tool      string    `json:"tool"`
	Effect    string    `json:"effect"`
	Title     string    `json:"title"`
	Detail    string    `json:"detail"`
	Diff      string    `json:"diff,omitempty"`
	Digest    string    `json:"digest"`
	ExpiresAt time.Time `json:"expiresAt"`
	// RuleScope is what "approve_for_session" would cover; absent, that
	// answer approves this call once.
	RuleScope *tools.ApprovalScope `json:"ruleScope,omitempty"`
	// AgentPath and ChildSessionID name the delegated child agent whose
	// call this is (absent for the session's own agent); RunID is then
	// the child's run.
	AgentPath      string `json:"agentPath,omitempty"`
	ChildSessionID string `json:"childSessionId,omitempty"`
}

// pendingApproval is one approval the editor has not answered yet. The
// first answer wins: from the original request, a replayed one after
// octet/session/resume, or an octet.approve / octet.deny command.
type pendingApproval struct {
	params  confirmParams
	created time.Time
	once    sync.Once
	answer  chan approvalAnswer // buffered 1; Approved only with the right digest

	// ctx ends when the approver stops waiting (answer, timeout, run
	// cancelled); every request asking for this approval is withdrawn then.
	ctx context.Context

	// path is the absolute file the call changes ("" for none), named in
	// the stock client's message.
	path string

	// inFlight counts the requests for this approval the client has not
	// answered yet; resent records that a resume has sent it again. Both
	// are guarded by the session's mu (see resendable).
	inFlight int
	resent   bool

	// refusal, set before a refusing answer is sent, is why the request
	// could not be put to the person at all (tools.ErrPreviewTooLarge).
	refusal error
}

func (pa *pendingApproval) resolve(ans approvalAnswer) {
	pa.once.Do(func() { pa.answer <- ans })
}

// refuse answers "no" because the request cannot be shown; err says why.
func (pa *pendingApproval) refuse(err error) {
	pa.once.Do(func() { pa.refusal = err; pa.answer <- approvalAnswer{} })
}

// approverFor returns the session's approver: it asks the client and
// waits for the first of an answer, the timeout, the expiry of the intent
// or the cancellation of the run.
func (s *Server) approverFor(ss *sessionState) approverFunc {
	return func(ctx context.Context, req approvalRequest) (approvalAnswer, error) {
		no := approvalAnswer{Digest: req.Digest}
		if req.AgentPath != "" {
			// A stock client shows only the title: it names the child too.
			req.Title = req.AgentPath + ": " + req.Title
		}
		pa := &pendingApproval{
			params: confirmParams{
				SessionID: ss.id, RunID: req.RunID, CallID: req.CallID, Tool: req.Tool,
				Effect: req.Effect, Title: req.Title, Detail: req.Detail, Diff: req.Diff,
				Digest: req.Digest, ExpiresAt: approvalDeadline(time.Now(), s.opts.ApprovalTimeout, req.ExpiresAt),
				RuleScope: req.Scope, AgentPath: req.AgentPath, ChildSessionID: req.ChildSessionID,
			},
			created: time.Now(),
			answer:  make(chan approvalAnswer, 1),
			path:    callPath(req.Arguments, ss.handle.Cwd()),
		}
		// One deadline: the sooner of the server's approval timeout and the
		// broker's expiry, stated to the client as expiresAt and recorded
		// as approval_expired when it passes.
		if !time.Now().Before(pa.params.ExpiresAt) {
			s.log.Warn("approval expired before it could be asked", "call", req.CallID)
			return no, fmt.Errorf("call %s: %w", req.CallID, tools.ErrApprovalExpired)
		}
		ctx, cancel := context.WithDeadline(ctx, pa.params.ExpiresAt)
		defer cancel()
		pa.ctx = ctx
		key := approvalKey(pa.params)
		ss.mu.Lock()
		ss.pending[key] = pa
		pa.inFlight++ // askApproval below sends it
		run := ss.active
		ss.mu.Unlock()
		defer func() {
			ss.mu.Lock()
			delete(ss.pending, key)
			ss.mu.Unlock()
		}()

		if run != nil && run.id == req.RunID && req.ChildSessionID == "" {
			// The events before the call (its text, tool_started) go
			// first, so the client can show the approval in its place.
			run.started.Await(ctx, req.CallID)
		}
		var cancelled <-chan struct{}
		if run != nil {
			cancelled = run.cancelled
			run.awaitApproval(req.CallID, "Waiting for approval: "+host.Clip(firstLine(req.Title), 60))
		}
		go s.askApproval(ctx, ss, pa)

		select {
		case ans := <-pa.answer:
			if pa.refusal != nil {
				if run != nil {
					run.approvalDone(req.CallID, "Thinking")
				}
				return no, pa.refusal
			}
			s.log.Info("approval answered", "session", ss.id, "call", req.CallID, "approved", ans.Approved, "forSession", ans.ForSession)
			if run != nil {
				if ans.Approved {
					run.approvalDone(req.CallID, toolMessage(req.Tool, bytes.NewBuffer(req.Arguments)))
				} else {
					run.approvalDone(req.CallID, "Thinking")
				}
			}
			ans.Digest = req.Digest
			return ans, nil
		case <-cancelled:
			return no, context.Canceled
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				s.log.Warn("approval expired unanswered", "session", ss.id, "call", req.CallID, "expiresAt", pa.params.ExpiresAt)
				if run != nil {
					run.approvalDone(req.CallID, "Thinking")
				}
				return no, fmt.Errorf("call %s: %w", req.CallID, tools.ErrApprovalExpired)
			}
			return no, ctx.Err()
		}
	}
}

// approvalDeadline is the one deadline of an approval asked at now: the
// sooner of now+timeout and the broker's expiry (when it has one).
func approvalDeadline(now time.Time, timeout time.Duration, brokerExpiry time.Time) time.Time {
	d := now.Add(timeout)
	if !brokerExpiry.IsZero() && brokerExpiry.Before(d) {
		d = brokerExpiry
	}
	return d.UTC()
}

// sameDigest compares two hex digests; hex is case-insensitive.
func sameDigest(a, b string) bool { return a != "" && strings.EqualFold(a, b) }

// callPath is the absolute path a call's "path" argument names, resolved
// against cwd ("" when it has none).
func callPath(args json.RawMessage, cwd string) string {
	var a struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(args, &a) != nil || a.Path == "" {
		return ""
	}
	if filepath.IsAbs(a.Path) {
		return filepath.Clean(a.Path)
	}
	return filepath.Join(cwd, a.Path)
}

func approvalKey(p confirmParams) string { return p.RunID + "\x00" + p.CallID + "\x00" + p.Digest }

// askApproval sends the request the client can show and resolves pa from
// its answer. A failed or timed-out request resolves nothing (the
// approver's own deadline decides). The caller has counted the request in
// pa.inFlight.
func (s *Server) askApproval(ctx context.Context, ss *sessionState, pa *pendingApproval) {
	defer func() {
		ss.mu.Lock()
		pa.inFlight--
		ss.mu.Unlock()
	}()
	s.mu.Lock()
	confirm := s.caps.confirmEffect
	s.mu.Unlock()
	timeout := time.Until(pa.params.ExpiresAt)
	if confirm {
		raw, err := s.call(ctx, timeout, "octet/confirmEffect", mustJSON(pa.params))
		if err != nil {
			s.approvalFailed(pa, "octet/confirmEffect", err)
			return
		}
		pa.resolve(s.confirmAnswer(pa, raw))
		return
	}
	// A stock client shows only this message: it must carry what will
	// change (the command in detail, the diff of an edit or write), whole.
	msg := fallbackApprovalMessage(pa.params, ss.handle, pa.path)
	if len(msg) > maxApprovalMessage {
		s.log.Warn("approval too large for window/showMessageRequest; refused", "call", pa.params.CallID, "bytes", len(msg))
		s.notify("window/showMessage", &protocol.ShowMessageParams{
			Type: protocol.MessageTypeWarning,
			Message: fmt.Sprintf("octet refused %s without asking: it is %d bytes, more than this editor's approval prompt shows whole (%d). "+
				"The model was told to split it; an octet editor plugin (octet/confirmEffect) shows large changes whole.", pa.params.Title, len(msg), maxApprovalMessage),
		})
		pa.refuse(fmt.Errorf("window/showMessageRequest holds %d bytes, the request needs %d: %w", maxApprovalMessage, len(msg), tools.ErrPreviewTooLarge))
		return
	}
	raw, err := s.call(ctx, timeout, "window/showMessageRequest", &protocol.ShowMessageRequestParams{
		Type:    protocol.MessageTypeWarning,
		Message: msg,
		Actions: fallbackActions(pa.params),
	})
	if err != nil {
		s.approvalFailed(pa, "window/showMessageRequest", err)
		return
	}
	var item *struct {
		Title string `json:"title"`
	}
	if json.Unmarshal(raw, &item) != nil || item == nil {
		pa.resolve(approvalAnswer{})
		return
	}
	pa.resolve(fallbackAnswer(item.Title))
}

// fallbackApprovalMessage is the whole window/showMessageRequest text of
// an approval: which session asks (title, id, directory), the title, the
// file the call changes (absolute), then the detail and the diff. A stock
// client shows nothing else, and an editor may run several sessions.
func fallbackApprovalMessage(p confirmParams, sess *host.Session, path string) string {
	who := "octet session " + p.SessionID
	if title := sess.Title(); title != "" {
		who = fmt.Sprintf("octet session %q (%s)", title, p.SessionID)
	}
	msg := who + " in " + sess.Cwd() + " wants to run " + p.Tool + ": " + p.Title
	if path != "" {
		msg += "\nFile: " + tools.ShownPath(path)
	}
	for _, part := range []string{p.Detail, p.Diff} {
		if part != "" {
			msg += "\n\n" + part
		}
	}
	return msg
}

// approvalFailed handles a failed approval request: an error answer from
// the client is a definite denial (no point waiting for the deadline); a
// request that got no answer decides nothing here.
func (s *Server) approvalFailed(pa *pendingApproval, method string, err error) {
	if isWireError(err) {
		s.log.Warn("client answered the approval with an error; denied", "method", method, "call", pa.params.CallID, "error", err)
		pa.resolve(approvalAnswer{})
		return
	}
	s.log.Warn("approval request got no answer", "method", method, "call", pa.params.CallID, "error", err)
}

// resendable reports whether octet/session/resume sends pa again, and
// counts the request it will send: once, for a client that reattached and
// may have lost its prompt, and again only when no request for it is
// outstanding, never once per resume. The caller holds the session's mu.
func (pa *pendingApproval) resendable() bool {
	if pa.resent && pa.inFlight > 0 {
		return false
	}
	pa.resent = true
	pa.inFlight++
	return true
}

// decideApproval resolves pending approvals from octet.approve/octet.deny.
// With a digest or callId it resolves the matching one; with neither, the
// oldest pending approval across sessions. An approve must name the
// digest when more than one approval is pending.
func (s *Server) decideApproval(ans approvalAnswer, callID, digest string) (int, error) {
	approve := ans.Approved
	s.mu.Lock()
	sessions := make([]*sessionState, 0, len(s.sessions))
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	var all []*pendingApproval
	for _, ss := range sessions {
		ss.mu.Lock()
		for _, pa := range ss.pending {
			if (digest == "" || sameDigest(pa.params.Digest, digest)) && (callID == "" || pa.params.CallID == callID) {
				all = append(all, pa)
			}
		}
		ss.mu.Unlock()
	}
	switch {
	case len(all) == 0 && !approve:
		return 0, nil // nothing to deny: done
	case len(all) == 0:
		return 0, invalidParams("no pending approval matches")
	case len(all) > 1 && approve:
		return 0, invalidParams("%d approvals are pending: name the digest to approve", len(all))
	}
	for _, pa := range all {
		pa.resolve(ans)
	}
	return len(all), nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding %T: %v", v, err))
	}
	return b
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
