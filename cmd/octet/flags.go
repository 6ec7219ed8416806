package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
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
		fmt.Fprintf(out, "usage: %s\n\nflags:\n", synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			if hiddenFlags[f.Name] {
				return
			}
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(out, "  --%s %s\n    \t%s\n", f.Name, name, usage)
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
	fs.Func("tools", "comma-separated tool `list` to enable (read,search,edit,write,bash)", str(&f.Tools))
	fs.BoolVar(&f.NoContextFiles, "no-context-files", false, "do not load AGENTS.md into the instructions")
	fs.BoolVar(&f.Offline, "offline", false, "turn off optional discovery; octet has none today, so this changes nothing: model requests still go to the provider (it is not a network sandbox)")
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

// parseFlags parses args; -h prints usage and returns errHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return &exitError{code: exitOK}
	}
	if err != nil {
		return &exitError{code: exitUsage} // the flag package already printed it
	}
	return nil
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
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
	return exitFailed
}
