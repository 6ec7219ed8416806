package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/octet-agent/octet/internal/sandbox"
)

// This file holds the OS sandbox as the broker sees it: which profile a
// call runs under (the broker decides; tools never do), how a call asks
// for more (an escalation, shown in its approval and bound to its
// digest), and how it is stated in the effective policy, approvals and
// results. The kernel rules are internal/sandbox's.

// SandboxProfile names what a sandboxed process may do: SandboxReadOnly,
// SandboxWorkspaceWrite or SandboxNone.
type SandboxProfile = sandbox.Profile

// The sandbox profiles.
const (
	SandboxReadOnly       = sandbox.ReadOnly
	SandboxWorkspaceWrite = sandbox.WorkspaceWrite
	SandboxNone           = sandbox.None
)

// ParseSandboxProfile parses "read-only", "workspace-write" or "none".
func ParseSandboxProfile(s string) (SandboxProfile, error) { return sandbox.ParseProfile(s) }

// SandboxValue is the value of the sandbox setting: the profile approved
// shell calls run under (auto-approved read-only calls run read-only),
// and what this host enforces.
type SandboxValue struct {
	// Profile is the profile approved shell calls run under.
	Profile SandboxProfile `json:"profile"`
	// Mechanism is "landlock", "seatbelt" or "unavailable" (then every
	// call runs unsandboxed and the controlled policies fall back to
	// admission alone).
	Mechanism string `json:"mechanism"`
	// ABI is the Landlock ABI in use (Linux).
	ABI int `json:"abi,omitempty"`
	// Note says what is not enforced on this host, or why nothing is.
	Note string `json:"note,omitempty"`
}

// Available reports whether calls can be sandboxed on this host.
func (v SandboxValue) Available() bool { return v.Mechanism != "unavailable" && v.Mechanism != "" }

// DefaultSandboxProfile is the profile approved shell calls run under by
// default: workspace-write under the controlled policies, none under
// unsafe_host (full access; the user may set one in config).
func DefaultSandboxProfile(p Policy) SandboxProfile { return sandbox.Default(p == UnsafeHost) }

// HostSandbox returns the sandbox setting for profile on this host
// (sandbox.Probe): an unavailable mechanism is stated, never hidden.
func HostSandbox(profile SandboxProfile, source Source) Setting[SandboxValue] {
	st := sandbox.Probe()
	return Setting[SandboxValue]{Value: SandboxValue{Profile: profile, Mechanism: st.Mechanism, ABI: st.ABI, Note: st.Reason}, Source: source}
}

// SandboxForPolicy is the sandbox setting s in force when the session's
// policy is p: a default setting follows the policy (DefaultSandboxProfile: a
// session tightened from full access to a controlled policy is
// sandboxed); a configured one stays.
func SandboxForPolicy(s Setting[SandboxValue], p Policy) Setting[SandboxValue] {
	if s.Source != SourceDefault || s.Value.Profile == DefaultSandboxProfile(p) {
		return s
	}
	s.Source = SourceSession
	s.Value.Profile = DefaultSandboxProfile(p)
	return s
}

// CallSandbox is the sandbox one call runs under, as the broker decided
// it. The zero value runs unsandboxed (a call made without a broker).
type CallSandbox struct {
	// Profile is the profile ("" or SandboxNone: no sandbox).
	Profile SandboxProfile
	// Network allows network access (an approved escalation).
	Network bool
	// Escalated says the call asked for, and a person approved, more than
	// it would have got.
	Escalated bool
}

// confined reports whether the call runs in a sandbox.
func (c CallSandbox) confined() bool {
	return c.Profile == SandboxReadOnly || c.Profile == SandboxWorkspaceWrite
}

// Label is the call's sandbox in a few words ("workspace-write, no
// network"; "none").
func (c CallSandbox) Label() string {
	if !c.confined() {
		return string(SandboxNone)
	}
	if c.Network {
		return string(c.Profile) + ", network allowed"
	}
	return string(c.Profile) + ", no network"
}

// approvalLabel is what an approval's title says about the sandbox.
func (c CallSandbox) approvalLabel() string {
	switch {
	case c.Escalated && !c.confined():
		return "runs WITHOUT the sandbox: full disk and network access"
	case c.Escalated:
		return "runs in the " + string(c.Profile) + " sandbox WITH network access"
	case !c.confined():
		return "no sandbox"
	}
	return "sandbox: " + c.Label()
}

// Escalation is a shell call's request to run with more than its
// sandbox: with network access, or without the sandbox. The model states
// it in the call's arguments, with a one-line justification; only an
// approval that showed it grants it.
type Escalation struct {
	// To is "network" or "none".
	To string `json:"to"`
	// Justification is the model's one-line reason.
	Justification string `json:"justification"`
}

// The escalations a call may ask for.
const (
	EscalateNetwork = "network"
	EscalateNone    = "none"
)

// maxJustification bounds an escalation's justification.
const maxJustification = 300

// validate checks e: a known target and a short single-line reason.
func (e *Escalation) validate() error {
	if e.To != EscalateNetwork && e.To != EscalateNone {
		return fmt.Errorf(`sandbox_escalation.to must be "network" or "none"`)
	}
	j := strings.TrimSpace(e.Justification)
	if j == "" {
		return errors.New("sandbox_escalation.justification must say why the command needs it")
	}
	if len(j) > maxJustification || strings.ContainsFunc(j, func(r rune) bool { return unicode.IsControl(r) }) {
		return fmt.Errorf("sandbox_escalation.justification must be one line of at most %d bytes", maxJustification)
	}
	return nil
}

