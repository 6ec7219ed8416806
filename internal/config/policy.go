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
