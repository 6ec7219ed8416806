package tools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"mvdan.cc/sh/v3/syntax"

	"github.com/octet-agent/octet/internal/fsroot"
)

// This file is the read-only allowlist that Controlled auto-approves
// shell calls with. docs/security.md (its appendix) describes every table below
// and what each check proves; keep the two in step.

// Bounds of a command line the read-only allowlist will even look at.
const (
	maxReadOnlyCommandBytes = 4096
	maxReadOnlyWords        = 128
	maxPipelineCommands     = 4
)

// CheckReadOnly decides whether a shell-channel call may run without
// asking under Controlled: nil means it is auto-approvable, an error says
// why not (for debug logs only; it is never shown to the model, and it
// never contains an environment value). Refusing only means the call
// needs the user's confirmation.
//
// It proves, in this order:
//
//  1. the command line is one literal simple command or a pipeline of up
//     to four (IsReadOnlyCommand: no expansion, redirection, assignment or
//     sequencing), each a program of the allowlist whose words parse
//     against that program's table of allowed options (exact spellings,
//     with arity) and real operand structure;
//  2. the shell is an absolute bash/dash/sh outside the workspace, and the
//     environment the command gets (call.Env) can neither change which
//     code runs (exported functions, BASH_ENV/ENV, LD_*, SHELLOPTS, ...)
//     nor how the programs parse their words (POSIXLY_CORRECT,
//     GREP_OPTIONS, RIPGREP_CONFIG_PATH, ...);
//  3. command lookup is fixed (commandLookupFixed): every PATH entry is
//     absolute and outside the workspace, and every program found on PATH
//     resolves outside the workspace;
//  4. every path operand (and path-valued option argument) resolves
//     beneath call.Dir, the directory the command runs in, through the
//     file tools' no-follow resolver (fsroot) to a directory or to a
//     regular file with a single hard link: no symbolic link in any
//     component, no FIFO, socket or device, nothing absent.
//
// What it cannot see is refused, never allowed. What it does not cover
// (races with a concurrently running process, entries met while a program
// recurses into a checked directory, mount points) is documented in
// docs/security.md.
func CheckReadOnly(call ShellCall) error { return checkReadOnly(call, nil) }

// checkReadOnly is CheckReadOnly, recording in rec (when not nil) what it
// examined.
func checkReadOnly(call ShellCall, rec *inspection) error {
	cmds, err := parseReadOnly(call.Command)
	if err != nil {
		return err
	}
	ws, err := openWorkspace(call.Dir)
	if err != nil {
		return err
	}
	env, err := parseCommandEnv(call.Env)
	if err != nil {
		return err
	}
	rec.sawOutside(call.Shell)
	if err := checkShell(call.Shell, env, ws); err != nil {
		return err
	}
	if err := checkEnv(env, cmds, ws); err != nil {
		return err
	}
	var external []string
	for _, c := range cmds {
		if !readOnlyPrograms[c.name].builtin {
			external = append(external, c.name)
		}
	}
	if err := commandLookupFixed(env, ws, external, rec); err != nil {
		return err
	}
	rec.planned(cmds)
	return checkOperands(call.Dir, cmds, rec)
}

// inspection is what one check examined: the commands as it parsed them,
// the paths beneath the working directory it inspected for each program,
// and the absolute paths it looked at outside (the shell, every PATH
// candidate). The test that runs the real programs under strace
// (bashsafe_strace_test.go) asserts that they touch nothing else. A nil
// *inspection records nothing.
type inspection struct {
	commands []plannedCommand
	inside   map[string]map[string]bool // program → cleaned relative paths
	outside  map[string]bool
}

// planned records the commands as parsed.
func (r *inspection) planned(cmds []plannedCommand) {
	if r != nil {
		r.commands = cmds
	}
}

// saw records that rel, beneath the working directory, was inspected for
// program.
func (r *inspection) saw(program, rel string) {
	if r == nil {
		return
	}
	if r.inside == nil {
		r.inside = map[string]map[string]bool{}
	}
	if r.inside[program] == nil {
		r.inside[program] = map[string]bool{}
	}
	r.inside[program][path.Clean(rel)] = true
}

// sawOutside records that the absolute path p was looked at.
func (r *inspection) sawOutside(p string) {
	if r == nil {
		return
	}
	if r.outside == nil {
		r.outside = map[string]bool{}
	}
	r.outside[p] = true
}

// IsReadOnlyCommand reports whether command passes the syntactic part of
// CheckReadOnly: the shell grammar, the per-program option tables and the
// shapes of the operands. It looks at neither the filesystem nor the
// environment, so true is necessary but not sufficient for auto-approval;
// the broker calls CheckReadOnly.
func IsReadOnlyCommand(command string) bool {
	_, err := parseReadOnly(command)
	return err == nil
}

// plannedCommand is one command of an admitted pipeline: its words, the
// program and the workspace-relative paths it will open that must be
// inspected.
type plannedCommand struct {
	argv  []string
	name  string
	paths []string
}

// parseReadOnly runs the syntactic checks and returns each command with
// the paths it names.
func parseReadOnly(command string) ([]plannedCommand, error) {
	if len(command) == 0 || len(command) > maxReadOnlyCommandBytes {
		return nil, errors.New("command is empty or longer than 4 KiB")
	}
	for i := 0; i < len(command); i++ {
		if c := command[i]; c < 0x20 || c > 0x7e {
			return nil, errors.New("command has a control, newline or non-ASCII byte")
		}
	}
	p := syntax.NewParser(syntax.KeepComments(true), syntax.Variant(syntax.LangBash))
	f, err := p.Parse(strings.NewReader(command), "")
	if err != nil || len(f.Stmts) != 1 || len(f.Last) != 0 || !onlyLiteralNodes(f) {
		return nil, errors.New("command is not one literal simple command or pipeline")
	}
	var argvs [][]string
	if !flattenPipeline(f.Stmts[0], &argvs) || len(argvs) > maxPipelineCommands {
		return nil, errors.New("command is not a pipeline of at most four literal commands")
	}
	words := 0
	cmds := make([]plannedCommand, 0, len(argvs))
	for _, argv := range argvs {
		words += len(argv)
		if words > maxReadOnlyWords {
			return nil, errors.New("command has too many words")
		}
		c, err := planArgv(argv)
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, c)
	}
	return cmds, nil
}

