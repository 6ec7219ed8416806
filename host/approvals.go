package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/octet-agent/octet/tools"
)

// ApprovalView is a call an open session waits for a person to approve,
// as a front door shows it: what will run (the broker's preview, bound
// to Digest), who asks and until when.
type ApprovalView struct {
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
	// RuleScope is what a standing approval of the call would cover;
	// absent, the call can only be approved once.
	RuleScope *tools.ApprovalScope `json:"ruleScope,omitempty"`
	// AgentPath and ChildSessionID name the delegated child agent whose
	// call this is (absent for the session's own agent); RunID is then
	// the child's run.
	AgentPath      string `json:"agentPath,omitempty"`
	ChildSessionID string `json:"childSessionId,omitempty"`
	// Path is the absolute file the call changes ("" for none), for a
	// client that shows only a message.
	Path string `json:"-"`
}

// ViewOf is the view of req asked in the session. Its ExpiresAt is the
// broker's expiry until AddPending sets the approval's deadline.
func (o *OpenSession) ViewOf(req tools.ConfirmRequest) ApprovalView {
	in := req.Intent
	return ApprovalView{
		SessionID: o.id, RunID: in.RunID, CallID: in.CallID, Tool: in.Tool,
		Effect: in.Effect.String(), Title: req.Title, Detail: req.Detail, Diff: req.Diff,
		Digest: req.Digest, ExpiresAt: req.ExpiresAt, RuleScope: req.Scope,
		Path: CallPath(in.Arguments, o.s.Cwd()),
	}
}

// PendingApproval is one approval an open session waits for. The first
// answer wins, whoever gives it (Resolve, Refuse); Wait returns it.
type PendingApproval struct {
	// View is what the approval shows; its ExpiresAt is the deadline.
	View ApprovalView

	created time.Time
	// ctx ends at the deadline, when the asker stops waiting, or when
	// the session cancels its approvals; every request asking for this
	// approval is withdrawn then.
	ctx    context.Context
	cancel context.CancelCauseFunc
	once   sync.Once
	answer chan tools.Approval // buffered 1
	// refusal, set before a refusing answer is sent, is why the request
	// could not be put to the person at all (tools.ErrPreviewTooLarge).
	refusal error

	// inFlight counts the requests for this approval the client has not
	// answered yet; resent records that a reattach has sent it again.
	// Both are guarded by the session's lock.
	inFlight int
	resent   bool
}

// Context ends when the approval no longer waits: the requests asking
// for it are withdrawn then.
func (p *PendingApproval) Context() context.Context { return p.ctx }

// Resolve answers the approval, unless it was answered already.
func (p *PendingApproval) Resolve(ans tools.Approval) {
	p.once.Do(func() { p.answer <- ans })
}

// Refuse answers "no" because the request cannot be shown; err says why
// (Wait returns it).
func (p *PendingApproval) Refuse(err error) {
	p.once.Do(func() { p.refusal = err; p.answer <- tools.Approval{} })
}

// Wait waits for the first of the approval's answer, cancelled closing
// (the run was cancelled) and the end of its context. The answer is
// bound to the view's digest; a refusal is its error; the deadline
// passing is tools.ErrApprovalExpired; cancellation is context.Canceled.
func (p *PendingApproval) Wait(cancelled <-chan struct{}) (tools.Approval, error) {
	no := tools.Approval{Digest: p.View.Digest}
	select {
	case ans := <-p.answer:
		if p.refusal != nil {
			return no, p.refusal
		}
		ans.Digest = p.View.Digest
		return ans, nil
	case <-cancelled:
		return no, context.Canceled
	case <-p.ctx.Done():
		if errors.Is(p.ctx.Err(), context.DeadlineExceeded) {
			return no, fmt.Errorf("call %s: %w", p.View.CallID, tools.ErrApprovalExpired)
		}
		return no, p.ctx.Err()
	}
}

// resendableLocked reports whether a reattaching client is asked for p
// again, and counts the request it will be sent (Reattachment.Resend).
// The caller holds the session's lock.
func (p *PendingApproval) resendableLocked() bool {
	if p.resent && p.inFlight > 0 {
		return false
	}
	p.resent = true
	p.inFlight++
	return true
}

// pendingKey is what identifies a pending approval in its session.
func pendingKey(v ApprovalView) string { return v.RunID + "\x00" + v.CallID + "\x00" + v.Digest }

