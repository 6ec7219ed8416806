package harness

import (
	"fmt"

	"github.com/octet-agent/octet/tools"
)

// SandboxLines are what the environment context says about the OS
// sandbox s (the setting in force for the session's policy): how
// commands are confined, and so what network access they have. Both are
// "" when s says nothing (a host that did not state its sandbox).
func SandboxLines(s tools.Setting[tools.SandboxValue]) (sandbox, network string) {
	v := s.Value
	switch {
	case v.Mechanism == "":
		return "", ""
	case !v.Available():
		return fmt.Sprintf("unavailable on this host (%s): commands are not sandboxed, only admitted by the effect policy", value(v.Note, maxValue)), ""
	case v.Profile == tools.SandboxNone || v.Profile == "":
		return "none: commands run with the user's own permissions", ""
	}
	mech := v.Mechanism
	if v.ABI > 0 {
		mech = fmt.Sprintf("%s ABI %d", mech, v.ABI)
	}
	writes := "the workspace (not .git or .octet) and $TMPDIR"
	if v.Profile == tools.SandboxReadOnly {
		writes = "only $TMPDIR"
	}
	sandbox = fmt.Sprintf("%s (%s): commands read the workspace and system files and write %s; $HOME and the rest of /tmp are out of reach; read-only commands octet approves on its own run read-only. A command that needs more may ask in its call with sandbox_escalation {to: \"network\" or \"none\", justification}; the user approves it", v.Profile, mech, writes)
	if v.Note != "" {
		sandbox += "; not enforced here: " + value(v.Note, maxValue)
	}
	return sandbox, "blocked for sandboxed commands (ask with sandbox_escalation to: \"network\")"
}
