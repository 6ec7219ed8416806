package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Stable reason codes of a ToolPolicyDecision. Denial codes are evidence
// for the host and the editor; the model only ever sees the static text
// DenialText returns for them.
const (
	// ReasonPolicyAdmitted: the policy admits the effect without asking.
	ReasonPolicyAdmitted = "policy_admitted"
	// ReasonReadOnlyCommand: a shell call on the read-only allowlist was
	// auto-approved under Controlled.
	ReasonReadOnlyCommand = "read_only_command"
	// ReasonApproved: the approver confirmed the exact intent digest.
	ReasonApproved = "approved"
	// ReasonApprovedForSession: the approver confirmed the exact intent
	// digest and granted a standing approval of the same tool and scope
	// (the decision's RuleID).
	ReasonApprovedForSession = "approved_for_session"
	// ReasonSessionRule: a standing approval (the decision's RuleID)
	// admitted the call without asking.
	ReasonSessionRule = "session_rule"

	// ReasonUnknownTool: no tool of that name is in the host.
	ReasonUnknownTool = "unknown_tool"
	// ReasonInvalidArguments: the arguments failed canonicalization, the
	// schema or the tool's classification; nothing else saw the call.
	ReasonInvalidArguments = "invalid_tool_arguments"
	// ReasonUnknownEffect: the call classified as Unknown (every policy).
	ReasonUnknownEffect = "unknown_effect"
	// ReasonPolicyDenied: the active policy denies the effect class.
	ReasonPolicyDenied = "policy_denied"
	// ReasonCapabilityDisabled: an effective capability gate
	// (allow_process, allow_shell) is off.
	ReasonCapabilityDisabled = "capability_disabled"
	// ReasonApprovalDenied: the approver denied, answered for another
	// digest, or failed.
	ReasonApprovalDenied = "approval_denied"
	// ReasonApprovalExpired: no answer before the confirmation expired.
	ReasonApprovalExpired = "approval_expired"
	// ReasonApprovalUnavailable: confirmation is required but the host
	// installed no Approver.
	ReasonApprovalUnavailable = "approval_unavailable"
	// ReasonHookDenied: a trusted before_tool_call hook vetoed the call.
	ReasonHookDenied = "secondary_hook_denied"
	// ReasonCommitDenied: the reservation could not be committed (grant
	// expired, replayed, revoked, or the admission already used).
	ReasonCommitDenied = "effect_reservation_commit_denied"
	// ReasonPreviewTooLarge: the call needs approval but cannot be shown
	// whole (a bash command or diff over the prompt's bounds, or more than
	// the approver's display can hold); it was refused before anyone was
	// asked, because an approval never shows less than what will run.
	ReasonPreviewTooLarge = "preview_too_large"
	// ReasonCancelled: the run was cancelled before the effect committed.
	ReasonCancelled = "cancelled"
)

// Decision values of a ToolPolicyDecision.
const (
	// DecisionAllowed: hooks passed and the reservation committed.
	DecisionAllowed = "allowed"
	// DecisionDenied: the call did not and will not run.
	DecisionDenied = "denied"
)

// denialTexts are the only model-visible texts of a denial: static, short,
// and free of hook, parser, broker, argument and approval details.
var denialTexts = map[string]string{
	ReasonUnknownTool:         "Tool call rejected: no tool with this name is available.",
	ReasonInvalidArguments:    "Tool call rejected: the arguments are not valid for this tool.",
	ReasonUnknownEffect:       "Tool call denied: its effect could not be classified.",
	ReasonPolicyDenied:        "Tool call denied by the effect policy.",
	ReasonCapabilityDisabled:  "Tool call denied: this capability is disabled.",
	ReasonApprovalDenied:      "Tool call was not approved.",
	ReasonApprovalExpired:     "Tool call was not approved in time.",
	ReasonApprovalUnavailable: "Tool call requires approval, which is not available here.",
	ReasonHookDenied:          "Tool call denied by the host.",
	ReasonCommitDenied:        "Tool call denied: its admission could not be committed.",
	ReasonCancelled:           "Tool call cancelled before it ran.",
	ReasonPreviewTooLarge:     "Tool call refused before approval: it is too long to be shown whole for review (a bash command over 8 KiB or a diff over 256 KiB as displayed, or more than this editor's approval prompt can show). Split it into smaller calls.",
}

