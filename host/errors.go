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
