package config

import (
	"slices"

	"github.com/octet-agent/octet/tools"
)

func toolsSource(s Source) tools.Source { return tools.Source(s) }

func toolsBool(s Setting[bool]) tools.Setting[bool] {
	return tools.Setting[bool]{Value: s.Value, Source: toolsSource(s.Source)}
}

// ToolPolicy returns the authority profile as the broker's policy value.
func (c *Config) ToolPolicy() tools.Policy {
	switch c.EffectPolicy.Value {
	case Controlled:
		return tools.Controlled
	case ControlledBashApproval:
		return tools.ControlledBashApproval
	default:
		return tools.UnsafeHost
	}
}

// EffectiveToolPolicy returns the {value, source} evidence snapshot the
// broker carries. shellSelection is the selection class the bash tool's
// resolver reports (never a path).
func (c *Config) EffectiveToolPolicy(shellSelection tools.ShellSelection) tools.EffectiveToolPolicy {
	shellSrc := toolsSource(c.ShellPath.Source)
	return tools.EffectiveToolPolicy{
		EffectPolicy: tools.Setting[tools.Policy]{Value: c.ToolPolicy(), Source: toolsSource(c.EffectPolicy.Source)},
		WorkspaceConfinement: tools.Setting[bool]{
			Value: !c.AllowExternalPaths.Value, Source: toolsSource(c.AllowExternalPaths.Source),
		},
		AllowEdit:    toolsBool(c.AllowEdit),
		AllowWrite:   toolsBool(c.AllowWrite),
		AllowProcess: toolsBool(c.AllowProcess),
		AllowShell:   toolsBool(c.AllowShell),
		ShellPath: tools.Setting[tools.ShellPathValue]{
			Value: tools.ShellPathValue{Selection: shellSelection}, Source: shellSrc,
		},
		BashTimeoutMs:   tools.Setting[int64]{Value: c.BashTimeout.Value.Milliseconds(), Source: toolsSource(c.BashTimeout.Source)},
		MaxOutputBytes:  tools.Setting[int64]{Value: c.MaxOutputBytes.Value, Source: toolsSource(c.MaxOutputBytes.Source)},
		AllowRemoteRead: tools.Setting[bool]{Value: false, Source: tools.SourceDefault},
	}
}

// ToolsConfig returns the built-in tools' configuration for the workspace
// root (an absolute path).
func (c *Config) ToolsConfig(root string) tools.Config {
	return tools.Config{
		Root:               root,
		AllowExternalPaths: c.AllowExternalPaths.Value,
		BashTimeout:        c.BashTimeout.Value,
		BashMaxOutputBytes: int(c.MaxOutputBytes.Value),
		ShellPath:          c.ShellPath.Value,
	}
}

// EnabledTools returns the final tool allowlist after the capability
// gates: allow_edit=false drops edit, allow_write=false drops write, and
// allow_shell=false or allow_process=false drops bash. A disabled tool is
// neither advertised nor executable.
func (c *Config) EnabledTools() []string {
	return slices.DeleteFunc(slices.Clone(c.Tools.Value), func(n string) bool {
		switch n {
		case "edit":
			return !c.AllowEdit.Value
		case "write":
			return !c.AllowWrite.Value
		case "bash":
			return !c.AllowShell.Value || !c.AllowProcess.Value
		}
		return false
	})
}
