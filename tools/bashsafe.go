package tools

import (
	"regexp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Bounds of a command line the read-only allowlist will even look at.
const (
	maxReadOnlyCommandBytes = 4096
	maxReadOnlyWords        = 128
	maxPipelineCommands     = 4
)

// IsReadOnlyCommand reports whether command is on the conservative
// read-only allowlist that Controlled auto-approves. It parses the line
// with a real shell parser (mvdan.cc/sh/v3/syntax) and admits only:
//
//   - printable ASCII, at most 4 KiB, no comments;
//   - one simple command, or a pipeline (|) of up to four;
//   - words made only of literal text and single or double quotes with
//     literal content: no parameter, command, process or arithmetic
//     substitution, no globs, brace or tilde expansion, no backslashes;
//   - no redirections, assignments or env prefixes, no ;, &&, ||, &,
//     negation, subshells, groups, functions or here-documents;
//   - a command from a small set (ls, pwd, echo, cat, head, tail, wc,
//     grep, rg, find, sed -n, sort, uniq) — git is deliberately absent:
//     repository configuration (core.fsmonitor, diff.external, textconv
//     drivers, pagers) lets a hostile .git/config run programs from an
//     innocent-looking git status, so every git command is confirmed)
//     with each command's writing or executing options refused;
//   - arguments that are not absolute, home-relative or ".." paths, so
//     auto-approval stays a workspace observation.
//
// Everything else is refused, which only means the call needs
// confirmation. The allowlist is not containment: a symlink inside the
// workspace is outside what parsing a command line can see.
func IsReadOnlyCommand(command string) bool {
	if len(command) == 0 || len(command) > maxReadOnlyCommandBytes {
		return false
	}
	for i := 0; i < len(command); i++ {
		if c := command[i]; c < 0x20 || c > 0x7e {
			return false // control characters, newlines, non-ASCII
		}
	}
	p := syntax.NewParser(syntax.KeepComments(true), syntax.Variant(syntax.LangBash))
	f, err := p.Parse(strings.NewReader(command), "")
	if err != nil || len(f.Stmts) != 1 || len(f.Last) != 0 || !onlyLiteralNodes(f) {
		return false
	}
	var cmds [][]string
	if !flattenPipeline(f.Stmts[0], &cmds) || len(cmds) > maxPipelineCommands {
		return false
	}
	words := 0
	for _, argv := range cmds {
		words += len(argv)
		if words > maxReadOnlyWords || !readOnlyArgv(argv) {
			return false
		}
	}
	return true
}

// onlyLiteralNodes walks the whole tree and refuses any node outside the
// small set a literal simple command or pipeline is made of.
func onlyLiteralNodes(f *syntax.File) bool {
	ok := true
	syntax.Walk(f, func(n syntax.Node) bool {
		if !ok || n == nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.File, *syntax.Word:
		case *syntax.Stmt:
			if len(n.Comments) > 0 || n.Negated || n.Background || n.Coprocess || n.Disown ||
				len(n.Redirs) > 0 || n.Semicolon.IsValid() {
				ok = false
			}
		case *syntax.CallExpr:
			if len(n.Assigns) > 0 || len(n.Args) == 0 {
				ok = false
			}
		case *syntax.BinaryCmd:
			if n.Op != syntax.Pipe {
				ok = false
			}
		case *syntax.Lit:
			if !safeUnquoted(n.Value) {
				ok = false
			}
		case *syntax.SglQuoted:
			if n.Dollar {
				ok = false
			}
		case *syntax.DblQuoted:
			if n.Dollar {
				ok = false
			}
			for _, part := range n.Parts {
				lit, isLit := part.(*syntax.Lit)
				if !isLit || strings.ContainsAny(lit.Value, "\\$`!") {
					ok = false
				}
			}
			return false // parts checked here; not as unquoted literals
		default:
			ok = false
		}
		return ok
	})
	return ok
}

// safeUnquoted reports whether an unquoted literal has no character the
// shell would expand or treat specially. A tilde is accepted only where
// no shell expands it (not leading, not after = or :), as in HEAD~2.
func safeUnquoted(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-_./,+%@^", c) >= 0:
		case c == '=' || c == ':':
			if i+1 < len(s) && s[i+1] == '~' {
				return false
			}
		case c == '~':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// flattenPipeline collects the argv of each command of a pipeline,
// refusing anything that is not a CallExpr or a | of them.
func flattenPipeline(s *syntax.Stmt, out *[][]string) bool {
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		argv := make([]string, 0, len(c.Args))
		for _, w := range c.Args {
			lit, ok := literalWord(w)
			if !ok {
				return false
			}
			argv = append(argv, lit)
		}
		*out = append(*out, argv)
		return true
	case *syntax.BinaryCmd:
		return c.Op == syntax.Pipe && flattenPipeline(c.X, out) && flattenPipeline(c.Y, out)
	}
	return false
}