// planArgv checks one command against its program's table.
func planArgv(argv []string) (plannedCommand, error) {
	if len(argv) == 0 {
		return plannedCommand{}, errors.New("empty command")
	}
	name := argv[0]
	prog, ok := readOnlyPrograms[name]
	if !ok {
		return plannedCommand{}, fmt.Errorf("%q is not on the read-only allowlist", name)
	}
	args := argv[1:]
	// Whatever position a word is in, spelling a refused option refuses
	// the command (so "grep -e --file=x" is refused too): the table parse
	// below is the rule, this scan keeps the refusal lists binding.
	for _, a := range args {
		if opt, bad := prog.refusedWord(a); bad {
			return plannedCommand{}, fmt.Errorf("%s: option %s is refused (it writes, executes, reads names or patterns from elsewhere, or follows links)", name, opt)
		}
	}
	paths, err := prog.check(prog, args)
	if err != nil {
		return plannedCommand{}, fmt.Errorf("%s: %w", name, err)
	}
	return plannedCommand{argv: argv, name: name, paths: paths}, nil
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

// ---------------------------------------------------------------------
// Option tables.

// argKind is an option's arity, as GNU getopt_long spells it.
type argKind uint8

const (
	// noArg: a flag ("-n", "--count"); "--count=x" is refused.
	noArg argKind = iota
	// reqArg: "-n5", "-n 5", "--lines=5", "--lines 5".
	reqArg
	// optArg: "-xVAL" or "--name=VAL" only; a following word is an operand.
	optArg
	// attachedArg: a GNU optional argument that the table requires: only
	// "--name=VAL" is accepted (bare "--name" has a default the table
	// refuses, and a following word would be an operand anyway).
	attachedArg
)

// optSpec is one allowed option.
type optSpec struct {
	kind argKind
	// valid checks the argument; nil accepts any value, which is only
	// used for values that are never opened (patterns, globs, formats).
	valid func(string) bool
	// path marks an argument that names a file: it is inspected like an
	// operand.
	path bool
}

// optTable is a program's allowlist of options. Anything not in it is
// refused, whatever it means; long options must be spelled exactly (the
// unambiguous abbreviations GNU getopt accepts are simply not in it).
type optTable struct {
	short map[byte]optSpec
	long  map[string]optSpec
}

// newOpts builds a table: flags is every short flag letter, longFlags the
// long flags, args the options that take an argument ("-n" or "--lines").
func newOpts(flags string, longFlags []string, args map[string]optSpec) *optTable {
	t := &optTable{short: map[byte]optSpec{}, long: map[string]optSpec{}}
	for i := 0; i < len(flags); i++ {
		t.short[flags[i]] = optSpec{}
	}
	for _, l := range longFlags {
		t.long[l] = optSpec{}
	}
	for name, s := range args {
		if strings.HasPrefix(name, "--") {
			t.long[name] = s
		} else {
			t.short[name[1]] = s
		}
	}
	return t
}

// parsedOpt is one option as parsed: its name ("-n", "--lines") and value.
type parsedOpt struct {
	name  string
	value string
}

// parse splits args the way GNU getopt_long does with argument
// permutation (options may follow operands; "--" ends options; "-" is an
// operand), refusing any option that is not in the table, a flag given a
// value, a missing argument or an argument its validator refuses.
func (t *optTable) parse(args []string) (opts []parsedOpt, operands []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, append(operands, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a, "=")
			s, ok := t.long[name]
			if !ok {
				return nil, nil, fmt.Errorf("option %s is not in its read-only table", name)
			}
			switch s.kind {
			case noArg:
				if hasVal {
					return nil, nil, fmt.Errorf("option %s takes no argument", name)
				}
			case reqArg:
				if !hasVal {
					if i+1 >= len(args) {
						return nil, nil, fmt.Errorf("option %s needs an argument", name)
					}
					i++
					val, hasVal = args[i], true
				}
			case attachedArg:
				if !hasVal {
					return nil, nil, fmt.Errorf("option %s needs an attached argument (%s=VALUE)", name, name)
				}
			}
			if hasVal && s.valid != nil && !s.valid(val) {
				return nil, nil, fmt.Errorf("option %s: argument is not an allowed value", name)
			}
			if hasVal && s.path {
				operands = append(operands, val) // resolved like an operand
			}
			opts = append(opts, parsedOpt{name, val})
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				s, ok := t.short[c]
				if !ok {
					return nil, nil, fmt.Errorf("option -%c is not in its read-only table", c)
				}
				name := "-" + string(c)
				if s.kind == noArg {
					opts = append(opts, parsedOpt{name: name})
					continue
				}
				val := a[j+1:]
				if val == "" && s.kind == reqArg {
					if i+1 >= len(args) {
						return nil, nil, fmt.Errorf("option %s needs an argument", name)
					}
					i++
					val = args[i]
				}
				if (val != "" || s.kind == reqArg) && s.valid != nil && !s.valid(val) {
					return nil, nil, fmt.Errorf("option %s: argument is not an allowed value", name)
				}
				if s.path {
					return nil, nil, fmt.Errorf("option %s takes a path", name) // no table has one
				}
				opts = append(opts, parsedOpt{name, val})
				break
			}
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands, nil
}

// has reports whether any of names was given.
func has(opts []parsedOpt, names ...string) bool {
	for _, o := range opts {
		for _, n := range names {
			if o.name == n {
				return true
			}
		}
	}
	return false
}

// Argument validators.

// matches returns a validator of the strings the regular expression re
// matches.
func matches(re string) func(string) bool {
	compiled := lazyRegexp(re)
	return func(s string) bool { return compiled().MatchString(s) }
}

// lazyRegexp returns a function returning re compiled, at its first call:
// a process compiles only the expressions it uses (compiling every one of
// this package's at start-up took ~1.5 ms of each octet process's start).
// Only package variables' initializers call it.
func lazyRegexp(re string) func() *regexp.Regexp {
	lazyPatterns = append(lazyPatterns, re)
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(re) })
}

// lazyPatterns are the expressions lazyRegexp was given, for a test to
// compile every one.
var lazyPatterns []string

func oneOf(vals ...string) func(string) bool {
	return func(v string) bool {
		for _, x := range vals {
			if v == x {
				return true
			}
		}
		return false
	}
}

var (
	number    = matches(`^[0-9]{1,9}$`)
	headCount = matches(`^-?[0-9]{1,18}(b|kB|K|KiB|MB|M|MiB|GB|G|GiB)?$`)
	tailCount = matches(`^[+-]?[0-9]{1,18}(b|kB|K|KiB|MB|M|MiB|GB|G|GiB)?$`)
	colorWhen = oneOf("always", "yes", "force", "never", "no", "none", "auto", "tty", "if-tty")
	anyArg    = optSpec{kind: reqArg}
	reqNumber = optSpec{kind: reqArg, valid: number}
)