// DenialText returns the static model-visible text for a denial reason.
// Unrecognised codes get a generic text; it never echoes the code's input.
func DenialText(reason string) string {
	if t, ok := denialTexts[reason]; ok {
		return t
	}
	return "Tool call denied."
}

// ToolPolicyDecision is the secret-safe evidence of one call's admission,
// emitted (tool_policy_decision) after tool_started and before
// tool_finished. An "allowed" decision exists only once every trusted hook
// passed and the reservation committed.
type ToolPolicyDecision struct {
	// CallID is the provider call id the decision is for.
	CallID string `json:"callId"`
	// Decision is "allowed" or "denied"; empty means not final yet.
	Decision string `json:"decision"`
	// Reason is a stable code (the Reason* constants).
	Reason string `json:"reason,omitempty"`
	// Effect is the host classification, when the call got that far.
	Effect Effect `json:"effect,omitempty"`
	// EffectiveToolPolicy is the snapshot in force for the decision.
	EffectiveToolPolicy EffectiveToolPolicy `json:"effectiveToolPolicy"`
	// RuleID names the standing approval that admitted an allowed call
	// (ReasonSessionRule) or was granted with it (ReasonApprovedForSession).
	RuleID string `json:"ruleId,omitempty"`
	// Sandbox is the OS sandbox an allowed shell call runs under
	// (CallSandbox.Label: "workspace-write, no network", "none").
	Sandbox string `json:"sandbox,omitempty"`
	// Note is the person's reason for an approval denial, already bounded
	// and made visible; DenialResult passes it to the model. It is not
	// part of the evidence encoding.
	Note string `json:"-"`
}

// Final reports whether d is a finished decision (allowed or denied).
func (d ToolPolicyDecision) Final() bool {
	return d.Decision == DecisionAllowed || d.Decision == DecisionDenied
}

// Denied reports whether d is a final denial.
func (d ToolPolicyDecision) Denied() bool { return d.Decision == DecisionDenied }

// DenialResult returns the model-visible paired error for a denial: the
// static text for its reason (followed by the person's Note, if any),
// IsError set, and the reason code in Details.
func (d ToolPolicyDecision) DenialResult() Result {
	text := DenialText(d.Reason)
	if d.Note != "" {
		text += " The user's reason: " + d.Note
	}
	return Result{
		Text:    text,
		IsError: true,
		Details: map[string]any{"policy_denial": d.Reason},
	}
}

// Source says where an effective setting came from.
type Source string

// Setting sources, lowest precedence first.
const (
	SourceDefault       Source = "default"
	SourceConfig        Source = "config"
	SourceProjectConfig Source = "project_config"
	SourceEnv           Source = "env"
	SourceFlag          Source = "flag"
	// SourceSession: set for one session by its editor
	// (octet/session/setPolicy); it can only tighten the launch value.
	SourceSession Source = "session"
)

// Setting is one effective value and its source, encoded as
// {"value": ..., "source": ...}.
type Setting[T any] struct {
	// Value is the effective value.
	Value T `json:"value"`
	// Source is the layer that set it.
	Source Source `json:"source"`
}

// ShellPathValue is the value of the shell_path setting: only the selection
// class that ResolveShell reported, never the path.
type ShellPathValue struct {
	Selection ShellSelection `json:"selection"`
}

// MarshalJSON encodes the selection, replacing anything that is not one of
// the five selection names with "unavailable" so a path can never leak.
func (v ShellPathValue) MarshalJSON() ([]byte, error) {
	sel := v.Selection
	switch sel {
	case ShellConfigured, ShellSystemBash, ShellPathBash, ShellShFallback, ShellUnavailable:
	default:
		sel = ShellUnavailable
	}
	return json.Marshal(struct {
		Selection ShellSelection `json:"selection"`
	}{sel})
}

