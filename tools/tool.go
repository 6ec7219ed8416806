// Package tools defines the Tool interface, the host registry that decides
// which tools a run may advertise and execute, the effect broker that admits
// each exact call, and octet's built-in tools (read, search, edit, write,
// apply_patch, bash).
//
// A tool never decides its own authority from the model's arguments: the
// host-owned Classify method maps the exact parsed call to an Effect, and the
// broker admits, confirms or denies that effect under the active policy.
// Tool failures the model should see are Results with IsError set; a Go error
// from Execute means the tool itself could not run.
package tools

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/octet-agent/octet/changes"
)

// Effect is the authoritative classification of one exact tool call.
// The zero value is Unknown, which every policy denies.
type Effect int

// The effect classes, from the agent runtime contract.
const (
	Unknown           Effect = iota // not classified; always denied
	Pure                            // no observable effect outside the call
	WorkspaceRead                   // reads inside the workspace
	WorkspaceMutation               // changes files inside the workspace
	HostRead                        // reads outside the workspace
	HostMutation                    // changes files outside the workspace
	HostProcess                     // starts a process with host authority
	Network                         // reaches the network
	Delegation                      // starts or drives a child agent
	Extension                       // runs executable extension code
)

var effectNames = [...]string{
	Unknown:           "unknown",
	Pure:              "pure",
	WorkspaceRead:     "workspace_read",
	WorkspaceMutation: "workspace_mutation",
	HostRead:          "host_read",
	HostMutation:      "host_mutation",
	HostProcess:       "host_process",
	Network:           "network",
	Delegation:        "delegation",
	Extension:         "extension",
}

// String returns the snake_case wire name of e ("workspace_read").
func (e Effect) String() string {
	if e < 0 || int(e) >= len(effectNames) {
		return "unknown"
	}
	return effectNames[e]
}

// MarshalText encodes e as its wire name.
func (e Effect) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// Concurrency is a tool's static statement about overlapping calls.
// The zero value is Sequential.
type Concurrency int

const (
	// Sequential calls are barriers: they never overlap any other call.
	Sequential Concurrency = iota
	// Parallel calls may overlap other Parallel calls when each one is also
	// exactly classified as Pure, WorkspaceRead or HostRead and admitted.
	Parallel
)

// ReplaySafety says whether an unresolved call found after a crash may be
// executed again. The zero value is ReplayUnsafe.
type ReplaySafety int

const (
	// ReplayUnsafe calls become indeterminate errors after a crash.
	ReplayUnsafe ReplaySafety = iota
	// ReplaySafe calls may be re-executed after a crash when their exact
	// classification is also Pure or WorkspaceRead.
	ReplaySafe
)

// Invocation is what a tool receives for one admitted call. It never carries
// a grant or any approval detail.
type Invocation struct {
	// CallID is the provider's call id.
	CallID string
	// Arguments is the call's JSON arguments, already schema-validated.
	Arguments json.RawMessage
	// Progress, when non-nil, receives bounded incremental output for
	// presentation (tool_output events). It is never persisted.
	Progress func(text string)
	// Intent, when set, keeps the changes the call is about to make
	// durably; edit and write call it (through recordIntent) after
	// staging their images and before the effect.
	Intent func(in changes.Intent) error
	// ReadOnly reports that the broker admitted the call as a read (a
	// shell command on the read-only allowlist): bash takes no workspace
	// checkpoint for it.
	ReadOnly bool
	// Sandbox is the OS sandbox the broker decided the call runs under
	// (shell calls); the zero value runs it unsandboxed.
	Sandbox CallSandbox
	// Principal is the agent the call is made for (the intent's; each
	// delegated child has its own), so that what one agent read is not
	// taken for what another did (FileTracker).
	Principal string
}