// readOnlyProgram is one allowlisted program.
type readOnlyProgram struct {
	// builtin marks a shell builtin (no PATH lookup).
	builtin bool
	// opts is the allowed-options table (nil: the program parses its own
	// words, see check).
	opts *optTable
	// refused lists the options of the real program that write, execute,
	// read file names or patterns from elsewhere, or follow links. They
	// are never in opts (a test checks it); they are listed so the
	// documentation and the tests can try every one, and so that a word
	// spelling one refuses the command wherever it stands.
	refused []string
	// exactWords: refused entries match whole words only (find's
	// single-dash primaries), not short-option letters or abbreviations.
	exactWords bool
	// env names variables that must be absent when this program runs.
	env []string
	// ignoreFiles marks a program (rg) that reads ignore files in the
	// directories it searches and their parents, opening them with links
	// followed: checkIgnoreFiles inspects them.
	ignoreFiles bool
	// check parses the arguments (without the program name) and returns
	// the paths to inspect.
	check func(p *readOnlyProgram, args []string) ([]string, error)
}

// refusedWord reports whether a spells one of the program's refused
// options: exactly (find), as "-x" inside a short-option cluster, or as a
// long option, "--opt=value" or any abbreviation GNU getopt would accept.
func (p *readOnlyProgram) refusedWord(a string) (string, bool) {
	for _, r := range p.refused {
		switch {
		case p.exactWords:
			if a == r {
				return r, true
			}
		case strings.HasPrefix(r, "--"):
			name, _, _ := strings.Cut(a, "=")
			if len(name) <= 2 || !strings.HasPrefix(r, name) {
				continue
			}
			// An exact match of an allowed option is that option, not an
			// abbreviation ("--exclude" is not "--exclude-from").
			if p.opts != nil {
				if _, exact := p.opts.long[name]; exact && name != r {
					continue
				}
			}
			return r, true
		default: // "-x"
			if len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a[1:], r[1]) >= 0 {
				return r, true
			}
		}
	}
	return "", false
}

// pathOperands checks operand shapes and returns the paths to inspect;
// "-" is standard input when stdinDash (for ls it is a file named "-").
func pathOperands(ops []string, stdinDash bool) ([]string, error) {
	var paths []string
	for _, op := range ops {
		if op == "-" && stdinDash {
			continue
		}
		if err := pathShape(op); err != nil {
			return nil, err
		}
		paths = append(paths, op)
	}
	return paths, nil
}

// pathShape refuses an operand that is not a plain workspace-relative
// path: empty, absolute, home-relative, with a ".." component, or
// starting with "+" (obsolete option syntax of head, tail, sort, uniq).
func pathShape(p string) error {
	switch {
	case p == "":
		return errors.New("empty path operand")
	case p[0] == '/':
		return errors.New("absolute path operand")
	case p[0] == '~':
		return errors.New("home-relative path operand")
	case p[0] == '+':
		return errors.New(`operand starting with "+"`)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return errors.New(`path operand with a ".." component`)
		}
	}
	return nil
}

// filesCheck is the check of programs whose operands are all files
// ("-" being standard input unless dashIsFile).
func filesCheck(dashIsFile bool) func(*readOnlyProgram, []string) ([]string, error) {
	return func(p *readOnlyProgram, args []string) ([]string, error) {
		_, ops, err := p.opts.parse(args)
		if err != nil {
			return nil, err
		}
		return pathOperands(ops, !dashIsFile)
	}
}

// lsCheck: every operand is a path ("-" too); none lists ".".
func lsCheck(p *readOnlyProgram, args []string) ([]string, error) {
	paths, err := filesCheck(true)(p, args)
	if err == nil && len(paths) == 0 {
		paths = []string{"."}
	}
	return paths, err
}

// obsoleteCountCheck admits head's and tail's obsolete "-NUM" as the
// first argument only, then parses like filesCheck.
func obsoleteCountCheck(p *readOnlyProgram, args []string) ([]string, error) {
	if len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && number(args[0][1:]) {
		args = args[1:]
	}
	return filesCheck(false)(p, args)
}

// patternCheck is grep's and rg's structure: the first operand is the
// pattern unless -e/--regexp was given (or, for rg, --files lists files);
// the rest are files, "-" being standard input (which rg also stats as a
// path: statsDash). Without them the program searches "." when
// searchesDot says so for the options given, else standard input.
func patternCheck(searchesDot func([]parsedOpt) bool, statsDash bool) func(*readOnlyProgram, []string) ([]string, error) {
	return func(p *readOnlyProgram, args []string) ([]string, error) {
		opts, ops, err := p.opts.parse(args)
		if err != nil {
			return nil, err
		}
		if !has(opts, "-e", "--regexp") && !has(opts, "--files") {
			if len(ops) == 0 {
				return nil, errors.New("no pattern")
			}
			ops = ops[1:]
		}
		if len(ops) == 0 && searchesDot(opts) {
			return []string{"."}, nil
		}
		return pathOperands(ops, !statsDash)
	}
}

// grepRecursive reports whether grep's last directories setting (-r,
// --recursive, -d or --directories) is recurse: grep then searches "."
// when given no file.
func grepRecursive(opts []parsedOpt) bool {
	recursive := false
	for _, o := range opts {
		switch o.name {
		case "-r", "--recursive":
			recursive = true
		case "-d", "--directories":
			recursive = o.value == "recurse"
		}
	}
	return recursive
}

// rgSearchesDot is rg's searchesDot: without a path it searches ".".
func rgSearchesDot([]parsedOpt) bool { return true }

// uniqCheck: at most one operand; a second would be the output file.
func uniqCheck(p *readOnlyProgram, args []string) ([]string, error) {
	_, ops, err := p.opts.parse(args)
	if err != nil {
		return nil, err
	}
	if len(ops) > 1 {
		return nil, errors.New("a second operand is an output file")
	}
	return pathOperands(ops, true)
}

// sedPrintOnly is the only sed program admitted: line-number addresses
// and ranges with the p command, separated by ";" ("1,20p", "5p;$p").
var sedPrintOnly = lazyRegexp(`^(([0-9]{1,9}|\$)(,([0-9]{1,9}|\$))?p)(;([0-9]{1,9}|\$)(,([0-9]{1,9}|\$))?p){0,15}$`)

// sedCheck admits sed -n with print-only programs.
func sedCheck(p *readOnlyProgram, args []string) ([]string, error) {
	opts, ops, err := p.opts.parse(args)
	if err != nil {
		return nil, err
	}
	if !has(opts, "-n", "--quiet", "--silent") {
		return nil, errors.New("sed without -n")
	}
	var scripts []string
	for _, o := range opts {
		if o.name == "-e" || o.name == "--expression" {
			scripts = append(scripts, o.value)
		}
	}
	if len(scripts) == 0 {
		if len(ops) == 0 {
			return nil, errors.New("no program")
		}
		scripts, ops = ops[:1], ops[1:]
	}
	for _, s := range scripts {
		if !sedPrintOnly().MatchString(s) {
			return nil, errors.New("the program is not print-only (N[,M]p)")
		}
	}
	return pathOperands(ops, true)
}

