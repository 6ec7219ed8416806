package host

import (
	"errors"
	"fmt"
)

// ErrNoSession: an operation named a session that does not exist (or an
// id that cannot name one).
var ErrNoSession = errors.New("no such session")

// ErrAuthRequired: the runtime has no credentials for the provider (a
// Runtime.NewAgent error wraps it). A dialect asks its client to log in
// (ACP's auth_required) rather than reporting a failure.
var ErrAuthRequired = errors.New("authentication required")

// InputError is an operation refused because of what its caller asked:
// an entry, a run or a title that does not fit. Nothing was changed; the
// message says what to ask instead. The dialects answer it as a bad
// request (JSON-RPC invalid params).
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

// inputErrorf returns an *InputError with a formatted message.
func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// AgentError is a failure to build a session's agent (Runtime.NewAgent):
// its configuration, credentials or tools.
type AgentError struct{ Err error }

func (e *AgentError) Error() string { return "build agent: " + e.Err.Error() }

func (e *AgentError) Unwrap() error { return e.Err }

// ErrClosed: the session is closed, or being closed, at a client's
// request; it is opened again only when a client asks (a resume, a
// load).
var ErrClosed = errors.New("session is closed")

// ErrReleased: the registry released the session by itself (idle, or to
// make room for another); a request naming it opens it again.
var ErrReleased = errors.New("session was released")

// ErrNotOpen: the registry does not hold the session open (it may still
// be on disk).
var ErrNotOpen = errors.New("session is not open")

// BusyError is an operation refused because the session has an activity
// (a run, a rewind) that it must not overlap.
type BusyError struct {
	SessionID string
	// Holder is the activity: the front door's run, or a *Hold.
	Holder Activity
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("session %s is busy: wait until its run or rewind has ended", e.SessionID)
}

// LimitError is a session refused because the registry holds as many as
// it may and every one of them is busy.
type LimitError struct{ Open int }

func (e *LimitError) Error() string {
	return fmt.Sprintf("%d sessions are open and every one has a run: cancel a run, or close a session", e.Open)
}
