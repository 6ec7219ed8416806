package config

import (
	"fmt"
	"strings"
)

// EffectPolicy is the authority profile. Values are ordered by authority:
// a larger value admits more, so "tightening" means moving down.
type EffectPolicy int

// The authority profiles of the tools reference.
const (
	// Controlled admits pure and workspace reads, confirms workspace
	// mutations and unknown bash, auto-approves known read-only bash.
	Controlled EffectPolicy = iota
	// ControlledBashApproval is Controlled with every bash call confirmed
	// (selected by --safe-mode).
	ControlledBashApproval
	// UnsafeHost admits classified effects with the user's authority; the
	// coding product's default. It is not containment.
	UnsafeHost
)

var policyNames = [...]string{
	Controlled:             "controlled",
	ControlledBashApproval: "controlled_bash_approval",
	UnsafeHost:             "unsafe_host",
}

// String returns the snake_case name ("unsafe_host").
func (p EffectPolicy) String() string {
	if p < 0 || int(p) >= len(policyNames) {
		return fmt.Sprintf("EffectPolicy(%d)", int(p))
	}
	return policyNames[p]
}

// MarshalText encodes p as its snake_case name.
func (p EffectPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText decodes a snake_case policy name, so a TOML value error
// carries the file position.
func (p *EffectPolicy) UnmarshalText(b []byte) error {
	v, err := ParseEffectPolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// ParseEffectPolicy parses "controlled", "controlled_bash_approval" or
// "unsafe_host". Retired spellings ("yolo") are refused with a hint.
func ParseEffectPolicy(s string) (EffectPolicy, error) {
	for i, n := range policyNames {
		if s == n {
			return EffectPolicy(i), nil
		}
	}
	if strings.EqualFold(s, "yolo") {
		return 0, fmt.Errorf("%q is no longer accepted; full access is unsafe_host (the default)", s)
	}
	return 0, fmt.Errorf("unknown effect policy %q; valid policies are controlled, controlled_bash_approval, unsafe_host", s)
}