// pwdCheck admits pwd [-L|-P] (a builtin; no operands).
func pwdCheck(_ *readOnlyProgram, args []string) ([]string, error) {
	for _, a := range args {
		if a != "-L" && a != "-P" {
			return nil, errors.New("pwd takes only -L or -P")
		}
	}
	return nil, nil
}

// echoCheck admits any words: echo prints them and opens nothing. (What
// it prints can only reach a later command's standard input, and no
// option in any table reads file names from there.)
func echoCheck(*readOnlyProgram, []string) ([]string, error) { return nil, nil }

// find's expression grammar: operators, and the primaries below with
// their arity. Anything else is refused.
var (
	findOperators = map[string]bool{"(": true, ")": true, "!": true, ",": true, "-not": true, "-a": true, "-and": true, "-o": true, "-or": true}
	findNoArg     = map[string]bool{
		"-print": true, "-print0": true, "-prune": true, "-quit": true, "-ls": true,
		"-true": true, "-false": true, "-empty": true, "-nouser": true, "-nogroup": true,
		"-depth": true, "-xdev": true, "-mount": true, "-noleaf": true, "-daystart": true,
		"-ignore_readdir_race": true, "-noignore_readdir_race": true,
	}
	findNumber = matches(`^[+-]?[0-9]{1,18}$`)
	findOneArg = map[string]optSpec{
		"-name": anyArg, "-iname": anyArg, "-path": anyArg, "-ipath": anyArg, "-wholename": anyArg, "-iwholename": anyArg,
		"-regex": anyArg, "-iregex": anyArg, "-lname": anyArg, "-ilname": anyArg,
		"-regextype": {kind: reqArg, valid: matches(`^[a-z0-9-]{1,32}$`)},
		"-type":      {kind: reqArg, valid: matches(`^[bcdpflsD](,[bcdpflsD]){0,7}$`)},
		"-size":      {kind: reqArg, valid: matches(`^[+-]?[0-9]{1,18}[bcwkMG]?$`)},
		"-perm":      {kind: reqArg, valid: matches(`^[-/]?([0-7]{1,4}|[ugoa]*[-+=][rwxXst]*(,[ugoa]*[-+=][rwxXst]*){0,7})$`)},
		"-user":      {kind: reqArg, valid: matches(`^[A-Za-z0-9._-]{1,64}$`)},
		"-group":     {kind: reqArg, valid: matches(`^[A-Za-z0-9._-]{1,64}$`)},
		"-maxdepth":  reqNumber, "-mindepth": reqNumber,
		"-mtime": {kind: reqArg, valid: findNumber}, "-atime": {kind: reqArg, valid: findNumber},
		"-ctime": {kind: reqArg, valid: findNumber}, "-mmin": {kind: reqArg, valid: findNumber},
		"-amin": {kind: reqArg, valid: findNumber}, "-cmin": {kind: reqArg, valid: findNumber},
		"-uid": {kind: reqArg, valid: findNumber}, "-gid": {kind: reqArg, valid: findNumber},
		"-links": {kind: reqArg, valid: findNumber}, "-inum": {kind: reqArg, valid: findNumber},
		"-newer": {kind: reqArg, path: true}, "-anewer": {kind: reqArg, path: true},
		"-cnewer": {kind: reqArg, path: true}, "-samefile": {kind: reqArg, path: true},
	}
)

// findCheck parses find [-P]... [--] [starting-point...] [expression] as
// GNU find does (process_leading_options, then looks_like_expression):
// leading options end at "--" or at the first other word (only -P is
// admitted); the starting points are the words that follow up to the
// first that starts the expression, none meaning "."; every expression
// word must be an allowlisted operator or primary with its argument.
func findCheck(_ *readOnlyProgram, args []string) ([]string, error) {
	i := 0
	for i < len(args) && args[i] == "-P" {
		i++
	}
	if i < len(args) && args[i] == "--" {
		i++
	}
	var paths []string
	for ; i < len(args) && !findStartsExpression(args[i], true); i++ {
		if err := pathShape(args[i]); err != nil {
			return nil, err
		}
		paths = append(paths, args[i])
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case findOperators[a], findNoArg[a]:
		default:
			s, ok := findOneArg[a]
			if !ok {
				return nil, fmt.Errorf("expression word %q is not in the read-only grammar", a)
			}
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s needs an argument", a)
			}
			i++
			v := args[i]
			if s.valid != nil && !s.valid(v) {
				return nil, fmt.Errorf("%s: argument is not an allowed value", a)
			}
			if s.path {
				if err := pathShape(v); err != nil {
					return nil, err
				}
				paths = append(paths, v)
			}
		}
	}
	return paths, nil
}

// findStartsExpression is GNU find's looks_like_expression: a word of two
// or more characters starting with "-", and "(" and "!", start the
// expression; ")" and "," do too, except where a starting point may stand
// (leading), where they are paths like "-" and any other word.
func findStartsExpression(a string, leading bool) bool {
	switch a {
	case "(", "!":
		return true
	case ")", ",":
		return !leading
	}
	return len(a) > 1 && a[0] == '-'
}

