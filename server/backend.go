package server

import (
	"encoding/json"
	"errors"

	"github.com/octet-agent/octet/agent"
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

// Errors a run reports for the server to map onto protocol errors.
var (
	// errBusy: a prompt while the session already has a run.
	errBusy = errors.New("session already has an active run")
	// errRunEnded: a control sent to a run that has ended.
	errRunEnded = errors.New("run has ended")
)
