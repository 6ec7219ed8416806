package harness

import (
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/octet-agent/octet/internal/gitsummary"
	"github.com/octet-agent/octet/tools"
)

// Facts are what a host knows of one session's surroundings. Its
// Environment method is the agent's environment hook
// (agent.Config.Environment): each prompt it gathers the facts that may
// have changed (the policy it is passed, the date, the git summary, the
// editor's state) and renders them.
type Facts struct {
	// Workspace is the session's workspace root, absolute.
	Workspace string
	// Shell is the shell bash commands run in ("": none found).
	Shell string
	// FilesConfined reports whether the file tools accept only workspace
	// paths now (nil: they do).
	FilesConfined func() bool
	// Network is what octet knows of network access ("": nothing said);
	// a sandbox that blocks it says so instead.
	Network string
	// Sandbox is the launch policy's OS sandbox setting (its
	// EffectiveToolPolicy's); the context states the one in force for
	// the session's policy (tools.SandboxForPolicy). Zero: nothing said.
	Sandbox tools.Setting[tools.SandboxValue]
	// Editor, when set, returns the editor's name and the documents open
	// in it (the dialect's hook: LSP or ACP clientInfo, the document
	// overlay).
	Editor func() (client string, open []string)
	// Now returns the current time (nil: time.Now).
	Now func() time.Time
	// NoGit leaves the git summary out.
	NoGit bool
}

// Environment renders the environment context for a session at policy p.
func (f Facts) Environment(p tools.Policy) string {
	e := Environment{
		Roots: []string{f.Workspace}, OS: runtime.GOOS, Arch: runtime.GOARCH,
		Shell: f.Shell, Policy: p, FilesConfined: f.FilesConfined == nil || f.FilesConfined(),
		Network: f.Network,
	}
	if f.Sandbox.Value.Mechanism != "" {
		sb, network := SandboxLines(tools.SandboxForPolicy(f.Sandbox, p))
		e.Sandbox = sb
		if network != "" {
			e.Network = network
		}
	}
	if f.Now != nil {
		e.Now = f.Now()
	} else {
		e.Now = time.Now()
	}
	if !f.NoGit {
		e.Git = gitsummary.Read(f.Workspace)
	}
	if f.Editor != nil {
		var open []string
		e.Client, open = f.Editor()
		e.OpenDocuments = f.relative(open)
	}
	return e.Render()
}

// relative returns the paths relative to the workspace when inside it,
// sorted (the editor's order would change the context for nothing).
func (f Facts) relative(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if rel, err := filepath.Rel(f.Workspace, p); err == nil && filepath.IsLocal(rel) {
			p = filepath.ToSlash(rel)
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