// The allowlisted programs. git is deliberately absent: repository
// configuration (core.fsmonitor, diff.external, textconv drivers, pagers)
// lets a hostile .git/config run programs from an innocent-looking git
// status, so every git command is confirmed.
var readOnlyPrograms = map[string]*readOnlyProgram{
	"echo": {builtin: true, check: echoCheck},
	"pwd":  {builtin: true, check: pwdCheck},
	"ls": {
		opts: newOpts("abcdfghiklmnopqrstuvxABCGNQRSUXZ1",
			[]string{"--all", "--almost-all", "--author", "--escape", "--ignore-backups", "--directory",
				"--full-time", "--no-group", "--human-readable",
				"--si", "--inode", "--kibibytes", "--literal", "--numeric-uid-gid", "--hide-control-chars",
				"--show-control-chars", "--quote-name", "--reverse", "--recursive", "--size", "--context",
				"--zero", "--help", "--version"},
			map[string]optSpec{
				"-w": reqNumber, "--width": reqNumber, "-T": reqNumber, "--tabsize": reqNumber,
				"-I": anyArg, "--ignore": anyArg, "--hide": anyArg, "--time-style": anyArg,
				"--block-size":      {kind: reqArg, valid: matches(`^'?[0-9]{0,9}[KMGTPEZY]?(iB|B)?$`)},
				"--sort":            {kind: reqArg, valid: oneOf("none", "size", "time", "version", "extension", "width")},
				"--time":            {kind: reqArg, valid: oneOf("atime", "access", "use", "ctime", "status", "mtime", "modification", "birth", "creation")},
				"--format":          {kind: reqArg, valid: oneOf("across", "commas", "horizontal", "long", "single-column", "verbose", "vertical")},
				"--indicator-style": {kind: reqArg, valid: oneOf("none", "slash")},
				"--quoting-style": {kind: reqArg, valid: oneOf("literal", "locale", "shell", "shell-always",
					"shell-escape", "shell-escape-always", "c", "c-maybe", "escape")},
				// Colouring stats link targets (orphans); output is a
				// pipe, so auto means never.
				"--color":  {kind: attachedArg, valid: oneOf("never", "no", "none", "auto", "tty", "if-tty")},
				"--colour": {kind: attachedArg, valid: oneOf("never", "no", "none", "auto", "tty", "if-tty")},
			}),
		// -F, --classify, --file-type and --group-directories-first stat
		// what each symbolic link points to (an outside path's existence
		// and type).
		refused: []string{"-L", "--dereference", "-H", "--dereference-command-line",
			"--dereference-command-line-symlink-to-dir", "-F", "--classify", "--file-type",
			"--group-directories-first"},
		check: lsCheck,
	},
	"cat": {
		opts: newOpts("AbeEnstTuv",
			[]string{"--show-all", "--number-nonblank", "--show-ends", "--number", "--squeeze-blank",
				"--show-tabs", "--show-nonprinting", "--help", "--version"}, nil),
		check: filesCheck(false),
	},
	"head": {
		opts: newOpts("qvz", []string{"--quiet", "--silent", "--verbose", "--zero-terminated", "--help", "--version"},
			map[string]optSpec{
				"-n": {kind: reqArg, valid: headCount}, "--lines": {kind: reqArg, valid: headCount},
				"-c": {kind: reqArg, valid: headCount}, "--bytes": {kind: reqArg, valid: headCount},
			}),
		check: obsoleteCountCheck,
	},
	"tail": {
		opts: newOpts("qvz", []string{"--quiet", "--silent", "--verbose", "--zero-terminated", "--help", "--version"},
			map[string]optSpec{
				"-n": {kind: reqArg, valid: tailCount}, "--lines": {kind: reqArg, valid: tailCount},
				"-c": {kind: reqArg, valid: tailCount}, "--bytes": {kind: reqArg, valid: tailCount},
			}),
		refused: []string{"-f", "-F", "--follow", "--retry", "-s", "--sleep-interval", "--pid", "--max-unchanged-stats"},
		check:   obsoleteCountCheck,
	},
	"wc": {
		opts: newOpts("clLmw", []string{"--bytes", "--chars", "--lines", "--max-line-length", "--words", "--help", "--version"},
			map[string]optSpec{"--total": {kind: reqArg, valid: oneOf("auto", "always", "only", "never")}}),
		refused: []string{"--files0-from"},
		check:   filesCheck(false),
	},
	"grep": {
		opts: newOpts("EFGPiywxcLloqsbHhnTZzaIrUuV0123456789",
			[]string{"--extended-regexp", "--fixed-strings", "--basic-regexp", "--perl-regexp",
				"--ignore-case", "--no-ignore-case", "--word-regexp", "--line-regexp", "--count",
				"--files-without-match", "--files-with-matches", "--only-matching", "--quiet", "--silent",
				"--no-messages", "--byte-offset", "--with-filename", "--no-filename", "--line-number",
				"--initial-tab", "--null", "--null-data", "--text", "--recursive", "--binary",
				"--line-buffered", "--invert-match", "--help", "--version"},
			map[string]optSpec{
				"-e": anyArg, "--regexp": anyArg,
				"-m": reqNumber, "--max-count": reqNumber,
				"-A": reqNumber, "--after-context": reqNumber,
				"-B": reqNumber, "--before-context": reqNumber,
				"-C": reqNumber, "--context": reqNumber,
				"--include": anyArg, "--exclude": anyArg, "--exclude-dir": anyArg, "--label": anyArg,
				"--binary-files": {kind: reqArg, valid: oneOf("binary", "text", "without-match")},
				"-d":             {kind: reqArg, valid: oneOf("read", "skip", "recurse")},
				"--directories":  {kind: reqArg, valid: oneOf("read", "skip", "recurse")},
				"--color":        {kind: optArg, valid: colorWhen},
				"--colour":       {kind: optArg, valid: colorWhen},
			}),
		refused: []string{"-f", "--file", "--exclude-from", "-R", "--dereference-recursive", "-D", "--devices"},
		env:     []string{"GREP_OPTIONS"},
		check:   patternCheck(grepRecursive, false),
	},
	"rg": {
		opts: newOpts("abcFHhIilNnopPqSsUuvVwx0.",
			[]string{"--text", "--byte-offset", "--binary", "--no-binary", "--block-buffered",
				"--no-block-buffered", "--count", "--count-matches", "--column", "--no-column",
				"--no-context-separator", "--crlf", "--no-crlf", "--no-encoding",
				"--files", "--files-with-matches", "--files-without-match", "--fixed-strings",
				"--no-fixed-strings", "--no-follow", "--glob-case-insensitive", "--no-glob-case-insensitive",
				"--heading", "--no-heading", "--help", "--hidden", "--no-hidden", "--ignore-case",
				"--ignore-file-case-insensitive", "--no-ignore-file-case-insensitive", "--include-zero",
				"--no-include-zero", "--invert-match", "--no-invert-match", "--json", "--no-json",
				"--line-buffered", "--no-line-buffered", "--line-number", "--no-line-number",
				"--line-regexp", "--max-columns-preview", "--no-max-columns-preview", "--mmap", "--no-mmap",
				"--multiline", "--no-multiline", "--multiline-dotall", "--no-multiline-dotall",
				"--no-config", "--no-ignore", "--ignore", "--no-ignore-dot", "--ignore-dot",
				"--no-ignore-exclude", "--ignore-exclude", "--no-ignore-files", "--ignore-files",
				"--no-ignore-global", "--ignore-global", "--no-ignore-messages", "--ignore-messages",
				"--no-ignore-parent", "--ignore-parent", "--no-ignore-vcs", "--ignore-vcs",
				"--no-messages", "--messages", "--no-require-git", "--require-git", "--no-unicode",
				"--unicode", "--null", "--null-data", "--one-file-system", "--no-one-file-system",
				"--only-matching", "--passthru", "--pcre2", "--no-pcre2", "--pretty", "--quiet",
				"--smart-case", "--no-smart-case", "--case-sensitive", "--stats", "--no-stats",
				"--stop-on-nonmatch", "--trim", "--no-trim", "--unrestricted", "--version", "--vimgrep",
				"--with-filename", "--no-filename", "--word-regexp", "--sort-files", "--no-sort-files"},
			map[string]optSpec{
				"-e": anyArg, "--regexp": anyArg,
				"-A": reqNumber, "--after-context": reqNumber,
				"-B": reqNumber, "--before-context": reqNumber,
				"-C": reqNumber, "--context": reqNumber,
				"-m": reqNumber, "--max-count": reqNumber,
				"-M": reqNumber, "--max-columns": reqNumber,
				"-d": reqNumber, "--max-depth": reqNumber, "--maxdepth": reqNumber,
				"-j": reqNumber, "--threads": reqNumber,
				"-g": anyArg, "--glob": anyArg, "--iglob": anyArg,
				"-t": anyArg, "--type": anyArg, "-T": anyArg, "--type-not": anyArg,
				"-r": anyArg, "--replace": anyArg,
				"--context-separator": anyArg, "--field-context-separator": anyArg, "--field-match-separator": anyArg,
				"--path-separator":   anyArg,
				"-E":                 {kind: reqArg, valid: matches(`^[A-Za-z0-9_-]{1,32}$`)},
				"--encoding":         {kind: reqArg, valid: matches(`^[A-Za-z0-9_-]{1,32}$`)},
				"--engine":           {kind: reqArg, valid: oneOf("default", "pcre2", "auto")},
				"--color":            {kind: reqArg, valid: oneOf("never", "auto", "always", "ansi")},
				"--colour":           {kind: reqArg, valid: oneOf("never", "auto", "always", "ansi")},
				"--sort":             {kind: reqArg, valid: oneOf("none", "path", "modified", "accessed", "created")},
				"--sortr":            {kind: reqArg, valid: oneOf("none", "path", "modified", "accessed", "created")},
				"--max-filesize":     {kind: reqArg, valid: matches(`^[0-9]{1,12}[KMG]?$`)},
				"--dfa-size-limit":   {kind: reqArg, valid: matches(`^[0-9]{1,12}[KMG]?$`)},
				"--regex-size-limit": {kind: reqArg, valid: matches(`^[0-9]{1,12}[KMG]?$`)},
			}),
		refused: []string{"--pre", "--pre-glob", "-z", "--search-zip", "--hostname-bin", "-L", "--follow",
			"-f", "--file", "--ignore-file"},
		env:         []string{"RIPGREP_CONFIG_PATH"},
		ignoreFiles: true,
		check:       patternCheck(rgSearchesDot, true),
	},
	"find": {
		refused: []string{"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
			"-fprintf", "-fls", "-L", "-H", "-follow", "-files0-from", "-xtype", "-readable",
			"-writable", "-executable"},
		exactWords: true,
		check:      findCheck,
	},
	"sed": {
		opts: newOpts("nErsuz", []string{"--quiet", "--silent", "--regexp-extended", "--separate",
			"--unbuffered", "--null-data", "--help", "--version"},
			map[string]optSpec{"-e": anyArg, "--expression": anyArg}),
		refused: []string{"-i", "--in-place", "-f", "--file", "--follow-symlinks"},
		check:   sedCheck,
	},
	"sort": {
		opts: newOpts("bcCdfghiMmnRrsuVz",
			[]string{"--ignore-leading-blanks", "--dictionary-order", "--debug", "--ignore-case",
				"--general-numeric-sort", "--human-numeric-sort", "--ignore-nonprinting", "--merge",
				"--month-sort", "--numeric-sort", "--random-sort", "--reverse", "--stable", "--unique",
				"--version-sort", "--zero-terminated", "--help", "--version"},
			map[string]optSpec{
				"-k": {kind: reqArg, valid: sortKey}, "--key": {kind: reqArg, valid: sortKey},
				"-t": {kind: reqArg, valid: sortSep}, "--field-separator": {kind: reqArg, valid: sortSep},
				"-S": {kind: reqArg, valid: sortSize}, "--buffer-size": {kind: reqArg, valid: sortSize},
				"--parallel":   reqNumber,
				"--batch-size": reqNumber,
				"--sort":       {kind: reqArg, valid: oneOf("general-numeric", "human-numeric", "month", "numeric", "random", "version")},
				"--check":      {kind: optArg, valid: oneOf("diagnose-first", "quiet", "silent")},
			}),
		refused: []string{"-o", "--output", "-T", "--temporary-directory", "--compress-program",
			"--files0-from", "--random-source"},
		check: filesCheck(false),
	},
	"uniq": {
		opts: newOpts("cdDiuz", []string{"--count", "--repeated", "--ignore-case", "--unique",
			"--zero-terminated", "--help", "--version"},
			map[string]optSpec{
				"-f": reqNumber, "--skip-fields": reqNumber,
				"-s": reqNumber, "--skip-chars": reqNumber,
				"-w": reqNumber, "--check-chars": reqNumber,
				"--all-repeated": {kind: optArg, valid: oneOf("none", "prepend", "separate")},
				"--group":        {kind: optArg, valid: oneOf("separate", "prepend", "append", "both")},
			}),
		check: uniqCheck,
	},
}