// SandboxEscalator is implemented by shell-channel tools whose calls may
// ask for more than their sandbox (bash). SandboxEscalation returns the
// call's request, or nil when it asks for nothing; it must not run
// anything.
type SandboxEscalator interface {
	SandboxEscalation(args json.RawMessage) (*Escalation, error)
}

// callSandbox decides the sandbox of a HostProcess shell call under ps:
// none when the host cannot sandbox or the setting is none; read-only
// for a call auto-approved as a read; the setting's profile otherwise;
// and what an escalation asks for on top. It also reports whether the
// escalation asks for more than the call would get (then a person must
// approve it, under every policy).
func (ps *policyState) callSandbox(auto bool, esc *Escalation) (c CallSandbox, escalates bool) {
	v := ps.effective.Sandbox.Value
	if !v.Available() || v.Profile == SandboxNone || v.Profile == "" {
		return CallSandbox{Profile: SandboxNone}, false
	}
	c.Profile = v.Profile
	if auto {
		c.Profile = SandboxReadOnly
	}
	switch {
	case esc == nil:
		return c, false
	case esc.To == EscalateNone:
		return CallSandbox{Profile: SandboxNone, Escalated: true}, true
	}
	c.Network, c.Escalated = true, true
	return c, true
}

// SandboxConfig is the user's widening of the sandbox: paths every
// sandboxed command may also read or write (sandbox_read_paths,
// sandbox_write_paths). A relative write path names an entry of the
// workspace: ".git" or ".octet" opens that protected entry.
type SandboxConfig struct {
	ReadPaths  []string
	WritePaths []string
}

// spec is the sandbox Spec for one bash call under c, or nil when the
// call runs unsandboxed.
func (t *BashTool) spec(c CallSandbox, tmp string) *sandbox.Spec {
	if !c.confined() {
		return nil
	}
	s := &sandbox.Spec{
		Profile: c.Profile, Network: c.Network, Workspace: t.cfg.Root, Shell: t.shell, TempDir: tmp,
		Namespace: sandbox.Probe().Namespaces,
	}
	opened := map[string]bool{}
	for _, p := range t.cfg.Sandbox.WritePaths {
		if filepath.IsAbs(p) {
			s.WritePaths = append(s.WritePaths, filepath.Clean(p))
		} else if filepath.IsLocal(p) {
			opened[filepath.Clean(p)] = true
			s.WritePaths = append(s.WritePaths, filepath.Join(t.cfg.Root, p))
		}
	}
	for _, p := range t.cfg.Sandbox.ReadPaths {
		if filepath.IsAbs(p) {
			s.ReadPaths = append(s.ReadPaths, filepath.Clean(p))
		}
	}
	for _, n := range sandbox.ProtectedNames {
		if !opened[n] {
			s.Protected = append(s.Protected, n)
		}
	}
	// The mount namespace costs a copy of the mount table: only a
	// workspace with an entry to protect needs it (a missing one cannot
	// be mounted over; see docs/security.md).
	s.Namespace = s.Namespace && slices.ContainsFunc(s.Protected, func(n string) bool {
		_, err := os.Lstat(filepath.Join(t.cfg.Root, n))
		return err == nil
	})
	return s
}

// sandboxEnv is env with the private temporary directory as TMPDIR (and
// its common aliases), so programs put temporary files where the sandbox
// lets them write.
func sandboxEnv(env []string, tmp string) []string {
	names := []string{"TMPDIR", "TMP", "TEMP"}
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
	for _, n := range names {
		out = append(out, n+"="+tmp)
	}
	return out
}

// privateTemp creates a call's private temporary directory (mode 0700)
// and returns it with its removal.
func privateTemp(parent string) (string, func(), error) {
	dir, err := os.MkdirTemp(parent, "octet-sandbox-")
	if err != nil {
		return "", nil, fmt.Errorf("create the sandbox's temporary directory: %w", err)
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// sandboxRefusals are what a program prints when the kernel refused it
// something the sandbox does not allow.
var sandboxRefusals = []string{
	"Permission denied", "Operation not permitted", "Read-only file system",
	"EACCES", "EPERM", "EROFS", "Could not resolve host", "Temporary failure in name resolution",
	"Name or service not known", "Network is unreachable", "getaddrinfo",
}

// sandboxHint says, for a failed sandboxed call whose output looks like
// a refusal, what the sandbox refused and how to ask for more; "" when
// the failure does not look like the sandbox's doing.
func sandboxHint(c CallSandbox, output string) string {
	if !c.confined() || !slices.ContainsFunc(sandboxRefusals, func(s string) bool { return strings.Contains(output, s) }) {
		return ""
	}
	allows := "reads the workspace and system files and writes only $TMPDIR"
	if c.Profile == SandboxWorkspaceWrite {
		allows = "reads the workspace and system files and writes the workspace (not .git or .octet) and $TMPDIR"
	}
	net := "no network"
	if c.Network {
		net = "network allowed"
	}
	esc := `"sandbox_escalation": {"to": "network", "justification": "..."} for network access, or {"to": "none", ...} to run without the sandbox`
	if c.Network {
		esc = `"sandbox_escalation": {"to": "none", "justification": "..."} to run without the sandbox`
	}
	return fmt.Sprintf("[the failure above may be the OS sandbox refusing access: this command ran in the %s sandbox, which %s (%s; $HOME and the rest of /tmp are out of reach). If the command needs more, call bash again with %s; the user is asked to approve it.]", c.Profile, allows, net, esc)
}
