package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/octet-agent/octet/provider"
)

// tighten overlays a project config onto c. Authority settings may only
// move toward less authority (policy down, booleans true→false, limits
// down); an attempt to relax is ignored with a warning. Keys a repository
// must never control (base_url would redirect the API key, shell_path picks
// the executable every bash call runs) are ignored with a warning too.
// model and reasoning apply unless the environment or a flag set them; a
// model name octet does not know and the user did not configure is
// ignored with a warning.
func (fc *fileConfig) tighten(c *Config) {
	warn := func(key, format string, args ...any) {
		loc := fc.path
		if line := keyLine(fc.data, []string{key}); line > 0 {
			loc = fmt.Sprintf("%s:%d", fc.path, line)
		}
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s: %s ignored: %s", loc, key, fmt.Sprintf(format, args...)))
	}
	const src = SourceProjectConfig
	if p := fc.policy; p != nil && *p != c.EffectPolicy.Value {
		// Ranked by what each policy admits (EffectPolicies):
		// controlled_bash_approval < controlled < unsafe_host.
		if p.NoLooserThan(c.EffectPolicy.Value) {
			set(&c.EffectPolicy, *p, src)
		} else {
			warn("effect_policy", "a project may not relax %s (from %s) to %s", c.EffectPolicy.Value, c.EffectPolicy.Source, *p)
		}
	}
	tightenBool(&c.AllowExternalPaths, fc.AllowExternalPaths, "allow_external_paths", warn)
	tightenBool(&c.AllowEdit, fc.AllowEdit, "allow_edit", warn)
	tightenBool(&c.AllowWrite, fc.AllowWrite, "allow_write", warn)
	tightenBool(&c.AllowProcess, fc.AllowProcess, "allow_process", warn)
	tightenBool(&c.AllowShell, fc.AllowShell, "allow_shell", warn)
	if fc.BashTimeoutSecs != nil {
		d := time.Duration(*fc.BashTimeoutSecs) * time.Second
		switch {
		case d < c.BashTimeout.Value:
			set(&c.BashTimeout, d, src)
		case d > c.BashTimeout.Value:
			warn("bash_timeout_secs", "a project may only lower it (now %d from %s)", int64(c.BashTimeout.Value.Seconds()), c.BashTimeout.Source)
		}
	}
	if fc.MaxOutputBytes != nil {
		switch v := *fc.MaxOutputBytes; {
		case v < c.MaxOutputBytes.Value:
			set(&c.MaxOutputBytes, v, src)
		case v > c.MaxOutputBytes.Value:
			warn("max_output_bytes", "a project may only lower it (now %d from %s)", c.MaxOutputBytes.Value, c.MaxOutputBytes.Source)
		}
	}
	if fc.Tools != nil {
		var extra []string
		kept := make([]string, 0, len(*fc.Tools))
		for _, n := range *fc.Tools {
			if slices.Contains(c.Tools.Value, n) || (isMCPToolName(n) && c.MCPToolAllowed(n)) {
				kept = append(kept, n)
			} else {
				extra = append(extra, n)
			}
		}
		if len(extra) > 0 {
			warn("tools", "a project may not enable %s (not enabled from %s); keeping %s", strings.Join(extra, ", "), c.Tools.Source, strings.Join(kept, ","))
		}
		if len(kept) < len(c.Tools.Value) || c.Tools.Source == SourceDefault {
			set(&c.Tools, kept, src)
		}
	}
	fc.tightenSandbox(c, warn)
	if fc.ShellPath != nil {
		warn("shell_path", "only the global config or --shell-path may select the shell")
	}
	if fc.BaseURL != nil {
		warn("base_url", "only the global config or OPENAI_BASE_URL may choose where the API key is sent")
	}
	if fc.RuntimeProfile != nil {
		warn("runtime_profile", "only the global config may assert the provider route's runtime profile")
	}
	fc.tightenAccounting(c, warn)
	fc.tightenProviders(c, warn)
	fc.tightenMCP(c, warn)
	if fc.Model != nil && weakerThanProject(c.Model.Source) {
		if m := *fc.Model; c.knownModel(m) {
			set(&c.Model, m, src)
		} else {
			warn("model", "%q is neither a model octet knows nor one your configuration names (model, [prices.<model>] in %s, or --model); keeping %s from %s",
				m, filepath.Join(c.Home, "config.toml"), c.Model.Value, c.Model.Source)
		}
	}
	if fc.Reasoning != nil && weakerThanProject(c.Reasoning.Source) {
		set(&c.Reasoning, *fc.Reasoning, src)
	}
	if fc.ReasoningSummary != nil && weakerThanProject(c.ReasoningSummary.Source) {
		set(&c.ReasoningSummary, *fc.ReasoningSummary, src)
	}
	if fc.ApplyPatch != nil && *fc.ApplyPatch != c.ApplyPatch.Value {
		if *fc.ApplyPatch == "off" {
			set(&c.ApplyPatch, "off", src)
		} else {
			warn("apply_patch", "a project may only turn it off (%s from %s)", c.ApplyPatch.Value, c.ApplyPatch.Source)
		}
	}
}

// knownModel reports whether a project may select the model name: one in
// octet's model table (or a dated snapshot of one), the model the user
// configured, or one the user priced. Any other name is a repository's
// choice alone: it could run up an unpriced bill, and it reaches editors'
// status lines.
func (c *Config) knownModel(name string) bool {
	if _, ok := provider.LookupModel(name); ok {
		return true
	}
	if _, priced := c.Prices.Value[name]; priced {
		return true
	}
	if _, declared := c.Models[name]; declared {
		return true
	}
	return name == c.Model.Value && c.Model.Source != SourceDefault
}

func weakerThanProject(s Source) bool { return s == SourceDefault || s == SourceConfig }

func tightenBool(s *Setting[bool], v *bool, key string, warn func(string, string, ...any)) {
	switch {
	case v == nil || *v == s.Value:
	case !*v:
		set(s, false, SourceProjectConfig)
	default:
		warn(key, "a project may not turn it on (off from %s)", s.Source)
	}
}