var (
	sortKey  = matches(`^[0-9]{1,9}(\.[0-9]{1,9})?[bdfgiMhnRrV]{0,11}(,[0-9]{1,9}(\.[0-9]{1,9})?[bdfgiMhnRrV]{0,11})?$`)
	sortSep  = func(v string) bool { return len(v) == 1 || v == `\0` }
	sortSize = matches(`^[0-9]{1,12}[%bKMGTPEZY]?$`)
)

// ---------------------------------------------------------------------
// Filesystem checks.

// checkOperands inspects every path of every command beneath dir with the
// file tools' no-follow resolver: each must be a directory or a regular
// file with one hard link.
func checkOperands(dir string, cmds []plannedCommand, rec *inspection) error {
	n := 0
	for _, c := range cmds {
		n += len(c.paths)
		if readOnlyPrograms[c.name].ignoreFiles {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	root, err := fsroot.Open(dir)
	if err != nil {
		return fmt.Errorf("open the working directory: %w", err)
	}
	defer root.Close()
	for _, c := range cmds {
		for _, p := range c.paths {
			rec.saw(c.name, p)
			kind, links, err := root.Inspect(p)
			switch {
			case err != nil:
				// A link in a parent, an absent path, a path through a
				// file: nothing to prove containment with.
				return fmt.Errorf("%s: operand %q: %w", c.name, p, err)
			case kind == fsroot.KindDirectory:
			case kind == fsroot.KindRegular && links == 1:
			case kind == fsroot.KindRegular:
				return fmt.Errorf("%s: operand %q has %d hard links (one may be outside the workspace)", c.name, p, links)
			default:
				return fmt.Errorf("%s: operand %q is a %s", c.name, p, kind)
			}
		}
		if readOnlyPrograms[c.name].ignoreFiles {
			roots := c.paths
			if len(roots) == 0 {
				roots = []string{"."}
			}
			if err := checkIgnoreFiles(root, roots, func(rel string) { rec.saw(c.name, rel) }); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
		}
	}
	return nil
}

// rgIgnoreNames are the ignore files ripgrep reads in every directory it
// searches and in each search path's parents.
var rgIgnoreNames = []string{".gitignore", ".ignore", ".rgignore"}

// maxIgnoreWalkEntries bounds the directory entries checkIgnoreFiles will
// read; a larger tree needs confirmation. (A variable for tests.)
var maxIgnoreWalkEntries = 50000

// checkIgnoreFiles proves that every ignore file ripgrep could read for
// the search roots is a regular single-link file (or absent) reached
// without links: in each root's parent directories within the workspace
// and in every directory beneath each root (links to directories are not
// entered, as ripgrep does not follow them). A ".git" must be absent or a
// directory whose info/exclude is absent or a regular single-link file: a
// ".git" file (a worktree's pointer) names another directory ripgrep
// would read, so it needs confirmation. Ripgrep opens these files with
// links followed and reports the lines it cannot parse, so a link to an
// outside file would show it.
func checkIgnoreFiles(root *fsroot.Root, roots []string, saw func(rel string)) error {
	checked := map[string]bool{}
	checkDir := func(dir string) error {
		if checked[dir] {
			return nil
		}
		checked[dir] = true
		saw(dir)
		for _, name := range rgIgnoreNames {
			saw(path.Join(dir, name))
			if err := absentOrPlainFile(root, path.Join(dir, name)); err != nil {
				return err
			}
		}
		saw(path.Join(dir, ".git"))
		saw(path.Join(dir, ".git", "info", "exclude"))
		kind, _, err := root.Inspect(path.Join(dir, ".git"))
		switch {
		case fsroot.IsNotExist(err):
			return nil
		case err != nil:
			return err
		case kind != fsroot.KindDirectory:
			return fmt.Errorf("%s is a %s, not a directory", path.Join(dir, ".git"), kind)
		}
		return absentOrPlainFile(root, path.Join(dir, ".git", "info", "exclude"))
	}
	budget := maxIgnoreWalkEntries
	for _, r := range roots {
		start := path.Clean(r)
		kind, _, err := root.Inspect(start)
		if err != nil {
			return err
		}
		if kind != fsroot.KindDirectory {
			start = path.Dir(start)
		}
		for d := start; ; d = path.Dir(d) {
			if err := checkDir(d); err != nil {
				return err
			}
			if d == "." {
				break
			}
		}
		if kind != fsroot.KindDirectory {
			continue
		}
		stack := []string{start}
		for len(stack) > 0 {
			dir := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if err := checkDir(dir); err != nil {
				return err
			}
			f, err := root.OpenDir(dir)
			if err != nil {
				return err
			}
			ents, err := f.ReadDir(budget + 1)
			f.Close()
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if budget -= len(ents); budget < 0 {
				return errors.New("the tree is too large to check its ignore files")
			}
			for _, e := range ents {
				if e.Type().IsDir() {
					stack = append(stack, path.Join(dir, e.Name()))
				}
			}
		}
	}
	return nil
}

// absentOrPlainFile accepts an absent path or a regular file with one
// hard link, reached without links.
func absentOrPlainFile(root *fsroot.Root, rel string) error {
	kind, links, err := root.Inspect(rel)
	switch {
	case fsroot.IsNotExist(err):
		return nil
	case err != nil:
		return err
	case kind != fsroot.KindRegular || links != 1:
		return fmt.Errorf("%s is a %s with %d links, not a plain file", rel, kind, links)
	}
	return nil
}

// ---------------------------------------------------------------------
// The shell and the environment.

// workspace identifies the directory a command runs in, for containment
// checks that compare files, not spellings.
type workspace struct {
	dir string
	st  os.FileInfo
}

// openWorkspace stats dir, which must be an absolute directory.
func openWorkspace(dir string) (workspace, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return workspace{}, errors.New("the working directory is not an absolute path")
	}
	st, err := os.Stat(dir)
	if err != nil {
		return workspace{}, fmt.Errorf("stat the working directory: %w", err)
	}
	if !st.IsDir() {
		return workspace{}, errors.New("the working directory is not a directory")
	}
	return workspace{dir: dir, st: st}, nil
}

// contains reports whether p names the workspace or something beneath
// it, comparing files (device and inode), not spellings, so that a link
// to the workspace or a bind mount of it is recognised too. p must be
// absolute without "." or ".." components. It is inside when any lexical
// ancestor of p (each stat'ed, following links) is the workspace, because
// then what p resolves to depends on the workspace's content; or when p,
// resolved with every link followed (for a path that does not exist yet,
// its deepest existing ancestor), is the workspace or has it as an
// ancestor. Any error answers true: what cannot be told apart from the
// workspace is treated as inside it.
func (w workspace) contains(p string) bool {
	if !filepath.IsAbs(p) {
		return true
	}
	for _, c := range strings.Split(p, "/") {
		if c == "." || c == ".." {
			return true
		}
	}
	p = filepath.Clean(p)
	for q := p; ; q = filepath.Dir(q) {
		if st, err := os.Stat(q); err == nil && os.SameFile(st, w.st) {
			return true
		}
		if q == filepath.Dir(q) {
			break
		}
	}
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			p = r
			break
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, fs.ErrNotExist) || parent == p {
			return true
		}
		p = parent
	}
	for {
		st, err := os.Stat(p)
		if err != nil {
			return true
		}
		if os.SameFile(st, w.st) {
			return true
		}
		parent := filepath.Dir(p)
		if parent == p {
			return false
		}
		p = parent
	}
}

