package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.lsp.dev/protocol"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/tools"
)

// maxApprovalMessage bounds the window/showMessageRequest fallback: a
// stock client shows the message as plain text, and octet sends only a
// request that fits whole. A larger one is refused (preview_too_large),
// never cut: an approval never shows less than what will run.
const maxApprovalMessage = 2000

// confirmParams are the params of octet/confirmEffect: the host's view
// of the pending approval.
type confirmParams = host.ApprovalView

// approverFunc confirms one effect; the server binds one per session.
type approverFunc func(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error)

var _ tools.Approver = approverFunc(nil)

// Confirm implements tools.Approver.
func (f approverFunc) Confirm(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
	return f(ctx, req)
}

// approverFor returns the session's approver: it asks the client and
// waits for the first of an answer, the timeout, the expiry of the intent
// or the cancellation of the run.
func (s *Server) approverFor(ss *host.OpenSession) approverFunc {
	return func(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
		return s.confirm(ctx, ss, req, team.Snapshot{})
	}
}

// confirm asks the client to approve req in session ss; a delegated
// child's call names child (Path "" for the session's own agent). The
// one deadline is the sooner of the server's approval timeout and the
// broker's expiry, stated to the client as expiresAt and recorded as
// approval_expired when it passes.
func (s *Server) confirm(ctx context.Context, ss *host.OpenSession, req tools.ConfirmRequest, child team.Snapshot) (tools.Approval, error) {
	view := ss.ViewOf(req)
	if child.Path != "" {
		// A stock client shows only the title: it names the child too.
		view.Title = child.Path + ": " + view.Title
		view.AgentPath, view.ChildSessionID = child.Path, child.SessionID
	}
	pa, err := ss.AddPending(ctx, view, s.opts.ApprovalTimeout)
	if err != nil {
		s.log.Warn("approval expired before it could be asked", "call", view.CallID)
		return tools.Approval{Digest: req.Digest}, err
	}
	defer ss.RemovePending(pa)
	ss.Asking(pa) // askApproval below sends it
	run := runOf(ss.Busy())
	if run != nil && run.id == view.RunID && child.Path == "" {
		// The events before the call (its text, tool_started) go
		// first, so the client can show the approval in its place.
		run.started.Await(pa.Context(), view.CallID)
	}
	var cancelled <-chan struct{}
	if run != nil {
		cancelled = run.cancelled
		run.awaitApproval(view.CallID, "Waiting for approval: "+host.Clip(firstLine(view.Title), 60))
	}
	go s.askApproval(pa.Context(), ss, pa)
	ans, err := pa.Wait(cancelled)
	s.approvalSettled(ss.ID(), run, req, pa.View.ExpiresAt, ans, err)
	return ans, err
}

// approvalSettled logs how an approval ended and tells the run's
// progress what comes next.
func (s *Server) approvalSettled(sessionID string, run *runState, req tools.ConfirmRequest, deadline time.Time, ans tools.Approval, err error) {
	callID := req.Intent.CallID
	next := "Thinking"
	switch {
	case err == nil:
		s.log.Info("approval answered", "session", sessionID, "call", callID, "approved", ans.Approved, "forSession", ans.ForSession)
		if ans.Approved {
			next = toolMessage(req.Intent.Tool, bytes.NewBuffer(req.Intent.Arguments))
		}
	case errors.Is(err, tools.ErrApprovalExpired):
		s.log.Warn("approval expired unanswered", "session", sessionID, "call", callID, "expiresAt", deadline)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return // the run was cancelled: its progress ends with it
	}
	// Otherwise the request was refused without asking (too large).
	if run != nil {
		run.approvalDone(callID, next)
	}
}

// askApproval sends the request the client can show and resolves pa from
// its answer. A failed or timed-out request resolves nothing (the
// approver's own deadline decides). The caller has counted the request in
// pa.inFlight.
func (s *Server) askApproval(ctx context.Context, ss *host.OpenSession, pa *host.PendingApproval) {
	defer ss.AskEnded(pa)
	s.mu.Lock()
	confirm := s.caps.confirmEffect
	s.mu.Unlock()
	timeout := time.Until(pa.View.ExpiresAt)
	if confirm {
		raw, err := s.call(ctx, timeout, "octet/confirmEffect", mustJSON(pa.View))
		if err != nil {
			s.approvalFailed(pa, "octet/confirmEffect", err)
			return
		}
		pa.Resolve(s.confirmAnswer(pa, raw))
		return
	}
	// A stock client shows only this message: it must carry what will
	// change (the command in detail, the diff of an edit or write), whole.
	msg := fallbackApprovalMessage(pa.View, ss.Session())
	if len(msg) > maxApprovalMessage {
		s.log.Warn("approval too large for window/showMessageRequest; refused", "call", pa.View.CallID, "bytes", len(msg))
		s.notify("window/showMessage", &protocol.ShowMessageParams{
			Type: protocol.MessageTypeWarning,
			Message: fmt.Sprintf("octet refused %s without asking: it is %d bytes, more than this editor's approval prompt shows whole (%d). "+
				"The model was told to split it; an octet editor plugin (octet/confirmEffect) shows large changes whole.", pa.View.Title, len(msg), maxApprovalMessage),
		})
		pa.Refuse(fmt.Errorf("window/showMessageRequest holds %d bytes, the request needs %d: %w", maxApprovalMessage, len(msg), tools.ErrPreviewTooLarge))
		return
	}
	raw, err := s.call(ctx, timeout, "window/showMessageRequest", &protocol.ShowMessageRequestParams{
		Type:    protocol.MessageTypeWarning,
		Message: msg,
		Actions: fallbackActions(pa.View),
	})
	if err != nil {
		s.approvalFailed(pa, "window/showMessageRequest", err)
		return
	}
	var item *struct {
		Title string `json:"title"`
	}
	if json.Unmarshal(raw, &item) != nil || item == nil {
		pa.Resolve(tools.Approval{})
		return
	}
	pa.Resolve(fallbackAnswer(item.Title))
}

// fallbackApprovalMessage is the whole window/showMessageRequest text of
// an approval: which session asks (title, id, directory), the title, the
// file the call changes (absolute), then the detail and the diff. A stock
// client shows nothing else, and an editor may run several sessions. The
// directory, like the file, is named on one line (quoted when it would
// not show as itself): its name may come from a repository.
func fallbackApprovalMessage(p confirmParams, sess *host.Session) string {
	who := "octet session " + p.SessionID
	if title := sess.Title(); title != "" {
		who = fmt.Sprintf("octet session %q (%s)", title, p.SessionID)
	}
	msg := who + " in " + tools.ShownPath(sess.Cwd()) + " wants to run " + p.Tool + ": " + p.Title
	if p.Path != "" {
		msg += "\nFile: " + tools.ShownPath(p.Path)
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
func (s *Server) approvalFailed(pa *host.PendingApproval, method string, err error) {
	if isWireError(err) {
		s.log.Warn("client answered the approval with an error; denied", "method", method, "call", pa.View.CallID, "error", err)
		pa.Resolve(tools.Approval{})
		return
	}
	s.log.Warn("approval request got no answer", "method", method, "call", pa.View.CallID, "error", err)
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
