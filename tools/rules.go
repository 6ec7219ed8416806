package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/octet-agent/octet/internal/fsroot"
)

// This file holds standing approvals ("approve for session"): a person's
// answer that admits later calls of exactly the same tool and scope
// without asking again. The broker alone matches them, from host-derived
// facts (the tool's own ApprovalScope of the canonical arguments), never
// from anything the model states about a call.

// ApprovalScope is exactly what a standing approval covers besides the
// tool and the effect. Two calls share a scope only when every field is
// byte-for-byte equal; nothing is a prefix, a pattern or a directory.
type ApprovalScope struct {
	// Path is the workspace-relative, cleaned path a file tool changes
	// ("a.txt" for "./a.txt" or "a.txt/"). Built-in file tools refuse
	// ".." and symbolic links in every component, so one path names one
	// file.
	Path string `json:"path,omitempty"`
	// Command is the exact command line a shell-channel tool runs.
	Command string `json:"command,omitempty"`
	// TimeoutMs is the call's own timeout_ms (0: the configured default).
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Dir is the absolute directory the command runs in.
	Dir string `json:"dir,omitempty"`
	// Env is a SHA-256 digest of the exact environment and shell the
	// command gets: a rule never covers the same text run differently.
	Env string `json:"envDigest,omitempty"`
}

// ApprovalScoper is implemented by tools whose calls a standing approval
// can cover: ApprovalScope returns the call's exact scope, or an error
// when the call cannot be scoped safely (the person is then asked every
// time). It must not touch what the call would change.
type ApprovalScoper interface {
	ApprovalScope(args json.RawMessage) (ApprovalScope, error)
}

// StandingRule is one standing approval: calls of Tool with Effect and
// exactly Scope are admitted without asking while the rule stands, under
// a policy no stricter than Policy, the one it was granted under.
type StandingRule struct {
	// ID identifies the rule within its session.
	ID string `json:"ruleId"`
	// Tool and Effect are the tool name and the call's classification.
	Tool   string `json:"tool"`
	Effect Effect `json:"effect"`
	// Scope is what the person was shown.
	Scope ApprovalScope `json:"scope"`
	// Policy is the effect policy in force when the rule was granted.
	Policy Policy `json:"policy"`
	// Created is when it was granted.
	Created time.Time `json:"createdAt"`
}

// RuleStore keeps a session's standing rules durably. The server
// implements it over the session ledger. Implementations must be safe for
// concurrent use.
type RuleStore interface {
	// Rules returns the rules in force (granted and not revoked).
	Rules() []StandingRule
	// AddRule records r (ID empty) durably and returns it with its ID.
	AddRule(r StandingRule) (StandingRule, error)
}

// ErrNoScope is returned by ApprovalScope for a call that no standing
// approval may cover.
var ErrNoScope = errors.New("call cannot be covered by a standing approval")

// ruleScope returns the scope a standing rule may cover for this call
// under policy ps, or ok false: the tool has no scope, the call cannot be
// scoped, or the policy asks for every call of its kind one at a time
// (ControlledBashApproval confirms every shell call once).
func (b *Broker) ruleScope(ps *policyState, tool Tool, f callFacts, args json.RawMessage) (ApprovalScope, bool) {
	if b.rules == nil {
		return ApprovalScope{}, false
	}
	sc, ok := tool.(ApprovalScoper)
	if !ok {
		return ApprovalScope{}, false
	}
	switch {
	case f.escalated:
		// An escalation is approved one call at a time.
		return ApprovalScope{}, false
	case f.effect == WorkspaceMutation && !f.shell:
	case f.effect == HostProcess && f.shell && ps.policy == Controlled:
	default:
		return ApprovalScope{}, false
	}
	scope, err := safeScope(sc, args)
	if err != nil {
		b.log.Debug("call not eligible for a standing approval", "tool", tool.Name(), "reason", err)
		return ApprovalScope{}, false
	}
	return scope, true
}

// matchRule returns the standing rule covering the call, if one does:
// same tool, effect and scope, granted under a policy no stricter than
// the current one (a rule never loosens a policy the session moved to).
func (b *Broker) matchRule(ps *policyState, tool string, eff Effect, scope ApprovalScope) (StandingRule, bool) {
	for _, r := range b.rules.Rules() {
		if r.Tool == tool && r.Effect == eff && r.Scope == scope && r.Policy.Valid() && r.Policy.NoLooserThan(ps.policy) {
			return r, true
		}
	}
	return StandingRule{}, false
}

// ruleStands reports whether the rule id is still in force (a revocation
// between admission and commit withdraws the call).
func (b *Broker) ruleStands(id string) bool {
	for _, r := range b.rules.Rules() {
		if r.ID == id {
			return true
		}
	}
	return false
}

func safeScope(sc ApprovalScoper, args json.RawMessage) (s ApprovalScope, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = ApprovalScope{}, fmt.Errorf("approval scope panicked: %v", p)
		}
	}()
	return sc.ApprovalScope(args)
}

