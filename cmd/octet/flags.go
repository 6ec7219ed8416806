package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/octet-agent/octet/internal/config"
)

// hiddenFlags are accepted but not listed in -h.
var hiddenFlags = map[string]bool{"safe": true, "yolo": true}

// newFlagSet returns a FlagSet that reports errors instead of exiting and
// prints usage without the hidden flags.
func newFlagSet(name, synopsis string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: %s\n", synopsis)
		header := "\nflags:\n"
		fs.VisitAll(func(f *flag.Flag) {
			if hiddenFlags[f.Name] {
				return
			}
			fmt.Fprint(out, header)
			header = ""
			name, usage := flag.UnquoteUsage(f)
			dashes := "--"
			if len(f.Name) == 1 {
				dashes = "-"
			}
			fmt.Fprintf(out, "  %s%s %s\n    \t%s\n", dashes, f.Name, name, usage)
		})
	}
	return fs
}

// addPolicyFlags binds the flags shared by lsp and exec to f.
func addPolicyFlags(fs *flag.FlagSet, f *config.Flags) {
	str := func(dst **string) func(string) error {
		return func(s string) error { *dst = &s; return nil }
	}
	fs.BoolVar(&f.SafeMode, "safe-mode", false, "select controlled_bash_approval (every bash call is confirmed) and keep file tools inside the workspace; conflicts with --effect-policy")
	fs.BoolVar(&f.SafeMode, "safe", false, "hidden alias of --safe-mode")
	fs.BoolVar(&f.Yolo, "yolo", false, "no longer accepted")
	fs.Func("effect-policy", "`policy`: controlled, controlled_bash_approval or unsafe_host (default unsafe_host; env OCTET_EFFECT_POLICY)", str(&f.EffectPolicy))
	fs.Func("tools", "the only tools the model sees: a comma-separated `list` of "+strings.Join(config.BuiltinTools, ",")+" or an MCP server's mcp__<server>__<tool>", str(&f.Tools))
	fs.BoolVar(&f.NoContextFiles, "no-context-files", false, "do not load AGENTS.md into the instructions")
	fs.BoolVar(&f.Offline, "offline", false, "turn off optional discovery: no MCP server is listed or started; model requests still go to the provider (it is not a network sandbox)")
	fs.Func("shell-path", "absolute `path` of the shell bash runs commands with", str(&f.ShellPath))
	fs.Var(&boolFlag{dst: &f.AllowShell}, "allow-shell", "allow_shell: --allow-shell=false removes bash; true does not bypass allow_process, the effect policy or its approvals")
	fs.Func("model", "model `name` (default "+config.DefaultModel+")", str(&f.Model))
	fs.Func("reasoning", "reasoning `effort`: "+strings.Join(config.ReasoningEfforts, ", "), str(&f.Reasoning))
}

// boolFlag is a boolean flag that records whether it was given at all
// (--name, --name=true, --name=false), so it can override configuration
// only when present.
type boolFlag struct{ dst **bool }

func (b *boolFlag) IsBoolFlag() bool { return true }

func (b *boolFlag) String() string {
	if b.dst == nil || *b.dst == nil {
		return ""
	}
	return strconv.FormatBool(**b.dst)
}

func (b *boolFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, not %q", s)
	}
	*b.dst = &v
	return nil
}

// parseFlags parses args; -h prints usage and returns an exitError with
// code 0. A bad flag is a usage error in GNU spelling (--name) with the
// closest flag as a suggestion, not the whole usage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	if errors.Is(err, flag.ErrHelp) {
		usage()
		return &exitError{code: exitOK}
	}
	if err != nil {
		return &exitError{code: exitUsage, err: flagError(fs, err)}
	}
	return nil
}

var (
	unknownFlagRE = regexp.MustCompile(`^flag provided but not defined: -(.*)$`)
	// singleDashRE finds the flag package's "-name" spellings.
	singleDashRE = regexp.MustCompile(`(^|[ :]|for )-([A-Za-z][\w-]*)`)
)

// flagError rewrites a flag package error for a person: GNU spelling, a
// suggestion for an unknown flag, and where the flags are listed.
func flagError(fs *flag.FlagSet, err error) error {
	help := fmt.Sprintf("octet %s -h lists the flags", fs.Name())
	if m := unknownFlagRE.FindStringSubmatch(err.Error()); m != nil {
		name := strings.TrimLeft(m[1], "-")
		if s := closestFlag(fs, name); s != "" {
			return fmt.Errorf("%s: unknown flag --%s; did you mean --%s? (%s)", fs.Name(), name, s, help)
		}
		var names []string
		fs.VisitAll(func(f *flag.Flag) {
			if !hiddenFlags[f.Name] {
				names = append(names, "--"+f.Name)
			}
		})
		if len(names) == 0 {
			return fmt.Errorf("%s: unknown flag --%s (%s takes no flags)", fs.Name(), name, fs.Name())
		}
		return fmt.Errorf("%s: unknown flag --%s; the flags are %s (%s)", fs.Name(), name, strings.Join(names, ", "), help)
	}
	msg := singleDashRE.ReplaceAllString(err.Error(), "${1}--${2}")
	return fmt.Errorf("%s: %s (%s)", fs.Name(), msg, help)
}

// closestFlag returns the listed flag of fs most like name, or "" when
// none is close: within a third of the name's length in edits, or one
// name containing the other.
func closestFlag(fs *flag.FlagSet, name string) string {
	best, bestDist := "", 0
	fs.VisitAll(func(f *flag.Flag) {
		if hiddenFlags[f.Name] {
			return
		}
		d := editDistance(strings.ToLower(name), f.Name)
		if len(name) >= 3 && len(f.Name) >= 3 && (strings.Contains(f.Name, name) || strings.Contains(name, f.Name)) {
			d = min(d, 1)
		}
		if best == "" || d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	if best == "" || bestDist > max(1, len(name)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if xe, ok := errors.AsType[*exitError](err); ok {
		return xe.code
	}
	if _, ok := errors.AsType[*config.UsageError](err); ok {
		return exitUsage
	}
	if _, ok := errors.AsType[*config.FileError](err); ok {
		return exitUsage
	}
	if _, ok := errors.AsType[*config.MissingKeyError](err); ok {
		return exitUsage
	}
	if _, ok := errors.AsType[*config.ModeError](err); ok {
		return exitUsage
	}
	if _, ok := errors.AsType[*config.ACLError](err); ok {
		return exitUsage
	}
	return exitFailed
}
