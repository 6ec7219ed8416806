package config

import (
	"slices"
)

// Capabilities are the capability gates as the run can exercise them
// (the allow_* keys after the tool allowlist, see capability): edit,
// write, process and shell. The host reports them in the broker's
// EffectiveToolPolicy.
func (c *Config) Capabilities() (edit, write, process, shell Setting[bool]) {
	enabled := c.EnabledTools()
	return c.capability(c.AllowEdit, enabled, "edit", false), c.capability(c.AllowWrite, enabled, "write", false),
		c.capability(c.AllowProcess, enabled, "bash", true), c.capability(c.AllowShell, enabled, "bash", true)
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
