package config

import (
	"fmt"
	"slices"
	"strings"
)

// EffectPolicy is an effect policy as configuration names it
// (effect_policy, OCTET_EFFECT_POLICY, --effect-policy): one of the
// authority profiles the effect broker defines (tools.Policy, the single
// definition of what each admits). Configuration keeps the name; the host
// turns it into the broker's policy.
type EffectPolicy string

// The effect policies.
const (
	// ControlledBashApproval confirms every shell call.
	ControlledBashApproval EffectPolicy = "controlled_bash_approval"
	// Controlled confirms edits and shell calls but admits a few
	// read-only commands.
	Controlled EffectPolicy = "controlled"
	// UnsafeHost admits every classified effect with octet's own
	// authority (the default).
	UnsafeHost EffectPolicy = "unsafe_host"
)

// EffectPolicies are the accepted names, strictest first: each admits no
// more than the next (what tools.Policy.NoLooserThan computes from the
// broker's decision table; a test keeps the two in step).
var EffectPolicies = []EffectPolicy{ControlledBashApproval, Controlled, UnsafeHost}

func (p EffectPolicy) String() string { return string(p) }

// NoLooserThan reports whether p admits no more than q. A project
// configuration may only move to such a policy.
func (p EffectPolicy) NoLooserThan(q EffectPolicy) bool {
	return slices.Index(EffectPolicies, p) <= slices.Index(EffectPolicies, q)
}

// parseEffectPolicy parses an effect_policy value from a config file,
// OCTET_EFFECT_POLICY or --effect-policy: one of EffectPolicies
// (surrounding space and case are ignored). It refuses the retired "yolo"
// spelling with a hint naming its replacement, and anything else naming
// the accepted values.
func parseEffectPolicy(s string) (EffectPolicy, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if name == "yolo" {
		return Controlled, fmt.Errorf("%q is no longer accepted; full access is unsafe_host (the default)", s)
	}
	if p := EffectPolicy(name); slices.Contains(EffectPolicies, p) {
		return p, nil
	}
	// The value is quoted bounded, to 64 characters.
	return Controlled, fmt.Errorf("unknown effect policy %.64q (want controlled, controlled_bash_approval or unsafe_host)", s)
}