// fileScope is the scope of a file tool's call on p: its cleaned
// workspace-relative form. Absolute paths (external paths, or workspace
// paths spelled absolutely) are never covered.
func (c *Config) fileScope(p string) (ApprovalScope, error) {
	if filepath.IsAbs(p) {
		return ApprovalScope{}, fmt.Errorf("%w: absolute path", ErrNoScope)
	}
	rel, err := fsroot.CleanRel(p)
	if err != nil || rel == "." {
		return ApprovalScope{}, fmt.Errorf("%w: path %q", ErrNoScope, p)
	}
	return ApprovalScope{Path: rel}, nil
}

var (
	_ ApprovalScoper = (*EditTool)(nil)
	_ ApprovalScoper = (*WriteTool)(nil)
	_ ApprovalScoper = (*BashTool)(nil)
)

// ApprovalScope implements ApprovalScoper: the edited file.
func (t *EditTool) ApprovalScope(args json.RawMessage) (ApprovalScope, error) {
	a, err := t.parse(args)
	if err != nil {
		return ApprovalScope{}, err
	}
	return t.cfg.fileScope(*a.Path)
}

// ApprovalScope implements ApprovalScoper: the written file.
func (t *WriteTool) ApprovalScope(args json.RawMessage) (ApprovalScope, error) {
	a, err := t.parse(args)
	if err != nil {
		return ApprovalScope{}, err
	}
	return t.cfg.fileScope(*a.Path)
}

// ApprovalScope implements ApprovalScoper: the exact command, its own
// timeout, the directory it runs in, and a digest of its environment and
// shell (ShellCommand's exact call).
func (t *BashTool) ApprovalScope(args json.RawMessage) (ApprovalScope, error) {
	a, _, err := t.parse(args)
	if err != nil {
		return ApprovalScope{}, err
	}
	call, err := t.ShellCommand(args)
	if err != nil {
		return ApprovalScope{}, err
	}
	s := ApprovalScope{Command: *a.Command, Dir: call.Dir, Env: envDigest(call)}
	if a.TimeoutMS != nil {
		s.TimeoutMs = *a.TimeoutMS
	}
	return s, nil
}

// envDigest is a hex SHA-256 over the shell and every environment entry,
// length-prefixed so entries cannot run together. It is a comparison key,
// never shown as anything but a digest.
func envDigest(call ShellCall) string {
	h := sha256.New()
	fmt.Fprintf(h, "octet.shell_env.v1\x00%d:%s", len(call.Shell), call.Shell)
	for _, kv := range call.Env {
		fmt.Fprintf(h, "\x00%d:%s", len(kv), kv)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Confinement is a workspace-confinement switch shared by the file tools
// (Config.Confine) and the broker (BrokerConfig.Confine). When it is on,
// the file tools refuse external paths and classify their calls as
// workspace effects whatever Config.AllowExternalPaths says. The broker
// turns it on when a session's policy is tightened below unsafe_host, as
// the launch configuration forces for the controlled policies. The zero
// value is off; a nil *Confinement is always off.
type Confinement struct{ on atomic.Bool }

// On reports whether confinement is forced on.
func (c *Confinement) On() bool { return c != nil && c.on.Load() }

// Set forces confinement on or releases it.
func (c *Confinement) Set(on bool) {
	if c != nil {
		c.on.Store(on)
	}
}

// externalPaths reports whether the file tools accept external paths now.
func (c *Config) externalPaths() bool { return c.AllowExternalPaths && !c.Confine.On() }

// readEffect is the effect of a file tool's read: WorkspaceRead, or
// HostRead for every call when external paths are allowed (a
// path-resolution race must not lower admission authority).
func (c *Config) readEffect() Effect {
	if c.externalPaths() {
		return HostRead
	}
	return WorkspaceRead
}

// mutationEffect is the classification of every call of a file-changing
// tool: WorkspaceMutation, or HostMutation whenever external paths are
// allowed (a path-resolution race must not lower admission authority).
func (c *Config) mutationEffect() Effect {
	if c.externalPaths() {
		return HostMutation
	}
	return WorkspaceMutation
}

// maxDenialNote bounds the person's reason a denial passes to the model.
const maxDenialNote = 1 << 10

// denialNote renders a person's reason for a denial for the model:
// bounded, every control and invisible character made visible (it is
// client text), on one line.
func denialNote(reason string) string {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return ""
	}
	s := approvalText(boundText(reason, maxDenialNote))
	s = strings.ReplaceAll(s, "\n", " ⏎ ")
	if len(reason) > maxDenialNote {
		s += " [reason truncated]"
	}
	return s
}

// ParseEffect parses an effect name ("workspace_mutation"); ok is false
// for anything that is not one.
func ParseEffect(s string) (Effect, bool) {
	for i, n := range effectNames {
		if n == s {
			return Effect(i), true
		}
	}
	return Unknown, false
}