// AddPending registers the approval of view the session now waits for,
// with its one deadline: the sooner of timeout from now (≤ 0: none) and
// the broker's expiry (view.ExpiresAt, zero: none). A deadline already
// passed is tools.ErrApprovalExpired, and nothing is registered. The
// approval's context ends at the deadline, when ctx ends, or when the
// session cancels its approvals; the caller removes it with
// RemovePending once it no longer waits.
func (o *OpenSession) AddPending(ctx context.Context, view ApprovalView, timeout time.Duration) (*PendingApproval, error) {
	now := time.Now()
	view.ExpiresAt = approvalDeadline(now, timeout, view.ExpiresAt)
	if !view.ExpiresAt.IsZero() && !now.Before(view.ExpiresAt) {
		return nil, fmt.Errorf("call %s: %w", view.CallID, tools.ErrApprovalExpired)
	}
	p := &PendingApproval{View: view, created: now, answer: make(chan tools.Approval, 1)}
	ctx, cancelCause := context.WithCancelCause(ctx)
	stopDeadline := context.CancelFunc(func() {})
	if !view.ExpiresAt.IsZero() {
		ctx, stopDeadline = context.WithDeadline(ctx, view.ExpiresAt)
	}
	p.ctx = ctx
	p.cancel = func(cause error) { cancelCause(cause); stopDeadline() }
	o.mu.Lock()
	if o.closing {
		p.cancel(ErrClosed)
	}
	o.pending[pendingKey(view)] = p
	o.mu.Unlock()
	return p, nil
}

// approvalDeadline is the one deadline of an approval asked at now: the
// sooner of now+timeout (when timeout > 0) and the broker's expiry (when
// it has one); zero for none.
func approvalDeadline(now time.Time, timeout time.Duration, brokerExpiry time.Time) time.Time {
	var d time.Time
	if timeout > 0 {
		d = now.Add(timeout)
	}
	if !brokerExpiry.IsZero() && (d.IsZero() || brokerExpiry.Before(d)) {
		d = brokerExpiry
	}
	if d.IsZero() {
		return d
	}
	return d.UTC()
}

// RemovePending forgets p and ends its context: it no longer waits.
func (o *OpenSession) RemovePending(p *PendingApproval) {
	o.mu.Lock()
	if o.pending[pendingKey(p.View)] == p {
		delete(o.pending, pendingKey(p.View))
	}
	o.mu.Unlock()
	p.cancel(nil)
}

// CancelPending ends the context of every approval the session waits
// for, with cause.
func (o *OpenSession) CancelPending(cause error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cancelPendingLocked(cause)
}

func (o *OpenSession) cancelPendingLocked(cause error) {
	for _, p := range o.pending {
		p.cancel(cause)
	}
}

// Asking counts one more request for p sent to the client; AskEnded
// counts it answered (or given up).
func (o *OpenSession) Asking(p *PendingApproval) {
	o.mu.Lock()
	p.inFlight++
	o.mu.Unlock()
}

// AskEnded counts one request for p (Asking, Reattachment.Resend) as
// answered or given up.
func (o *OpenSession) AskEnded(p *PendingApproval) {
	o.mu.Lock()
	p.inFlight--
	o.mu.Unlock()
}

// Pending returns the views of the approvals the session waits for,
// oldest first.
func (o *OpenSession) Pending() []ApprovalView {
	o.mu.Lock()
	defer o.mu.Unlock()
	return Views(o.pendingLocked())
}

// pendingLocked returns the pending approvals, oldest first. The caller
// holds o.mu.
func (o *OpenSession) pendingLocked() []*PendingApproval {
	out := make([]*PendingApproval, 0, len(o.pending))
	for _, p := range o.pending {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *PendingApproval) int { return a.created.Compare(b.created) })
	return out
}

// Views returns the view of each approval.
func Views(pending []*PendingApproval) []ApprovalView {
	views := make([]ApprovalView, 0, len(pending))
	for _, p := range pending {
		views = append(views, p.View)
	}
	return views
}

// matching returns the approvals the session waits for whose digest
// (when given; hex, so any case) and call id (when given) match.
func (o *OpenSession) matching(callID, digest string) []*PendingApproval {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*PendingApproval
	for _, p := range o.pending {
		if (digest == "" || SameDigest(p.View.Digest, digest)) && (callID == "" || p.View.CallID == callID) {
			out = append(out, p)
		}
	}
	return out
}

// SameDigest compares two hex digests; hex is case-insensitive.
func SameDigest(a, b string) bool { return a != "" && strings.EqualFold(a, b) }

// CallPath is the absolute path a call's "path" argument names,
// resolved against cwd ("" when it has none).
func CallPath(args json.RawMessage, cwd string) string {
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
