package config

import (
	"fmt"
	"strings"

	"github.com/octet-agent/octet/tools"
)

// parseEffectPolicy parses an effect_policy value from a config file,
// OCTET_EFFECT_POLICY or --effect-policy into the broker's tools.Policy,
// the single definition of the authority profiles. On top of
// tools.ParsePolicy it refuses the retired "yolo" spelling with a hint
// naming its replacement.
func parseEffectPolicy(s string) (tools.Policy, error) {
	if strings.EqualFold(strings.TrimSpace(s), "yolo") {
		return tools.Controlled, fmt.Errorf("%q is no longer accepted; full access is unsafe_host (the default)", s)
	}
	return tools.ParsePolicy(s)
}

// authority ranks p for "tighten only": a larger rank admits more
// (unsafe_host > controlled_bash_approval > controlled), so a project may
// move only to a lower rank. The ranking is config's own product rule and
// does not depend on the numeric values of tools.Policy.
func authority(p tools.Policy) int {
	switch p {
	case tools.UnsafeHost:
		return 2
	case tools.ControlledBashApproval:
		return 1
	default: // tools.Controlled; parsing never yields another value
		return 0
	}
}