// EffectiveToolPolicy is the snapshot of every setting that decides what a
// tool call may do, each with its source. It is secret-free and path-free:
// it is sent to editors (octet/policy, tool_policy_decision) and persisted.
type EffectiveToolPolicy struct {
	// EffectPolicy is the admission profile.
	EffectPolicy Setting[Policy] `json:"effect_policy"`
	// WorkspaceConfinement is true when file tools accept only
	// workspace paths (allow_external_paths = false).
	WorkspaceConfinement Setting[bool] `json:"workspace_confinement"`
	// AllowEdit and AllowWrite say whether edit and write are in the host.
	AllowEdit  Setting[bool] `json:"allow_edit"`
	AllowWrite Setting[bool] `json:"allow_write"`
	// AllowProcess and AllowShell gate HostProcess calls (the broker
	// denies them with capability_disabled when off) and the bash tool.
	AllowProcess Setting[bool] `json:"allow_process"`
	AllowShell   Setting[bool] `json:"allow_shell"`
	// ShellPath is how the bash shell was selected, never its path.
	ShellPath Setting[ShellPathValue] `json:"shell_path"`
	// BashTimeoutMs is the default bash timeout in milliseconds.
	BashTimeoutMs Setting[int64] `json:"bash_timeout_ms"`
	// MaxOutputBytes bounds one bash command's captured output.
	MaxOutputBytes Setting[int64] `json:"max_output_bytes"`
	// AllowRemoteRead says whether remote (network) reads are enabled.
	AllowRemoteRead Setting[bool] `json:"allow_remote_read"`
	// Sandbox is the OS sandbox shell calls run under and what this host
	// enforces (see SandboxValue); a zero value runs every call
	// unsandboxed.
	Sandbox Setting[SandboxValue] `json:"sandbox"`
}

// Product defaults recorded in a default snapshot.
const (
	DefaultBashTimeoutMs  = 120_000
	DefaultMaxOutputBytes = 1 << 20
)

// DefaultToolPolicy returns the snapshot of built-in defaults for p, every
// source "default". Workspace confinement is on except under UnsafeHost
// (where the product allows external paths by default); edit, write,
// process and shell are enabled; remote reads are off; the sandbox is the
// policy's default profile (DefaultSandboxProfile) as far as this host
// enforces it. shell is what
// ResolveShell (the bash tool's own resolver) reported.
func DefaultToolPolicy(p Policy, shell ShellSelection) EffectiveToolPolicy {
	def := func(b bool) Setting[bool] { return Setting[bool]{b, SourceDefault} }
	return EffectiveToolPolicy{
		EffectPolicy:         Setting[Policy]{p, SourceDefault},
		WorkspaceConfinement: def(p != UnsafeHost),
		AllowEdit:            def(true),
		AllowWrite:           def(true),
		AllowProcess:         def(true),
		AllowShell:           def(true),
		ShellPath:            Setting[ShellPathValue]{ShellPathValue{shell}, SourceDefault},
		BashTimeoutMs:        Setting[int64]{DefaultBashTimeoutMs, SourceDefault},
		MaxOutputBytes:       Setting[int64]{DefaultMaxOutputBytes, SourceDefault},
		AllowRemoteRead:      def(false),
		Sandbox:              HostSandbox(DefaultSandboxProfile(p), SourceDefault),
	}
}

// version returns a short stable identifier of the snapshot, used in the
// intent's policy version so a grant never outlives a settings change.
func (e EffectiveToolPolicy) version() string {
	b, err := json.Marshal(e)
	if err != nil { // only an invalid Policy value; still unique per value
		b = fmt.Appendf(nil, "%d", int(e.EffectPolicy.Value))
	}
	sum := sha256.Sum256(b)
	return e.EffectPolicy.Value.String() + "/" + hex.EncodeToString(sum[:8])
}