// literalWord returns the value of a word made only of literal parts.
func literalWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, dp := range p.Parts {
				lit, ok := dp.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// readOnlyRule checks the arguments (without the command name) of one
// allowlisted command.
type readOnlyRule func(args []string) bool

var readOnlyRules = map[string]readOnlyRule{
	"ls":   pathArgs(nil),
	"cat":  pathArgs(nil),
	"head": pathArgs(nil),
	"wc":   pathArgs(nil),
	"grep": pathArgs(nil),
	"pwd": func(args []string) bool {
		for _, a := range args {
			if a != "-L" && a != "-P" {
				return false
			}
		}
		return true
	},
	"echo": func([]string) bool { return true }, // prints its words; reads nothing
	"tail": pathArgs(func(a string) bool {
		return !longOptionMatches(a, "--follow", "--retry") && (!isShortOption(a) || !strings.ContainsAny(a, "fF"))
	}),
	"rg": pathArgs(func(a string) bool {
		for _, bad := range []string{"--pre", "--search-zip", "--hostname-bin"} {
			if a == bad || strings.HasPrefix(a, bad+"=") || strings.HasPrefix(a, bad+"-") {
				return false
			}
		}
		return !isShortOption(a) || !strings.Contains(a, "z")
	}),
	"find": pathArgs(func(a string) bool {
		for _, bad := range []string{"-exec", "-ok", "-delete", "-fprint", "-fls"} {
			if strings.HasPrefix(a, bad) {
				return false
			}
		}
		return true
	}),
	"sort": pathArgs(func(a string) bool {
		return !longOptionMatches(a, "--output", "--compress-program", "--temporary-directory") &&
			(!isShortOption(a) || !strings.ContainsAny(a, "oT"))
	}),
	"uniq": uniqRule,
	"sed":  sedRule,
}

// readOnlyArgv checks one command of the pipeline.
func readOnlyArgv(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	rule, ok := readOnlyRules[argv[0]]
	return ok && rule(argv[1:])
}

// isShortOption reports whether a is a cluster of short options ("-rn").
func isShortOption(a string) bool {
	return len(a) > 1 && a[0] == '-' && a[1] != '-'
}

// longOptionMatches reports whether a is a long option ("--name" or
// "--name=value") that is, extends, or abbreviates one of bad. GNU getopt
// and git accept any unambiguous prefix of a long option, so "--out=x"
// means "--output=x" to sort and to git diff.
func longOptionMatches(a string, bad ...string) bool {
	if !strings.HasPrefix(a, "--") || a == "--" {
		return false
	}
	name, _, _ := strings.Cut(a, "=")
	for _, b := range bad {
		if strings.HasPrefix(b, name) || strings.HasPrefix(name, b) {
			return true
		}
	}
	return false
}

// pathArgs returns a rule that applies hostPathFree to every argument and
// then the optional per-argument check.
func pathArgs(check func(string) bool) readOnlyRule {
	return func(args []string) bool {
		for _, a := range args {
			if !hostPathFree(a) || (check != nil && !check(a)) {
				return false
			}
		}
		return true
	}
}

// hostPathFree refuses an argument that names (or embeds, as --opt=PATH or
// -fPATH) an absolute path, a home-relative path or a ".." component, so an
// auto-approved command cannot observe outside the workspace by path.
func hostPathFree(a string) bool {
	if a == "" {
		return true
	}
	if a[0] == '/' || a[0] == '~' {
		return false
	}
	if isShortOption(a) && strings.ContainsAny(a, "/~") {
		return false
	}
	if strings.HasPrefix(a, "--") {
		if _, v, ok := strings.Cut(a, "="); ok && !hostPathFree(v) {
			return false
		}
	}
	return !slices.Contains(strings.Split(a, "/"), "..")
}

// uniqRule admits uniq with flag-only options and at most one input: a
// second operand would be an output file.
func uniqRule(args []string) bool {
	operands := 0
	for _, a := range args {
		switch {
		case a == "--count" || a == "--repeated" || a == "--unique" || a == "--ignore-case":
		case isShortOption(a):
			if strings.Trim(a[1:], "cdui") != "" {
				return false
			}
		case strings.HasPrefix(a, "-") && a != "-":
			return false
		default:
			operands++
			if !hostPathFree(a) {
				return false
			}
		}
	}
	return operands <= 1
}

// sedPrint is the only sed program admitted: print a line or a range.
var sedPrint = regexp.MustCompile(`^([0-9]{1,9}|\$)(,([0-9]{1,9}|\$))?p$`)

// sedRule admits exactly "sed -n 'N[,M]p' [files...]".
func sedRule(args []string) bool {
	if len(args) < 2 || args[0] != "-n" || !sedPrint.MatchString(args[1]) {
		return false
	}
	for _, a := range args[2:] {
		if strings.HasPrefix(a, "-") || !hostPathFree(a) {
			return false
		}
	}
	return true
}