// Result is a tool's model-visible outcome.
type Result struct {
	// Text is the model-visible content, already bounded by the host limit.
	Text string `json:"text"`
	// IsError marks a failure the model should see and react to.
	IsError bool `json:"isError,omitempty"`
	// Details holds structured, secret-free metadata (bash exit code, spill
	// flags, paths read or modified). It is persisted with the result.
	Details map[string]any `json:"details,omitempty"`
	// Changes lists the files the call changed, with their diffs and the
	// images kept in the change store (edit, write); nil for calls that
	// changed no file.
	Changes []changes.Record `json:"changes,omitempty"`
	// Commit, when a tool sets it, is called once by the run loop: with
	// true after the result was durably appended to the session whole,
	// with false when it was not (cut by the result limit, not saved, the
	// run ended first). A tool that hands out something consumable (a
	// leased page of messages) commits or restores it here. It is never
	// persisted.
	Commit func(durable bool) `json:"-"`
	// CannotUndo states what a rewind of this call cannot take back (a
	// checkpointed bash call: network effects, processes, files outside
	// the workspace or over the snapshot limit); nil for other calls.
	CannotUndo []string `json:"cannotUndo,omitempty"`
	// Images are images the result gives the model (view_image): the
	// run keeps them in the image store and the session names them.
	Images []Image `json:"-"`
	// Plan, set by update_plan, is the session's plan after the call
	// (also in Details): the run announces it once the result is
	// durable. It is never persisted itself.
	Plan *Plan `json:"-"`
}

// Tool is one callable capability. Implementations must be safe for
// concurrent use when Concurrency reports Parallel.
type Tool interface {
	// Name is the model-visible name, unique within a host.
	Name() string
	// Description is the model-visible Markdown description.
	Description() string
	// Schema is the JSON schema (draft 2020-12) of the arguments object.
	Schema() json.RawMessage
	// Concurrency is the static overlap statement.
	Concurrency() Concurrency
	// ReplaySafety is the static crash-replay statement.
	ReplaySafety() ReplaySafety
	// Classify maps the exact parsed arguments to an Effect. It must not
	// perform the effect. An error means the arguments are invalid; the
	// call is then denied with invalid_tool_arguments.
	Classify(args json.RawMessage) (Effect, error)
	// Execute performs an admitted call. Failures the model should see are
	// returned as a Result with IsError; a Go error means the tool could
	// not run at all and is reported to the model as a bounded error.
	Execute(ctx context.Context, inv Invocation) (Result, error)
}

// Warmer is implemented by tools with background work their next call
// needs (the bash tool's first snapshot of the workspace). WarmUp starts
// it now rather than on the tool's own schedule: the process has just
// sent a model request and waits for the answer, with nothing better to
// do. It returns at once and never performs an effect.
type Warmer interface {
	WarmUp()
}

// Previewer is implemented by tools whose calls can be shown to a person
// before they run (an approval prompt). Preview must not perform the effect.
type Previewer interface {
	// Preview describes the exact call: a one-line title, a bounded
	// detail (the bash command, say) and, for file changes, a unified diff.
	Preview(ctx context.Context, args json.RawMessage) (Preview, error)
}

// ErrPreviewTooLarge is returned (possibly wrapped) by a Previewer whose
// call cannot be shown whole, or by an Approver whose display cannot hold
// the whole request. The broker then refuses the call with
// ReasonPreviewTooLarge: an approval never shows less than what will run.
var ErrPreviewTooLarge = errors.New("the call is too large to be shown whole for approval")

// ErrApprovalExpired is returned (wrapped) by an Approver whose own
// deadline for the person's answer, the one it showed as the request's
// expiry, passed before an answer came. The broker then refuses the call
// with ReasonApprovalExpired, as when ConfirmRequest.ExpiresAt passes.
var ErrApprovalExpired = errors.New("the approval request expired unanswered")

// Preview is what an approval prompt shows for one call.
type Preview struct {
	Title  string `json:"title"`
	Detail string `json:"detail,omitempty"`
	Diff   string `json:"diff,omitempty"`
	// Binding names the state the diff was computed against beyond the
	// call's arguments (an editor document version); when set, the
	// approval digest covers it, so an approval answers for exactly that
	// state. It is not shown.
	Binding string `json:"binding,omitempty"`
}
