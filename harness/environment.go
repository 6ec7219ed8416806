package harness

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/internal/gitsummary"
	"github.com/octet-agent/octet/tools"
)

// Bounds of the environment context: values a repository or an editor
// controls (a branch name, a document name, the client's name) are cut,
// and the open documents listed are few, so the context stays small and
// cannot be made to crowd out the conversation.
const (
	maxValue         = 256
	maxClientName    = 64
	maxOpenDocuments = 20
	maxDocumentName  = 160
)

// Environment is what the environment context tells the model. Every
// field is a fact the host has; none comes from the model.
type Environment struct {
	// Roots are the workspace roots, absolute.
	Roots []string
	// OS and Arch are the host's (runtime.GOOS, runtime.GOARCH).
	OS, Arch string
	// Shell is the shell bash commands run in ("": unknown).
	Shell string
	// Now is the current time: its date and time zone are stated (not
	// the time of day, which would change the context at every prompt).
	Now time.Time
	// Policy is the session's effect policy as the broker applies it now.
	Policy tools.Policy
	// FilesConfined says the file tools accept only workspace paths.
	FilesConfined bool
	// Sandbox says how commands are confined by the OS ("": they are not).
	Sandbox string
	// Network says what octet knows of network access ("": nothing).
	Network string
	// Git summarizes the repository the workspace is in (nil: none).
	Git *gitsummary.Summary
	// Client is the editor's name (LSP or ACP clientInfo), "" for none.
	Client string
	// OpenDocuments are the documents open in the editor: paths relative
	// to the first root when inside it. Only the first few are listed.
	OpenDocuments []string
}

// policyKinds are the kinds of call the policy lines describe, in the
// order they are listed.
var policyKinds = []struct {
	what            string
	effect          tools.Effect
	shell, readOnly bool
}{
	{"reading and searching workspace files", tools.WorkspaceRead, false, false},
	{"read-only shell commands on octet's allowlist (ls, cat, grep, git status, …)", tools.HostProcess, true, true},
	{"changing workspace files", tools.WorkspaceMutation, false, false},
	{"other shell commands", tools.HostProcess, true, false},
	{"reading files outside the workspace", tools.HostRead, false, false},
	{"changing files outside the workspace", tools.HostMutation, false, false},
	{"network access by tools", tools.Network, false, false},
	{"delegating to sub-agents", tools.Delegation, false, false},
	{"MCP extension tools", tools.Extension, false, false},
}

// PolicyLines describes policy p in plain words: what runs without
// asking, what asks the user first, what is refused (a line is left out
// when nothing is in it). It is read from the broker's decision table.
func PolicyLines(p tools.Policy) []string {
	var runs, asks, refused []string
	for _, k := range policyKinds {
		switch p.Verdict(k.effect, k.shell, k.readOnly) {
		case tools.VerdictRuns:
			runs = append(runs, k.what)
		case tools.VerdictAsks:
			asks = append(asks, k.what)
		default:
			refused = append(refused, k.what)
		}
	}
	var out []string
	for _, l := range []struct {
		head  string
		kinds []string
	}{{"runs without asking", runs}, {"asks the user first", asks}, {"refused", refused}} {
		if len(l.kinds) > 0 {
			out = append(out, l.head+": "+strings.Join(l.kinds, "; "))
		}
	}
	return out
}

// Render returns the environment context: one user-role message between
// <environment_context> tags, a fact per line. Values that come from a
// repository or an editor are cut to a bound, shown on one line (a
// control or hidden character quoted) and escaped, so none can end the
// message or pose as another line.
func (e Environment) Render() string {
	var b strings.Builder
	line := func(key, format string, args ...any) {
		fmt.Fprintf(&b, "%s: %s\n", key, fmt.Sprintf(format, args...))
	}
	b.WriteString("<environment_context>\n")
	for _, r := range e.Roots {
		line("workspace root", "%s", value(r, maxValue))
	}
	line("os", "%s/%s", e.OS, e.Arch)
	if e.Shell != "" {
		line("shell", "%s (bash commands run in it)", value(e.Shell, maxValue))
	}
	if !e.Now.IsZero() {
		zone, off := e.Now.Zone()
		line("date", "%s (%s), time zone %s (UTC%s)", e.Now.Format("2006-01-02"), e.Now.Weekday(), value(zone, 64), offset(off))
	}
	line("effect policy", "%s", e.Policy)
	for _, l := range PolicyLines(e.Policy) {
		b.WriteString("  " + l + "\n")
	}
	if e.FilesConfined {
		b.WriteString("  the file tools accept only paths inside the workspace\n")
	}
	line("sandbox", "%s", orDefault(e.Sandbox, "none: commands run with the user's own permissions"))
	if e.Network != "" {
		line("network", "%s", e.Network)
	}
	if g := e.Git; g != nil {
		line("git", "%s", gitLine(g))
	}
	if e.Client != "" {
		line("editor", "%s", value(e.Client, maxClientName))
	}
	if len(e.OpenDocuments) > 0 {
		line("open in the editor", "%s", listLine(e.OpenDocuments, maxOpenDocuments))
	}
	b.WriteString("</environment_context>")
	return b.String()
}

// gitLine is the git summary in words.
func gitLine(g *gitsummary.Summary) string {
	head := "branch " + value(g.Branch, maxValue)
	if g.Branch == "" {
		head = "detached HEAD at " + value(g.Detached, 64)
	}
	if !g.Counted {
		return head
	}
	atLeast := ""
	if g.Partial {
		atLeast = "at least "
	}
	return fmt.Sprintf("%s; %s%s with unstaged changes, %s%s untracked (in the workspace)",
		head, atLeast, count(g.Modified, "file"), atLeast, count(g.Untracked, "file"))
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// listLine lists at most n values, saying how many more there are.
func listLine(vs []string, n int) string {
	shown := make([]string, 0, min(len(vs), n))
	for _, v := range vs[:min(len(vs), n)] {
		shown = append(shown, value(v, maxDocumentName))
	}
	s := strings.Join(shown, ", ")
	if len(vs) > n {
		s += fmt.Sprintf(" (and %d more)", len(vs)-n)
	}
	return s
}

func offset(sec int) string {
	sign := "+"
	if sec < 0 {
		sign, sec = "-", -sec
	}
	return fmt.Sprintf("%s%02d:%02d", sign, sec/3600, sec%3600/60)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// value renders a value from outside octet for the context: cut to max
// bytes (on a character boundary), quoted when it holds a character a
// reader would not see as it is (tools.ShownPath), and with <, > and &
// escaped so it cannot open or close a tag.
func value(s string, max int) string {
	if len(s) > max {
		i := max
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "…"
	}
	return xmlEscaper.Replace(tools.ShownPath(s))
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