// parseCommandEnv turns the exact environment into a map, refusing
// malformed entries and duplicate names (which value a program would see
// depends on how it searches).
func parseCommandEnv(env []string) (map[string]string, error) {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, errors.New("the environment has an entry without a name")
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("the environment sets %s twice", name)
		}
		m[name] = val
	}
	return m, nil
}

// readOnlyShells are the shells whose start-up the environment checks
// understand (bash, and dash or another POSIX sh).
var readOnlyShells = map[string]bool{"bash": true, "dash": true, "sh": true}

// checkShell requires an absolute shell outside the workspace whose
// resolved name is bash, dash or sh. For bash it also refuses the case in
// which a non-interactive "bash -c" sources ~/.bashrc: when SSH_CLIENT or
// SSH2_CLIENT is set and the shell would be a top-level one (SHLVL unset,
// not a number, below 1, or at bash's reset limit).
func checkShell(shell string, env map[string]string, ws workspace) error {
	if shell == "" || !filepath.IsAbs(shell) {
		return errors.New("the shell is not an absolute path")
	}
	if ws.contains(shell) {
		return errors.New("the shell is inside the workspace")
	}
	resolved, err := filepath.EvalSymlinks(shell)
	if err != nil {
		return fmt.Errorf("resolve the shell: %w", err)
	}
	base := filepath.Base(resolved)
	if !readOnlyShells[base] {
		return fmt.Errorf("the shell %q is not bash, dash or sh", base)
	}
	if base == "bash" || filepath.Base(shell) == "bash" {
		_, ssh1 := env["SSH_CLIENT"]
		_, ssh2 := env["SSH2_CLIENT"]
		if ssh1 || ssh2 {
			lvl, err := strconv.Atoi(env["SHLVL"])
			if err != nil || lvl < 1 || lvl > 998 || strings.TrimSpace(env["SHLVL"]) != env["SHLVL"] {
				return errors.New("bash would source ~/.bashrc (SSH_CLIENT set, top-level SHLVL)")
			}
		}
	}
	return nil
}

