// Package harness is what octet tells the model about its work and its
// surroundings: the system prompt (prompt.md, octet's own words, with the
// workspace's AGENTS.md files after it) and the environment context, a
// user-role message built from facts the host already has (workspace,
// OS, shell, date, the session's effect policy, the editor), never from
// anything the model said. It imports tools only for the policy's
// decision table; hosts (cmd/octet, later the host package) assemble
// both and hand them to the agent.
package harness

import (
	_ "embed"
	"strings"
)

//go:embed prompt.md
var prompt string

//go:embed plan.md
var planSection string

// Options select the parts of the system prompt.
type Options struct {
	// Plan adds how to keep a plan with the update_plan tool; set it only
	// when that tool is offered.
	Plan bool
	// ContextFiles is the rendered AGENTS.md files (global first, each
	// under a heading naming it), or "".
	ContextFiles string
}

// Instructions returns the system prompt: octet's prompt, the sections
// opts selects, then the context files.
func Instructions(opts Options) string {
	parts := []string{strings.TrimSpace(prompt)}
	if opts.Plan {
		parts = append(parts, strings.TrimSpace(planSection))
	}
	if ctx := strings.TrimSpace(opts.ContextFiles); ctx != "" {
		parts = append(parts, ctx)
	}
	return strings.Join(parts, "\n\n")
}
