package server

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/tools"
)

// A run is driven through the small runHandle seam below; runtime.go
// binds it to the agent. Keeping the protocol code on it keeps it
// readable.

// runHandle is one run.
type runHandle interface {
	ID() string
	// Next blocks for the run's next event; ok is false once the event
	// stream has ended (after run_finished).
	Next() (ev wireEvent, ok bool)
	Steer(text string) (messageID string, err error)
	FollowUp(text string) (messageID string, err error)
	FinishNow(text string) error
	// Cancel is the level-triggered abort; it is idempotent.
	Cancel()
	// Wait blocks until the run has settled.
	Wait() runResult
}

// wireEvent is one agent event ready for the wire.
type wireEvent struct {
	// Kind is the snake_case event kind.
	Kind string
	// Seq is the event's position in its run, from 1 without gaps.
	Seq int64
	// Channel is an output_delta's channel ("text" or "reasoning").
	Channel string
	// Body is the event object, fields beside "kind". An event offered
	// to a deliver function has none yet: appendBody encodes it then.
	Body json.RawMessage
	// event is the agent's event, encoded by appendBody when Body is nil.
	event agent.Event
}

// appendBody appends the event object (Body, or its encoding) to dst.
func (ev *wireEvent) appendBody(dst []byte) []byte {
	if ev.Body != nil || ev.event == nil {
		return append(dst, ev.Body...)
	}
	b, err := agent.AppendEvent(dst, ev.event)
	if err != nil {
		// A broken invariant: say so on the wire rather than drop the event.
		return append(dst, mustJSON(map[string]string{"kind": ev.Kind, "error": err.Error()})...)
	}
	return b
}

// runResult is how a run ended.
type runResult struct {
	Outcome string
	Usage   any
	Err     error
}

// approverFunc asks the editor to confirm one effect; the server binds one
// per session.
type approverFunc func(ctx context.Context, req approvalRequest) (approvalAnswer, error)

// approvalAnswer is the editor's decision on one approval.
type approvalAnswer struct {
	// Approved is true for approve and approve_for_session with the
	// request's digest.
	Approved bool
	// Digest is the digest the answer is for.
	Digest string
	// ForSession asks for a standing approval (approve_for_session).
	ForSession bool
	// Reason is the person's reason for a denial (client text).
	Reason string
}

// approvalRequest is the editor-facing view of one effect confirmation.
type approvalRequest struct {
	RunID     string
	CallID    string
	Tool      string
	Effect    string
	Title     string
	Detail    string
	Diff      string
	Digest    string
	ExpiresAt time.Time
	// Scope is what approve_for_session would cover (nil: approve once).
	Scope *tools.ApprovalScope
	// Arguments are the call's canonical arguments (for progress text only;
	// never sent to the client beyond what title/detail/diff show).
	Arguments json.RawMessage
	// AgentPath and ChildSessionID name the delegated child whose call
	// this is ("" for the session's own agent).
	AgentPath, ChildSessionID string
}

// Errors a run reports for the server to map onto protocol errors.
var (
	// errBusy: a prompt while the session already has a run.
	errBusy = errors.New("session already has an active run")
	// errRunEnded: a control sent to a run that has ended.
	errRunEnded = errors.New("run has ended")
)