// refusedEnv are variables whose mere presence changes which code runs or
// how an allowlisted program parses its words, so the checker's view of
// the command would not be what runs.
var refusedEnv = map[string]string{
	"POSIXLY_CORRECT": "changes GNU option parsing (no permutation) and puts bash in POSIX mode",
	"POSIX_ME_HARDER": "the older spelling of POSIXLY_CORRECT",
	"_POSIX2_VERSION": "changes coreutils' obsolete +N/-N option syntax",
	"SHELLOPTS":       "bash imports set -o options from it (xtrace expands PS4, ...)",
	"BASHOPTS":        "bash imports shopt options from it (extdebug, expand_aliases, ...)",
	"PS4":             "expanded, with command substitution, before every command under xtrace",
	"EXECIGNORE":      "makes bash skip programs the lookup check found",
	"GCONV_PATH":      "glibc loads iconv modules (code) from it",
	"LOCPATH":         "glibc loads locale data from it",
	"LD_PRELOAD":      "the dynamic loader runs code from it in every program",
	"LD_AUDIT":        "the dynamic loader runs code from it in every program",
}

// safeEnvPath is the character set a BASH_ENV or ENV value may use: bash
// subjects the value to parameter expansion, command substitution and
// arithmetic expansion before sourcing it.
var safeEnvPath = lazyRegexp(`^/[A-Za-z0-9._/@+,-]*$`)

// checkEnv refuses an environment that lets a repository or a
// configuration change what an allowlisted program does or which code
// runs. It names variables, never their values.
func checkEnv(env map[string]string, cmds []plannedCommand, ws workspace) error {
	for name, val := range env {
		switch {
		case strings.HasPrefix(name, "BASH_FUNC_"):
			return fmt.Errorf("the environment exports a shell function (%s)", name)
		case strings.HasPrefix(val, "() {"):
			return fmt.Errorf("%s looks like an exported shell function", name)
		case refusedEnv[name] != "":
			return fmt.Errorf("%s is set: %s", name, refusedEnv[name])
		case name == "LD_LIBRARY_PATH":
			if err := checkSearchPath(name, val, ws, true); err != nil {
				return err
			}
		case strings.HasPrefix(name, "LD_"):
			return fmt.Errorf("%s is set (only LD_LIBRARY_PATH, checked like PATH, is accepted)", name)
		case name == "BASH_ENV" || name == "ENV":
			if val == "" {
				continue
			}
			if !safeEnvPath().MatchString(val) || ws.contains(val) {
				return fmt.Errorf("%s is not an absolute plain path outside the workspace (the shell sources it)", name)
			}
		}
	}
	for _, c := range cmds {
		prog := readOnlyPrograms[c.name]
		for _, name := range prog.env {
			if _, ok := env[name]; ok {
				return fmt.Errorf("%s is set (it changes what %s does)", name, c.name)
			}
		}
		if !prog.ignoreFiles {
			continue
		}
		// rg also reads the global git ignore file beneath these, links
		// followed; it must not be the repository's.
		for _, name := range []string{"HOME", "XDG_CONFIG_HOME"} {
			if v, ok := env[name]; ok && v != "" && ws.contains(v) {
				return fmt.Errorf("%s is inside the workspace (or not an absolute plain path), and %s reads ignore files beneath it", name, c.name)
			}
		}
	}
	return nil
}

// commandLookupFixed reports (nil) whether the environment a command
// gets resolves each program name to the same program whatever the
// workspace holds: PATH is set, and every entry is absolute and neither
// the workspace nor beneath it, compared by file identity both as spelled
// and after resolving symbolic links (workspace.contains: an empty or
// relative entry, or an activated in-repository virtualenv, would find a
// repository's own "ls" first); and every file named like
// one of programs in any PATH directory resolves outside the workspace,
// with at least one executable regular file among them (a PATH directory
// outside the workspace may still hold a link into it). Otherwise no
// command is auto-approved: a repository could supply the program that
// runs.
func commandLookupFixed(env map[string]string, ws workspace, programs []string, rec *inspection) error {
	path, ok := env["PATH"]
	if !ok {
		return errors.New("PATH is unset (the shell would use its built-in default)")
	}
	if err := checkSearchPath("PATH", path, ws, false); err != nil {
		return err
	}
	dirs := strings.Split(path, string(os.PathListSeparator))
	for _, name := range programs {
		found := false
		for _, dir := range dirs {
			cand := filepath.Join(dir, name)
			rec.sawOutside(cand)
			if _, err := os.Lstat(cand); err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
					continue
				}
				return fmt.Errorf("look up %s: %w", name, err)
			}
			if ws.contains(cand) {
				return fmt.Errorf("%s on PATH resolves inside the workspace", name)
			}
			if st, err := os.Stat(cand); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s is not an executable file on PATH", name)
		}
	}
	return nil
}

// checkSearchPath checks a colon-separated list of directories: every
// entry absolute and outside the workspace. An empty entry means the
// current directory (the workspace); for LD_LIBRARY_PATH an empty value
// means no directories.
func checkSearchPath(name, val string, ws workspace, emptyValueOK bool) error {
	if val == "" {
		if emptyValueOK {
			return nil
		}
		return fmt.Errorf("%s is empty (the current directory would be searched)", name)
	}
	sep := ":"
	if name == "LD_LIBRARY_PATH" {
		val = strings.ReplaceAll(val, ";", ":")
	}
	for i, dir := range strings.Split(val, sep) {
		if dir == "" || !filepath.IsAbs(dir) {
			return fmt.Errorf("%s entry %d is empty or relative", name, i)
		}
		if ws.contains(dir) {
			return fmt.Errorf("%s entry %d is inside the workspace (or cannot be resolved)", name, i)
		}
	}
	return nil
}
