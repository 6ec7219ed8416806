package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// subcommand is one command of a group (octet sessions, octet mcp): its
// usage line and what runs it with the arguments after its name.
type subcommand struct {
	name, synopsis string
	run            func(ctx context.Context, args []string, e env) error
}

// group is a command with subcommands.
type group struct {
	name string
	subs []subcommand
}

// usage writes the group's subcommands, one usage line each, to w.
func (g group) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: octet %s <command> [arguments]\n\ncommands:\n", g.name)
	for _, s := range g.subs {
		fmt.Fprintf(w, "  %s\n", s.synopsis)
	}
	fmt.Fprintf(w, "\nRun \"octet %s <command> -h\" for a command's flags.\n", g.name)
}

// run dispatches args to a subcommand: with none, the usage on stderr
// (exit 2); -h, --help or help (optionally naming a subcommand) print
// help on stdout.
func (g group) run(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		g.usage(e.stderr)
		return &exitError{code: exitUsage}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "--help", "-help":
		g.usage(e.stdout)
		return nil
	case "help":
		if len(rest) == 0 {
			g.usage(e.stdout)
			return nil
		}
		name, rest = rest[0], []string{"-h"}
	}
	for _, s := range g.subs {
		if s.name == name {
			return s.run(ctx, rest, e)
		}
	}
	if strings.HasPrefix(name, "-") {
		return usageErrorf("%s: unknown flag %s; flags come after the command (octet %s -h lists the commands)", g.name, name, g.name)
	}
	names := make([]string, len(g.subs))
	for i, s := range g.subs {
		names[i] = s.name
	}
	if s := closestName(name, names); s != "" {
		return usageErrorf("unknown %s command %q; did you mean %q? (octet %s -h lists the commands)", g.name, name, s, g.name)
	}
	return usageErrorf("unknown %s command %q; the commands are %s", g.name, name, strings.Join(names, ", "))
}

// closestName returns the name in names most like name, or "" when none
// is close (within a third of its length in edits).
func closestName(name string, names []string) string {
	best, bestDist := "", 0
	for _, n := range names {
		if d := editDistance(name, n); best == "" || d < bestDist {
			best, bestDist = n, d
		}
	}
	if best == "" || bestDist > max(1, len(name)/3) {
		return ""
	}
	return best
}

// runHelp is `octet help [command [subcommand]]`: the overview, or the
// help of the command named.
func runHelp(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || slices.Contains([]string{"help", "-h", "--help", "-help"}, args[0]) {
		fmt.Fprint(e.stdout, usageText)
		return nil
	}
	if !slices.Contains(commandNames, args[0]) {
		return usageErrorf("no help for %q: it is not an octet command (octet help lists them)", args[0])
	}
	return dispatch(ctx, args[0], append(slices.Clone(args[1:]), "-h"), e)
}
