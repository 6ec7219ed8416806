package tools

import (
	"encoding"
	"fmt"
	"strings"
)

// Policy is an effect admission profile. The zero value is Controlled, the
// default for programs that embed the runtime; the coding product selects
// UnsafeHost by default and ControlledBashApproval under --safe-mode.
type Policy int

const (
	// Controlled admits Pure and WorkspaceRead; confirms WorkspaceMutation
	// and shell-channel HostProcess calls, except that a conservative set of
	// read-only shell commands is admitted without asking; denies every
	// other effect (host reads and mutations, native processes, network,
	// delegation, executable extensions, unknown).
	Controlled Policy = iota
	// ControlledBashApproval is Controlled except that every shell call is
	// confirmed: nothing is auto-approved.
	ControlledBashApproval
	// UnsafeHost admits every classified effect with the process's ambient
	// OS authority. It is not containment. Unknown is still denied.
	UnsafeHost
)

var policyNames = [...]string{
	Controlled:             "controlled",
	ControlledBashApproval: "controlled_bash_approval",
	UnsafeHost:             "unsafe_host",
}

// String returns the configuration name of p ("unsafe_host").
func (p Policy) String() string {
	if p < 0 || int(p) >= len(policyNames) {
		return fmt.Sprintf("policy(%d)", int(p))
	}
	return policyNames[p]
}

// Valid reports whether p is one of the defined policies.
func (p Policy) Valid() bool { return p >= 0 && int(p) < len(policyNames) }

// ParsePolicy parses a configuration name: "controlled",
// "controlled_bash_approval" or "unsafe_host" (surrounding space and case
// are ignored). Anything else is an error naming the accepted values.
func ParsePolicy(s string) (Policy, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	for i, n := range policyNames {
		if n == name {
			return Policy(i), nil
		}
	}
	return Controlled, fmt.Errorf("unknown effect policy %q (want controlled, controlled_bash_approval or unsafe_host)", truncateForError(s))
}

var (
	_ encoding.TextMarshaler   = Policy(0)
	_ encoding.TextUnmarshaler = (*Policy)(nil)
)

// MarshalText encodes p as its configuration name.
func (p Policy) MarshalText() ([]byte, error) {
	if !p.Valid() {
		return nil, fmt.Errorf("marshal effect policy: invalid value %d", int(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText decodes a configuration name with ParsePolicy.
func (p *Policy) UnmarshalText(b []byte) error {
	v, err := ParsePolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// verdict is the policy's answer for one classified call.
type verdict int

const (
	verdictDeny verdict = iota
	verdictAdmit
	verdictConfirm
)

// callFacts are the host-derived facts a policy decides on. None of them
// comes from the model: the effect is the tool's classification, shell is a
// static property of the tool, and readOnly is the allowlist parser's
// verdict over the exact command.
type callFacts struct {
	effect   Effect
	shell    bool // the call runs through the shell process channel
	readOnly bool // the shell command is on the read-only allowlist
	// escalated: the shell call asks for more than its sandbox (network,
	// or none); a person approves that under every policy.
	escalated bool
	esc       *Escalation // what it asks for (nil: nothing)
}

// decide maps facts to a verdict and, for a denial or an automatic
// admission, the stable reason code.
func (p Policy) decide(f callFacts) (verdict, string) {
	if f.effect == Unknown || f.effect < 0 || int(f.effect) >= len(effectNames) {
		return verdictDeny, ReasonUnknownEffect
	}
	if f.escalated && f.effect == HostProcess && f.shell && p.Valid() {
		return verdictConfirm, ""
	}
	switch p {
	case UnsafeHost:
		return verdictAdmit, ReasonPolicyAdmitted
	case Controlled, ControlledBashApproval:
		switch f.effect {
		case Pure, WorkspaceRead:
			return verdictAdmit, ReasonPolicyAdmitted
		case WorkspaceMutation:
			return verdictConfirm, ""
		case HostProcess:
			if !f.shell {
				return verdictDeny, ReasonPolicyDenied // native process
			}
			if p == Controlled && f.readOnly {
				return verdictAdmit, ReasonReadOnlyCommand
			}
			return verdictConfirm, ""
		}
		return verdictDeny, ReasonPolicyDenied
	}
	return verdictDeny, ReasonPolicyDenied
}

// verdictRank orders verdicts by how much they let through without a
// person: deny < confirm < admit.
var verdictRank = [...]int{verdictDeny: 0, verdictConfirm: 1, verdictAdmit: 2}

// NoLooserThan reports whether p admits at most what q admits: for every
// kind of call, p's verdict lets no more through than q's (deny, then
// confirm, then admit). It is computed from the same decision table the
// broker uses, over every effect with and without the shell channel and
// the read-only allowlist, so it cannot drift from what the policies do.
// ControlledBashApproval is no looser than Controlled (it confirms the
// shell calls Controlled auto-approves), which is no looser than
// UnsafeHost. A project configuration may only move to such a policy.
func (p Policy) NoLooserThan(q Policy) bool {
	for e := Effect(0); int(e) < len(effectNames); e++ {
		for _, f := range []callFacts{{effect: e}, {effect: e, shell: true}, {effect: e, shell: true, readOnly: true}, {effect: e, shell: true, escalated: true}} {
			vp, _ := p.decide(f)
			vq, _ := q.decide(f)
			if verdictRank[vp] > verdictRank[vq] {
				return false
			}
		}
	}
	return true
}

// EffectStater is implemented by tools that can state every effect their
// calls may be classified as, whatever the arguments (a delegation tool:
// Delegation; an MCP tool: Extension). Such a tool is offered to the
// model only under a policy that could admit or confirm one of them
// (Broker.Offers); a tool that does not implement it, or states no
// effect (an empty list), is always offered and decided call by call.
// A wrapper of tools forwards it.
type EffectStater interface {
	Effects() []Effect
}

// offers reports whether p could admit or confirm some call of t.
func (p Policy) offers(t Tool) bool {
	es, ok := t.(EffectStater)
	if !ok || len(es.Effects()) == 0 {
		return true
	}
	_, shell := t.(ShellCommander)
	for _, e := range es.Effects() {
		facts := []callFacts{{effect: e, shell: shell}}
		if shell {
			facts = append(facts, callFacts{effect: e, shell: true, readOnly: true})
		}
		for _, f := range facts {
			if v, _ := p.decide(f); v != verdictDeny {
				return true
			}
		}
	}
	return false
}

// Verdict is what a policy does with one kind of call, in the words a
// person (or the model) is told.
type Verdict string

// The verdicts.
const (
	// VerdictRuns: admitted without asking.
	VerdictRuns Verdict = "runs"
	// VerdictAsks: a person confirms it first.
	VerdictAsks Verdict = "asks"
	// VerdictRefused: denied whatever anyone answers.
	VerdictRefused Verdict = "refused"
)

// Verdict returns what p does with a call classified e: shell says it
// runs through the shell channel (bash), readOnly that its command is on
// the read-only allowlist. It reads the broker's own decision table, so a
// description built from it cannot drift from what the broker does.
func (p Policy) Verdict(e Effect, shell, readOnly bool) Verdict {
	switch v, _ := p.decide(callFacts{effect: e, shell: shell, readOnly: readOnly}); v {
	case verdictAdmit:
		return VerdictRuns
	case verdictConfirm:
		return VerdictAsks
	}
	return VerdictRefused
}
