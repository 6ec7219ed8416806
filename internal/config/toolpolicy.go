package config

import (
	"slices"

	"github.com/octet-agent/octet/tools"
)

func toolsSource(s Source) tools.Source { return tools.Source(s) }

func toolsBool(s Setting[bool]) tools.Setting[bool] {
	return tools.Setting[bool]{Value: s.Value, Source: toolsSource(s.Source)}
}

// ToolPolicy returns the authority profile the broker admits calls under.
func (c *Config) ToolPolicy() tools.Policy { return c.EffectPolicy.Value }

// EffectiveToolPolicy returns the {value, source} evidence snapshot the
// broker carries. shellSelection is the selection class the bash tool's
// resolver reports (never a path).
//
// The capability entries describe what the run may do, not only the
// allow_* keys: a capability whose tools are all missing from the final
// allowlist (EnabledTools) is false, with the source of whatever removed
// them (a --tools flag, a project tools list, or the other process gate).
func (c *Config) EffectiveToolPolicy(shellSelection tools.ShellSelection) tools.EffectiveToolPolicy {
	shellSrc := toolsSource(c.ShellPath.Source)
	enabled := c.EnabledTools()
	return tools.EffectiveToolPolicy{
		EffectPolicy: tools.Setting[tools.Policy]{Value: c.EffectPolicy.Value, Source: toolsSource(c.EffectPolicy.Source)},
		WorkspaceConfinement: tools.Setting[bool]{
			Value: !c.AllowExternalPaths.Value, Source: toolsSource(c.AllowExternalPaths.Source),
		},
		AllowEdit:    toolsBool(c.capability(c.AllowEdit, enabled, "edit", false)),
		AllowWrite:   toolsBool(c.capability(c.AllowWrite, enabled, "write", false)),
		AllowProcess: toolsBool(c.capability(c.AllowProcess, enabled, "bash", true)),
		AllowShell:   toolsBool(c.capability(c.AllowShell, enabled, "bash", true)),
		ShellPath: tools.Setting[tools.ShellPathValue]{
			Value: tools.ShellPathValue{Selection: shellSelection}, Source: shellSrc,
		},
		BashTimeoutMs:   tools.Setting[int64]{Value: c.BashTimeout.Value.Milliseconds(), Source: toolsSource(c.BashTimeout.Source)},
		MaxOutputBytes:  tools.Setting[int64]{Value: c.MaxOutputBytes.Value, Source: toolsSource(c.MaxOutputBytes.Source)},
		AllowRemoteRead: tools.Setting[bool]{Value: false, Source: tools.SourceDefault},
		Sandbox:         tools.HostSandbox(c.SandboxProfile(), toolsSource(c.Sandbox.Source)),
	}
}

// capability is gate as the run can exercise it: true only if the gate is
// on and the built-in tool providing the capability is in enabled (or,
// when external counts, any tool that is neither built in nor an MCP
// tool, which is always an extension effect: its effects are not known
// here, so its presence keeps the gate's own value). When the gate is
// on but no providing tool remains, the result is false with the source
// that removed the tool (see removedBy).
func (c *Config) capability(gate Setting[bool], enabled []string, tool string, external bool) Setting[bool] {
	if !gate.Value || slices.Contains(enabled, tool) {
		return gate
	}
	if external && slices.ContainsFunc(enabled, func(n string) bool { return !slices.Contains(BuiltinTools, n) && !isMCPToolName(n) }) {
		return gate
	}
	return Setting[bool]{Value: false, Source: c.removedBy(tool)}
}

// removedBy returns the source of the setting that keeps the built-in tool
// name out of EnabledTools: the tools allowlist when the name is not in it,
// otherwise the capability gate EnabledTools applies to that tool.
func (c *Config) removedBy(name string) Source {
	if !slices.Contains(c.Tools.Value, name) {
		return c.Tools.Source
	}
	switch name {
	case "edit":
		return c.AllowEdit.Source
	case "write":
		return c.AllowWrite.Source
	case "apply_patch":
		switch {
		case !c.AllowEdit.Value:
			return c.AllowEdit.Source
		case !c.AllowWrite.Value:
			return c.AllowWrite.Source
		}
		return c.ApplyPatch.Source
	case "bash":
		if !c.AllowShell.Value {
			return c.AllowShell.Source
		}
		return c.AllowProcess.Source
	}
	return c.Tools.Source
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
		Sandbox:            c.SandboxPaths(),
	}
}

// EnabledTools returns the final tool allowlist after the capability
// gates: allow_edit=false drops edit, allow_write=false drops write,
// either (or apply_patch = "off") drops apply_patch, which edits, creates
// and deletes files, and allow_shell=false or allow_process=false drops
// bash. A disabled tool is neither advertised nor executable.
func (c *Config) EnabledTools() []string {
	return slices.DeleteFunc(slices.Clone(c.Tools.Value), func(n string) bool {
		switch n {
		case "edit":
			return !c.AllowEdit.Value
		case "write":
			return !c.AllowWrite.Value
		case "apply_patch":
			return !c.AllowEdit.Value || !c.AllowWrite.Value || c.ApplyPatch.Value == "off"
		case "bash":
			return !c.AllowShell.Value || !c.AllowProcess.Value
		}
		return false
	})
}
