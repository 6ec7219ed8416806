//go:build unix

package tools

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/syntax"
)

var readOnlyAdmitted = []string{
	`ls`,
	`wc -l a b`,
	`sort -u x | uniq -c`,
	`ls -la`,
	`ls -la src/internal`,
	`pwd`,
	`pwd -P`,
	`echo hello world`,
	`echo "a > b; c | d && e"`,
	`echo 'it''s $HOME'`,
	`cat go.mod`,
	`cat "file with spaces.txt"`,
	`head -n 20 README.md`,
	`tail -n 50 log.txt`,
	`tail -20 log.txt`,
	`wc -l main.go`,
	`grep -rn "func main" .`,
	`grep -E 'a|b' x.go`,
	`rg -n TODO src`,
	`rg --type go 'fn\(x\)'`,
	`rg -g '*.go' foo`,
	`find . -name '*.go'`,
	`find src -type f -newer go.mod`,
	`find . -maxdepth 2 -print`,
	`sort --reverse --numeric-sort x`,
	`tail --lines=5 x`,
	`sort -- a b`,
	`sed -n 1,20p main.go`,
	`sed -n '5p' main.go`,
	`sed -n '10,$p' a.txt`,
	`sort names.txt`,
	`sort -n -k2 data.txt`,
	`uniq -c counts.txt`,
	`grep -rn foo . | sort | uniq -c | head`,
	`cat a.txt | wc -l`,
	`ls ./x.y_z-1,2+3%4@5`,
}

var readOnlyRefused = []string{
	// git honours repository configuration (core.fsmonitor, diff.external,
	// textconv, pager) that can run programs: never auto-approved.
	`git status`,
	`git status --short`,
	`git log --oneline -n 10`,
	`git log -p -- main.go`,
	`git diff --no-ext-diff --no-textconv`,
	`git log --exit-code -- a`,
	`git diff`,
	`git diff --stat HEAD~3..HEAD`,
	`git diff main...feature -- src/a.go`,
	`git show HEAD^:README.md`,
	`git show --stat HEAD`,
	`git branch`,
	`git branch -a -v`,
	`git branch --list 'feat*'`,
	`git branch --show-current`,
	`git log --oneline | head -n 5`,
	// redirections
	`ls > out.txt`,
	`ls >> out.txt`,
	`cat < /etc/passwd`,
	`cat < in.txt`,
	`ls 2> err.txt`,
	`ls 2>&1`,
	`ls &> all.txt`,
	`cat <<EOF` + "\nhi\nEOF",
	`cat <<< hi`,
	`ls >| out`,
	// substitutions and expansions
	`echo $(rm -rf x)`,
	"echo `rm -rf x`",
	`cat <(ls)`,
	`echo $HOME`,
	`echo ${HOME}`,
	`echo "$HOME"`,
	`echo "$(id)"`,
	"echo \"`id`\"",
	`echo $((1+2))`,
	`echo $'\x41'`,
	`echo $"x"`,
	`ls *.go`,
	`ls ?.go`,
	`ls [ab].go`,
	`echo {a,b}`,
	`ls ~`,
	`cat ~/.ssh/id_rsa`,
	`grep --file=~/x foo`,
	`echo a\ b`,
	`ls !(x)`,
	// env prefixes and assignments
	`FOO=1 ls`,
	`PATH=. ls`,
	`GIT_EXTERNAL_DIFF=x git diff`,
	`x=1`,
	// sequences, background, negation, grouping
	`ls; rm -rf /`,
	`ls && rm -rf x`,
	`ls || rm -rf x`,
	`ls &`,
	`ls & rm x`,
	"ls\nrm -rf x",
	"ls\rrm -rf x",
	`ls;`,
	`! ls`,
	`(ls)`,
	`{ ls; }`,
	`f() { ls; }`,
	`ls |& cat`,
	`if true; then ls; fi`,
	`for f in a; do cat $f; done`,
	`ls # ; rm -rf x`,
	`time ls`,
	`coproc ls`,
	// commands not on the list, or spelled by path
	`rm -rf x`,
	`/bin/ls`,
	`./ls`,
	`command ls`,
	`builtin echo`,
	`exec ls`,
	`eval ls`,
	`xargs rm`,
	`sh -c ls`,
	`bash -c 'ls'`,
	`env ls`,
	`sudo ls`,
	`tee out.txt`,
	`cat a | xargs rm`,
	`cat a | sh`,
	`ls | tee out`,
	// dangerous options of allowed commands
	`find . -exec rm {} \;`,
	`find . -exec rm '{}' ';'`,
	`find . -execdir rm x ';'`,
	`find . -ok rm x ';'`,
	`find . -okdir rm x ';'`,
	`find . -delete`,
	`find . -fprint out`,
	`find . -fprint0 out`,
	`find . -fprintf out x`,
	`find . -fls out`,
	`git -c core.pager=x log`,
	`git -c alias.x=!sh x`,
	`git -C .. status`,
	`git --git-dir=x status`,
	`git --exec-path=x status`,
	`git --no-pager log`,
	`git diff --output=x`,
	`git log --output x`,
	`git diff --ext-diff`,
	`git diff --textconv`,
	`git log -o x`,
	`git commit -m x`,
	`git push`,
	`git checkout x`,
	`git reset --hard`,
	`git branch new-feature`,
	`git branch -d old`,
	`git branch -D old`,
	`git branch -m a b`,
	`git branch -f x HEAD`,
	`git branch --set-upstream-to=origin/x`,
	`git config user.name x`,
	`git`,
	`sort -o out.txt in.txt`,
	`sort --out=x in.txt`,
	`sort --o=x in.txt`,
	`sort --outp x in.txt`,
	`sort --compress=sh in.txt`,
	`sort --temp=d in.txt`,
	`git diff --outp=x`,
	`git diff --out x`,
	`git log --ext`,
	`git log -p --text`,
	`git diff --upload=x`,
	`tail --foll x`,
	`tail --re x`,
	`sort --output=out.txt in.txt`,
	`sort -no out.txt in.txt`,
	`sort --compress-program=sh in.txt`,
	`sort -T dir in.txt`,
	`uniq in.txt out.txt`,
	`uniq -f 1 in.txt out.txt`,
	`sed -i s/a/b/ f`,
	`sed 's/a/b/w out' f`,
	`sed -n 's/a/b/e' f`,
	`sed -n '1p;w out' f`,
	`sed -n 1e f`,
	`sed -n 1p -i f`,
	`sed p f`,
	`tail -f log.txt`,
	`tail -F log.txt`,
	`tail --follow=name log.txt`,
	`tail -n5f log.txt`,
	`rg --pre sh foo`,
	`rg --pre=sh foo`,
	`rg --pre-glob '*' foo`,
	`rg -z foo`,
	`rg -uz foo`,
	`rg --search-zip foo`,
	`rg --hostname-bin=sh foo`,
	`pwd x`,
	// paths outside the workspace
	`cat /etc/shadow`,
	`ls /`,
	`cat ../secret`,
	`cat a/../../secret`,
	`grep -r foo ..`,
	`find / -name x`,
	`grep -f/etc/passwd x`,
	`grep --file=/etc/passwd x`,
	`git diff --no-index /etc/passwd a`,
	`head "/etc/passwd"`,
	`cat '../x'`,
	// unicode and control tricks
	"ls\u00a0-la",
	"l\u200bs",
	"ls \u202e",
	"cat ｆｉｌｅ",
	"ls\x00rm",
	"ls\t\x1b[2J",
	"ls\x7f",
	"еcho hi", // Cyrillic e
	// malformed or empty
	``,
	` `,
	`'unterminated`,
	`"unterminated`,
	`ls |`,
	`| ls`,
	strings.Repeat("ls ", 2000),
	strings.Repeat("cat a | ", 4) + "cat a",
}

func TestReadOnlyCommandAdmits(t *testing.T) {
	for _, c := range readOnlyAdmitted {
		if !IsReadOnlyCommand(c) {
			t.Errorf("refused %q", c)
		}
	}
}

func TestReadOnlyCommandRefuses(t *testing.T) {
	if len(readOnlyRefused) < 40 {
		t.Fatalf("only %d refusal cases", len(readOnlyRefused))
	}
	for _, c := range readOnlyRefused {
		if IsReadOnlyCommand(c) {
			t.Errorf("admitted %q", c)
		}
	}
}

// FuzzReadOnlyCommand checks that the parser never panics and that
// whatever it admits has none of the shell's active characters outside
// quotes and starts with an allowlisted command.
func FuzzReadOnlyCommand(f *testing.F) {
	for _, c := range readOnlyAdmitted {
		f.Add(c)
	}
	for _, c := range readOnlyRefused {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		if !IsReadOnlyCommand(cmd) {
			return
		}
		if !utf8.ValidString(cmd) || len(cmd) > maxReadOnlyCommandBytes {
			t.Fatalf("admitted invalid or oversized %q", cmd)
		}
		if unquotedActive(cmd) {
			t.Fatalf("admitted %q with an active character outside quotes", cmd)
		}
		name := strings.FieldsFunc(cmd, func(r rune) bool { return r == ' ' || r == '\t' || r == '|' })[0]
		name = strings.NewReplacer(`'`, "", `"`, "").Replace(name)
		if _, ok := readOnlyPrograms[name]; !ok {
			t.Fatalf("admitted %q whose command %q is not allowlisted", cmd, name)
		}
	})
}

// unquotedActive scans cmd with a tiny quote tracker and reports any
// character outside quotes that the shell would act on (other than a
// single |), or a $ or ` or \ anywhere inside double quotes.
func unquotedActive(cmd string) bool {
	var q byte
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch q {
		case '\'':
			if c == '\'' {
				q = 0
			}
			continue
		case '"':
			switch c {
			case '"':
				q = 0
			case '$', '`', '\\':
				return true
			}
			continue
		}
		switch c {
		case '\'', '"':
			q = c
		case '|':
			if i+1 < len(cmd) && (cmd[i+1] == '|' || cmd[i+1] == '&') {
				return true
			}
		case ';', '&', '<', '>', '$', '`', '\\', '(', ')', '{', '}', '*', '?', '[', ']', '\n', '#', '!':
			return true
		}
	}
	return false
}

// parseOnly parses cmd the way IsReadOnlyCommand does and nothing more: the
// baseline of BenchmarkIsReadOnlyCommand.
func parseOnly(cmd string) bool {
	_, err := syntax.NewParser(syntax.KeepComments(true), syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	return err == nil
}

// refusedForms spells one refused option r of prog every way its parser
// would accept it: alone, with an attached or separate value, after an
// operand (GNU getopt permutes), inside a short-option cluster, and as a
// GNU abbreviation of a long option.
func refusedForms(prog string, p *readOnlyProgram, r string) []string {
	lead := ""
	switch prog {
	case "grep", "rg":
		lead = "x " // the pattern
	case "sed":
		lead = "-n 1p "
	}
	if p.exactWords { // find
		return []string{
			"find " + r, "find . " + r, "find . " + r + " x", "find . " + r + " x ';'",
			"find . -name a " + r + " b", "find " + r + " . -print", "find . ! " + r + " x",
		}
	}
	forms := []string{
		prog + " " + lead + r,
		prog + " " + lead + r + " a.txt",
		prog + " " + lead + r + " x a.txt",
		prog + " " + lead + "a.txt " + r,
		prog + " " + lead + "a.txt " + r + " x",
		prog + " " + r + " " + lead + "a.txt",
	}
	if strings.HasPrefix(r, "--") {
		forms = append(forms, prog+" "+lead+r+"=x", prog+" "+lead+r+"=x a.txt", prog+" "+lead+r+"=")
		for n := len(r) - 1; n >= 4; n-- { // every abbreviation down to "--xy"
			if _, exact := p.opts.long[r[:n]]; exact {
				continue // "--exclude" is its own option, not "--exclude-from"
			}
			forms = append(forms, prog+" "+lead+r[:n]+"=x a.txt", prog+" "+lead+r[:n]+" x a.txt")
		}
		return forms
	}
	forms = append(forms, prog+" "+lead+r+"x a.txt")
	if p.opts != nil {
		for c, s := range p.opts.short {
			if s.kind == noArg && c >= 'a' && c <= 'z' {
				forms = append(forms, prog+" "+lead+"-"+string(c)+r[1:]+" a.txt", prog+" "+lead+r+string(c)+" a.txt")
			}
		}
	}
	return forms
}

// TestReadOnlyRefusesEveryRefusedOption tries, for every program, every
// option on its refusal list (writing, executing, reading names or
// patterns from elsewhere, following links) in every spelling.
func TestReadOnlyRefusesEveryRefusedOption(t *testing.T) {
	n := 0
	for prog, p := range readOnlyPrograms {
		for _, r := range p.refused {
			for _, c := range refusedForms(prog, p, r) {
				n++
				if IsReadOnlyCommand(c) {
					t.Errorf("admitted %q (refused option %s)", c, r)
				}
			}
		}
	}
	if n < 500 {
		t.Fatalf("only %d refusal forms tried", n)
	}
	t.Logf("%d refusal forms tried", n)
}

// TestReadOnlyTablesExcludeRefused: no refused option is in its program's
// allowlist, so the table parse refuses it even without the word scan.
func TestReadOnlyTablesExcludeRefused(t *testing.T) {
	for prog, p := range readOnlyPrograms {
		for _, r := range p.refused {
			if p.exactWords {
				if findOperators[r] || findNoArg[r] {
					t.Errorf("%s: refused %s is in the grammar", prog, r)
				}
				if _, ok := findOneArg[r]; ok {
					t.Errorf("%s: refused %s is in the grammar", prog, r)
				}
				continue
			}
			if p.opts == nil {
				t.Errorf("%s has refusals but no table", prog)
				continue
			}
			if strings.HasPrefix(r, "--") {
				if _, ok := p.opts.long[r]; ok {
					t.Errorf("%s: refused %s is in the table", prog, r)
				}
				continue
			}
			if len(r) != 2 || r[0] != '-' {
				t.Errorf("%s: malformed refusal %q", prog, r)
				continue
			}
			if _, ok := p.opts.short[r[1]]; ok {
				t.Errorf("%s: refused %s is in the table", prog, r)
			}
		}
		// And no allowed option trips the word scan.
		if p.opts != nil {
			for name := range p.opts.long {
				if r, bad := p.refusedWord(name); bad {
					t.Errorf("%s: allowed %s matches refusal %s", prog, name, r)
				}
			}
		}
	}
	if readOnlyPrograms["git"] != nil {
		t.Error("git must stay off the list")
	}
}

// sampleValues are tried as the argument of each table option: every
// option must accept at least one, so no table entry is dead.
var sampleValues = []string{"5", "x", "auto", "1,2", "none", "read", "default", "path", "binary", "quiet",
	"separate", "size", "atime", "long", "slash", "literal", "1M", "utf-8", "go", "numeric", "1p"}

// TestReadOnlyAcceptsEveryAllowedOption builds a command with each table
// option (with a sample argument where it takes one) and requires it to
// pass, so the allowlist stays what the documentation says.
func TestReadOnlyAcceptsEveryAllowedOption(t *testing.T) {
	for prog, p := range readOnlyPrograms {
		if p.opts == nil {
			continue
		}
		pre, post := "", " a.txt"
		switch prog {
		case "grep", "rg":
			post = " pat a.txt"
		case "sed":
			pre, post = "-n ", " 1p a.txt"
		}
		try := func(name string, s optSpec, short bool) {
			if s.kind == noArg {
				if c := prog + " " + pre + name + post; !IsReadOnlyCommand(c) {
					t.Errorf("refused %q", c)
				}
				return
			}
			for _, v := range sampleValues {
				var c string
				switch {
				case short:
					c = prog + " " + pre + name + " " + v + post
				case s.kind == optArg:
					c = prog + " " + pre + name + "=" + v + post
				default:
					c = prog + " " + pre + name + "=" + v + post
				}
				if IsReadOnlyCommand(c) {
					return
				}
			}
			t.Errorf("%s %s accepts none of the sample values", prog, name)
		}
		for c, s := range p.opts.short {
			try("-"+string(c), s, true)
		}
		for name, s := range p.opts.long {
			try(name, s, false)
		}
	}
}

// TestReadOnlyOperandStructure checks each program's real operand
// structure and option syntax (syntactic part only).
func TestReadOnlyOperandStructure(t *testing.T) {
	cases := []struct {
		cmd  string
		want bool
	}{
		// grep/rg: the first operand is the pattern unless -e is given.
		{`grep /etc/passwd`, true}, // a pattern, read from stdin
		{`grep -e foo /etc/passwd`, false},
		{`grep -efoo /etc/passwd`, false},
		{`grep --regexp=foo /etc/passwd`, false},
		{`grep foo /etc/passwd`, false},
		{`grep -n foo -- -x`, true},
		{`grep -rn foo .`, true},
		{`grep -A3 -B 2 -C5 -m1 foo a`, true},
		{`grep -A x foo a`, false},
		{`grep -5 foo a`, true},
		{`grep -rn5 foo a`, true},
		{`grep --color=always foo a`, true},
		{`grep --color always foo`, true}, // "always" is the pattern, foo a file
		{`grep --color=sometimes foo a`, false},
		{`grep -d skip foo a`, true},
		{`grep -d recurse foo a`, true},
		{`grep -D skip foo a`, false},
		{`grep --binary-files=text foo a`, true},
		{`grep`, false},
		{`grep -e`, false},
		{`grep -X egrep foo a`, false},
		{`rg foo /etc`, false},
		{`rg -e foo /etc`, false},
		{`rg --files /etc`, false},
		{`rg --files src`, true},
		{`rg --files`, true},
		{`rg /etc`, true}, // a pattern
		{`rg -tgo -g '!vendor' foo`, true},
		{`rg --no-config -n foo src`, true},
		{`rg --type-add 'x:*.x' foo`, false},
		// find: starting points, then the grammar.
		{`find`, true},
		{`find . -name '*.go' -type f`, true},
		{`find / -name x`, false},
		{`find .. -name x`, false},
		{`find . ../x`, false},
		{`find . -name x -o -name y -print0`, true},
		{`find . '(' -name a -o -name b ')' -prune -o -print`, true},
		{`find . '!' -name a`, true},
		{`find . -not -name a -a -type d`, true},
		{`find -P . -name a`, true},
		{`find -D exec . -name a`, false},
		{`find -O3 . -name a`, false},
		{`find . -newer /etc/passwd`, false},
		{`find . -newer ../x`, false},
		{`find . -newermt 2020-01-01`, false},
		{`find . -type q`, false},
		{`find . -type f,d`, true},
		{`find . -size +10k -mtime -2 -perm -u+x`, true},
		{`find . -maxdepth x`, false},
		{`find . -name`, false},
		{`find . -printf '%p'`, false}, // %Y follows links
		{`ls --color=auto -l`, true},
		{`ls --color=always`, false},
		{`ls --color`, false},
		{`ls --color never`, false},
		{`ls -p --indicator-style=slash`, true},
		{`ls --indicator-style=classify`, false},
		{`find . -fstype nfs`, false},
		// GNU find's starting points: "--" ends its leading options, and
		// "-", and "," and ")" where a starting point may stand, are paths.
		{`find -- .`, true},
		{`find -P -- . -name a`, true},
		{`find -- -P`, false},
		{`find -- -- .`, false},
		{`find , -name x`, true},
		{`find . , -name x`, true},
		{`find ')' -print`, true},
		{`find - -print`, true},
		{`find ,x ')y' '!z' -print`, true},
		{`find . -name a , -print`, true}, // an operator after the expression starts
		{`find '(' -print`, true},         // "(" starts the expression (find reports the imbalance)
		{`find , /etc`, false},
		// uniq: at most one operand.
		{`uniq a`, true},
		{`uniq -`, true},
		{`uniq`, true},
		{`uniq a b`, false},
		{`uniq a -`, false},
		{`uniq -- a b`, false},
		{`uniq -f 1 -s2 -w 3 a`, true},
		{`uniq -3 a`, false},
		{`uniq +3 a`, false},
		{`uniq --all-repeated=separate a`, true},
		{`uniq --all-repeated separate`, true}, // "separate" is the input file
		{`uniq --all-repeated separate a`, false},
		// sed: only -n with print-only programs.
		{`sed -n 1,20p a`, true},
		{`sed -n '1p;$p' a`, true},
		{`sed -n -e 1p -e 5,6p a b`, true},
		{`sed --quiet --expression=1p a`, true},
		{`sed -ne 1p a`, true},
		{`sed -n -E 1p a`, true},
		{`sed 1p a`, false},
		{`sed -n a`, false},
		{`sed -n`, false},
		{`sed -n 'w x' a`, false},
		{`sed -n '1w x' a`, false},
		{`sed -n '1W x' a`, false},
		{`sed -n 's/a/b/w x' a`, false},
		{`sed -n 's/a/b/pw x' a`, false},
		{`sed -n 's/a/b/e' a`, false},
		{`sed -n '1e id' a`, false},
		{`sed -n 'e id' a`, false},
		{`sed -n '1r /etc/passwd' a`, false},
		{`sed -n '1R /etc/passwd' a`, false},
		{`sed -n '1,$w x' a`, false},
		{`sed -n '1p;w x' a`, false},
		{`sed -n 1p -e 'w x' a`, false},
		{`sed -n -e 1p -e 'w x' a`, false},
		{`sed -n '/x/p' a`, false},
		{`sed -n 'y/a/b/' a`, false},
		{`sed -n '1q' a`, false},
		{`sed -n 1p /etc/passwd`, false},
		{`sed -n 1p -s a`, true},
		{`sed -n --sandbox 1p a`, false},
		{`sed -n --posix 1p a`, false},
		{`sed -n --debug 1p a`, false},
		{`sed -n -l 5 1p a`, false},
		{`sed -n -b 1p a`, false},
		// head/tail: counts, obsolete -NUM first only, no following.
		{`head -n 20 a`, true},
		{`head -n20 a`, true},
		{`head --lines=20 a`, true},
		{`head --lines 20 a`, true},
		{`head -n -5 a`, true},
		{`head -c 1K a`, true},
		{`head -20 a`, true},
		{`head -20c a`, false},
		{`head a -20`, false},
		{`head -n x a`, false},
		{`head -n`, false},
		{`tail -n +5 a`, true},
		{`tail -20 a`, true},
		{`tail -20f a`, false},
		{`tail +5 a`, false},
		{`tail -n5 -q a b`, true},
		// Long options exactly as in the table; abbreviations refused.
		{`ls --all`, true},
		{`ls --al`, false},
		{`ls --almost`, false},
		{`grep --line-n foo a`, false},
		{`sort --rev a`, false},
		{`sort --reverse a`, true},
		{`wc --li a`, false},
		{`head --lin=5 a`, false},
		{`tail --line 5 a`, false},
		{`cat --number=3 a`, false},
		{`cat --numbe a`, false},
		{`ls --color=bogus`, false},
		{`ls --color=never -la`, true},
		{`ls --sort=size -R src`, true},
		{`ls -w 80 -T4 -I '*.o'`, true},
		{`ls --hyperlink`, false},
		{`ls -D`, false},
		{`ls -`, true}, // a file named "-" for ls
		// sort
		{`sort -k2,2n -t, a`, true},
		{`sort -k 1.2,3.4 a`, true},
		{`sort -k 'x' a`, false},
		{`sort -t ab a`, false},
		{`sort -S 50% a`, true},
		{`sort +1 a`, false},
		{`sort --check=quiet a`, true},
		{`sort -c -C -m a b`, true},
		// cat, wc
		{`cat -A -n a -`, true},
		{`cat -`, true},
		{`wc --total=only a b`, true},
		{`wc --total=x a`, false},
		// echo prints anything, pwd takes -L/-P only.
		{`echo --files0-from=- -n -e x`, true},
		{`pwd -L`, true},
		{`pwd -LP`, false},
		{`pwd --physical`, false},
		{`pwd .`, false},
		// operand shapes
		{`cat ''`, false},
		{`cat '~x'`, false},
		{`cat +x`, false},
		{`cat a/../b`, false},
		{`cat ./a`, true},
	}
	for _, c := range cases {
		if got := IsReadOnlyCommand(c.cmd); got != c.want {
			t.Errorf("IsReadOnlyCommand(%q) = %v, want %v", c.cmd, got, c.want)
		}
	}
}

// roFixture is a workspace for CheckReadOnly unit tests: ws (the
// working directory), out (outside it) with an executable fake rg so the
// lookup check can find one, and the call template.
type roFixture struct {
	ws, out string
	call    ShellCall
}

// scratchTree makes a temporary directory holding dirs and files (their
// names relative to it), removed when t ends, and returns its resolved
// path. Not t.TempDir: its name is the test's, whose characters would
// change how commands embedding it parse.
func scratchTree(t testing.TB, prefix string, dirs []string, files map[string]string) string {
	t.Helper()
	base, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if base, err = filepath.EvalSymlinks(base); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(base, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

func newROFixture(t testing.TB) *roFixture {
	t.Helper()
	base := scratchTree(t, "octet-rofx-", []string{"ws/src/sub", "ws/bin", "out/bin"}, map[string]string{
		"ws/a.txt": "a\n", "ws/b.txt": "b\n", "ws/src/main.go": "package main\n", "ws/src/sub/x.go": "package sub\n",
		"out/secret.txt": "secret\n", "ws/-n": "dash\n",
	})
	f := &roFixture{ws: filepath.Join(base, "ws"), out: filepath.Join(base, "out")}
	for _, exe := range []string{"out/bin/rg", "ws/bin/ls"} {
		if err := os.WriteFile(filepath.Join(base, exe), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustDo(os.Symlink(filepath.Join(f.out, "secret.txt"), filepath.Join(f.ws, "link.txt")))
	mustDo(os.Symlink("a.txt", filepath.Join(f.ws, "inner-link.txt")))
	mustDo(os.Symlink(f.out, filepath.Join(f.ws, "linkdir")))
	mustDo(os.Symlink("src", filepath.Join(f.ws, "srclink")))
	mustDo(os.Symlink(filepath.Join(f.out, "gone"), filepath.Join(f.ws, "dangling")))
	mustDo(os.Symlink(f.out, filepath.Join(f.ws, ",")))
	mustDo(os.Symlink(f.out, filepath.Join(f.ws, ")")))
	mustDo(os.Link(filepath.Join(f.out, "secret.txt"), filepath.Join(f.ws, "hard.txt")))
	mustDo(unix.Mkfifo(filepath.Join(f.ws, "fifo"), 0o644))
	f.call = ShellCall{
		Dir:   f.ws,
		Env:   []string{"PATH=" + filepath.Join(f.out, "bin") + ":/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8", "SHLVL=1"},
		Shell: "/bin/bash",
	}
	if _, err := os.Stat(f.call.Shell); err != nil {
		t.Skip("no /bin/bash")
	}
	return f
}

// with returns the fixture's call for command with env entries replaced
// or added (an empty value "NAME=" sets it empty; "-NAME" removes it).
func (f *roFixture) with(command string, env ...string) ShellCall {
	c := f.call
	c.Command = command
	c.Env = slices.Clone(f.call.Env)
	for _, kv := range env {
		name, _, _ := strings.Cut(strings.TrimPrefix(kv, "-"), "=")
		c.Env = slices.DeleteFunc(c.Env, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		if !strings.HasPrefix(kv, "-") {
			c.Env = append(c.Env, kv)
		}
	}
	return c
}

// TestCheckReadOnlyFilesystem: every operand is resolved beneath the
// working directory without following links; only directories and
// single-link regular files pass.
func TestCheckReadOnlyFilesystem(t *testing.T) {
	f := newROFixture(t)
	ln, err := net.Listen("unix", filepath.Join(f.ws, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cases := []struct {
		cmd  string
		want bool
	}{
		// The everyday forms the allowlist exists for.
		{"ls -la", true},
		{"grep -rn foo .", true},
		{"rg -n foo src", true},
		{"find . -name '*.go' -type f", true},
		{"head -n 20 src/main.go", true},
		{"sed -n '1,20p' src/main.go", true},
		{"wc -l a.txt b.txt", true},
		{"sort -u a.txt | uniq -c", true},
		{"cat a.txt", true},
		{"cat a.txt b.txt src/main.go", true},
		{"cat ./src//sub/x.go", true},
		{"cat -- -n", true},
		{"cat link.txt", false},
		{"cat inner-link.txt", false}, // a link even when it stays inside
		{"cat linkdir/secret.txt", false},
		{"cat srclink/main.go", false},
		{"cat dangling", false},
		{"cat hard.txt", false},
		{"cat fifo", false},
		{"cat sock", false},
		{"cat missing.txt", false},
		{"cat a.txt/x", false},
		{"cat a.txt missing.txt", false},
		{"ls", true},
		{"ls -la src", true},
		{"ls linkdir", false},
		{"ls linkdir/", false},
		{"ls srclink", false},
		{"ls -", false}, // ls has no stdin: "-" is a file, absent
		{"grep -rn x .", true},
		{"grep -rn x src a.txt", true},
		{"grep -rn x linkdir", false},
		{"grep x -", true},
		{"grep link.txt a.txt", true}, // link.txt is the pattern
		{"grep -e x link.txt", false},
		{"rg x src", true},
		{"rg x link.txt", false},
		{"rg --files linkdir", false},
		{"find . -name '*.go'", true},
		{"find src -newer a.txt", true},
		{"find src -newer link.txt", false},
		{"find src -samefile hard.txt", false},
		{"find linkdir", false},
		// find takes "," and ")" where a starting point may stand, and "-",
		// as paths: each is inspected (here links, or absent).
		{"find , -name x", false},
		{"find . , -name x", false},
		{"find ')' -print", false},
		{"find - -print", false},
		{"find -- , -print", false},
		{"find src , -print", false},
		{"find srclink -name x", false},
		{"head -n 1 a.txt | wc -l", true},
		{"echo x | cat - a.txt", true},
		{"cat a.txt | cat link.txt", false},
		{"sed -n 1p a.txt", true},
		{"sed -n 1p link.txt", false},
		{"sort a.txt b.txt | uniq -c", true},
		{"uniq fifo", false},
		{"wc -l fifo", false},
		{"tail -n 1 sock", false},
		{"echo /etc/passwd link.txt", true}, // echo opens nothing
		{"pwd", true},
	}
	for _, c := range cases {
		err := CheckReadOnly(f.with(c.cmd))
		if (err == nil) != c.want {
			t.Errorf("CheckReadOnly(%q) = %v, want ok=%v", c.cmd, err, c.want)
		}
	}
}

// TestCheckReadOnlyRipgrepIgnoreFiles: ripgrep opens the ignore files of
// every directory it searches (and of the search paths' parents) with
// links followed, and prints the lines it cannot parse; each must be a
// plain file or absent, ".git" a directory, and the tree small enough to
// check.
func TestCheckReadOnlyRipgrepIgnoreFiles(t *testing.T) {
	f := newROFixture(t)
	mk := func(rel string, link string) {
		t.Helper()
		p := filepath.Join(f.ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if link != "" {
			err = os.Symlink(link, p)
		} else {
			err = os.WriteFile(p, []byte("*.o\n"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(f.out, "secret.txt")
	mk("ok/.gitignore", "")
	mk("ok/.git/info/exclude", "")
	mk("ok/deep/er/.rgignore", "")
	mk("bad/deep/.ignore", secret)
	mk("bad2/.gitignore", secret)
	mk("gitfile/.git", "")
	mk("gitinfo/.git/info", f.out)
	mk("gitlink/.git", f.out)
	mk("under/.rgignore", secret)
	mk("under/clean/x.txt", "")
	mk("hl/x.txt", "")
	if err := os.Link(filepath.Join(f.ws, "hl", "x.txt"), filepath.Join(f.ws, "hl", ".ignore")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  string
		want bool
	}{
		{"rg x src", true},
		{"rg x ok/deep/er", true},
		{"rg --files ok/deep/er", true},
		{"rg x ok", true},
		{"rg x hl", false}, // a hard-linked .ignore
		{"rg x bad", false},
		{"rg x bad/deep", false},
		{"rg -n x bad2", false},
		{"rg x gitfile", false},
		{"rg x gitinfo", false},
		{"rg x gitlink", false},
		{"rg x under/clean", false}, // a parent's ignore file
		{"rg x under/clean/x.txt", false},
		{"rg x", false}, // searches the whole workspace
		{"rg x src a.txt", true},
	} {
		if err := CheckReadOnly(f.with(c.cmd)); (err == nil) != c.want {
			t.Errorf("CheckReadOnly(%q) = %v, want ok=%v", c.cmd, err, c.want)
		}
	}
	old := maxIgnoreWalkEntries
	t.Cleanup(func() { maxIgnoreWalkEntries = old })
	maxIgnoreWalkEntries = 2
	if err := CheckReadOnly(f.with("rg x src")); err == nil {
		t.Error("a tree over the walk bound was accepted")
	}
}

// TestCheckReadOnlyEnvironment: variables that change which code runs or
// how programs parse their words refuse; ordinary ones do not.
func TestCheckReadOnlyEnvironment(t *testing.T) {
	f := newROFixture(t)
	outside := filepath.Join(f.out, "bin")
	noRG := t.TempDir() // an empty directory: a PATH on which rg is not found
	cases := []struct {
		cmd  string
		env  []string
		want bool
	}{
		{"ls", nil, true},
		{"ls", []string{"TERM=xterm", "LS_COLORS=di=1", "GREP_COLORS=mt=1", "TMPDIR=/tmp", "PWD=/x"}, true},
		// PATH
		{"ls", []string{"-PATH"}, false},
		{"ls", []string{"PATH="}, false},
		{"ls", []string{"PATH=/usr/bin:"}, false},
		{"ls", []string{"PATH=:/usr/bin"}, false},
		{"ls", []string{"PATH=/usr/bin::/bin"}, false},
		{"ls", []string{"PATH=.:/usr/bin"}, false},
		{"ls", []string{"PATH=bin:/usr/bin"}, false},
		{"ls", []string{"PATH=~/bin:/usr/bin"}, false},
		{"ls", []string{"PATH=" + filepath.Join(f.ws, "bin") + ":/usr/bin"}, false},
		{"ls", []string{"PATH=/usr/bin:" + filepath.Join(f.ws, "bin")}, false}, // even after the real ls
		{"ls", []string{"PATH=" + f.ws + ":/usr/bin"}, false},
		{"ls", []string{"PATH=" + filepath.Join(f.ws, "nope", "bin") + ":/usr/bin"}, false},
		{"ls", []string{"PATH=" + filepath.Join(f.ws, "linkdir") + ":/usr/bin"}, false},
		{"ls", []string{"PATH=" + outside + "/../bin:/usr/bin"}, false},
		{"ls", []string{"PATH=/usr/bin/./:/bin"}, false},
		{"ls", []string{"PATH=" + outside + ":/usr/bin"}, true},
		{"ls", []string{"PATH=" + filepath.Join(f.out, "nope") + ":/usr/bin"}, true},
		{"ls", []string{"PATH=/usr/bin/:/bin"}, true},
		{"ls", []string{"PATH=" + outside}, false},     // no ls there
		{"echo hi", []string{"PATH=" + outside}, true}, // a builtin
		{"rg x", []string{"PATH=" + noRG}, false},      // no rg there (whether or not /usr/bin has one)
		// exported functions
		{"ls", []string{"BASH_FUNC_ls%%=() {  id\n}"}, false},
		{"echo x", []string{"BASH_FUNC_echo%%=() {  id\n}"}, false},
		{"ls", []string{"BASH_FUNC_other%%=() {  id\n}"}, false},
		{"ls", []string{"ls=() { id; }"}, false},
		// shell start-up files
		{"ls", []string{"BASH_ENV="}, true},
		{"ls", []string{"BASH_ENV=/etc/octet-not-there"}, true},
		{"ls", []string{"BASH_ENV=setup.sh"}, false},
		{"ls", []string{"BASH_ENV=" + filepath.Join(f.ws, "a.txt")}, false},
		{"ls", []string{"BASH_ENV=" + filepath.Join(f.ws, "linkdir", "x")}, false}, // spelled through the workspace
		{"ls", []string{"BASH_ENV=" + filepath.Join(f.out, "..", "ws", "a.txt")}, false},
		{"ls", []string{"BASH_ENV=/x$(id)"}, false},
		{"ls", []string{"BASH_ENV=/x`id`"}, false},
		{"ls", []string{"ENV=./x"}, false},
		{"ls", []string{"ENV=/etc/profile"}, true},
		// parsing changes
		{"ls", []string{"POSIXLY_CORRECT="}, false},
		{"ls", []string{"POSIXLY_CORRECT=1"}, false},
		{"ls", []string{"POSIX_ME_HARDER=1"}, false},
		{"sort a.txt", []string{"_POSIX2_VERSION=199209"}, false},
		{"ls", []string{"SHELLOPTS=xtrace:noclobber"}, false},
		{"ls", []string{"BASHOPTS=extdebug:nullglob"}, false},
		{"ls", []string{"PS4=$(id)"}, false},
		{"ls", []string{"EXECIGNORE=*"}, false},
		// the dynamic loader and glibc
		{"ls", []string{"LD_PRELOAD=/x.so"}, false},
		{"ls", []string{"LD_AUDIT=/x.so"}, false},
		{"ls", []string{"LD_DEBUG_OUTPUT=/tmp/x"}, false},
		{"ls", []string{"LD_LIBRARY_PATH="}, true},
		{"ls", []string{"LD_LIBRARY_PATH=/usr/lib"}, true},
		{"ls", []string{"LD_LIBRARY_PATH=/usr/lib:"}, false},
		{"ls", []string{"LD_LIBRARY_PATH=lib"}, false},
		{"ls", []string{"LD_LIBRARY_PATH=" + filepath.Join(f.ws, "lib")}, false},
		{"ls", []string{"GCONV_PATH=/x"}, false},
		{"ls", []string{"LOCPATH=/x"}, false},
		// per program
		{"grep x a.txt", []string{"GREP_OPTIONS=-R"}, false},
		{"ls", []string{"GREP_OPTIONS=-R"}, true},
		{"rg x", nil, true},
		{"rg x", []string{"RIPGREP_CONFIG_PATH="}, false},
		{"rg x", []string{"RIPGREP_CONFIG_PATH=/etc/rgrc"}, false},
		{"ls | rg x", []string{"RIPGREP_CONFIG_PATH=/etc/rgrc"}, false},
		{"ls", []string{"RIPGREP_CONFIG_PATH=/etc/rgrc"}, true},
		{"rg x", []string{"HOME=" + f.ws}, false},
		{"rg x", []string{"XDG_CONFIG_HOME=" + filepath.Join(f.ws, "cfg")}, false},
		{"rg x", []string{"XDG_CONFIG_HOME=cfg"}, false},
		{"ls", []string{"HOME=" + f.ws}, true},
		// bash sources ~/.bashrc for a top-level "bash -c" under sshd
		{"ls", []string{"SSH_CLIENT=1 2 3", "SHLVL=1"}, true},
		{"ls", []string{"SSH_CLIENT=1 2 3", "-SHLVL"}, false},
		{"ls", []string{"SSH_CLIENT=1 2 3", "SHLVL=0"}, false},
		{"ls", []string{"SSH2_CLIENT=1 2 3", "SHLVL=x"}, false},
		{"ls", []string{"SSH_CLIENT=1 2 3", "SHLVL=999"}, false},
		{"ls", []string{"SSH_CLIENT=1 2 3", "SHLVL= 1"}, false},
		{"ls", []string{"-SHLVL"}, true},
	}
	for _, c := range cases {
		err := CheckReadOnly(f.with(c.cmd, c.env...))
		if (err == nil) != c.want {
			t.Errorf("CheckReadOnly(%q, %q) = %v, want ok=%v", c.cmd, c.env, err, c.want)
		}
		if err != nil {
			for _, kv := range c.env {
				if _, v, _ := strings.Cut(kv, "="); len(v) > 3 && strings.Contains(err.Error(), v) && !strings.HasPrefix(v, "/") {
					t.Errorf("error %q shows the value of %s", err, kv)
				}
			}
		}
	}
	// Malformed or ambiguous environments.
	for _, env := range [][]string{{"PATH=/usr/bin", "PATH=/usr/bin"}, {"PATH=/usr/bin", "NOEQUALS"}, {"PATH=/usr/bin", "=x"}} {
		c := f.with("ls")
		c.Env = env
		if err := CheckReadOnly(c); err == nil {
			t.Errorf("environment %q accepted", env)
		}
	}
}

// TestCheckReadOnlyCallShape: the working directory and the shell must be
// known, absolute and outside (the shell) the workspace; containment
// compares files, so a symlinked spelling of the workspace is recognised.
func TestCheckReadOnlyCallShape(t *testing.T) {
	f := newROFixture(t)
	alias := filepath.Join(f.out, "ws-alias")
	if err := os.Symlink(f.ws, alias); err != nil {
		t.Fatal(err)
	}
	zsh := filepath.Join(f.out, "zsh")
	if err := os.Symlink("/bin/bash", zsh); err != nil {
		t.Fatal(err)
	}
	wsShell := filepath.Join(f.ws, "bash")
	if err := os.Symlink("/bin/bash", wsShell); err != nil {
		t.Fatal(err)
	}
	ok := f.with("cat a.txt")
	if err := CheckReadOnly(ok); err != nil {
		t.Fatalf("baseline: %v", err)
	}
	for name, mut := range map[string]func(c *ShellCall){
		"empty dir":          func(c *ShellCall) { c.Dir = "" },
		"relative dir":       func(c *ShellCall) { c.Dir = "ws" },
		"missing dir":        func(c *ShellCall) { c.Dir = filepath.Join(f.out, "nope") },
		"file as dir":        func(c *ShellCall) { c.Dir = filepath.Join(f.ws, "a.txt") },
		"empty shell":        func(c *ShellCall) { c.Shell = "" },
		"relative shell":     func(c *ShellCall) { c.Shell = "bash" },
		"missing shell":      func(c *ShellCall) { c.Shell = filepath.Join(f.out, "nope") },
		"shell in workspace": func(c *ShellCall) { c.Shell = wsShell },
		"not a known shell":  func(c *ShellCall) { c.Shell = "/bin/true" },
		"PATH through the workspace's alias": func(c *ShellCall) {
			c.Env = append(slices.Clone(c.Env[1:]), "PATH="+filepath.Join(alias, "bin")+":/usr/bin")
		},
		"dir is the alias, PATH the real workspace": func(c *ShellCall) {
			c.Dir = alias
			c.Env = append(slices.Clone(c.Env[1:]), "PATH="+filepath.Join(f.ws, "bin")+":/usr/bin")
		},
	} {
		c := ok
		mut(&c)
		if err := CheckReadOnly(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A shell reached through a link is judged by what it resolves to:
	// bash under another name is still bash.
	c := ok
	c.Shell = zsh
	if err := CheckReadOnly(c); err != nil {
		t.Errorf("link to bash: %v", err)
	}
	c = ok
	c.Dir = alias // the workspace reached through a link
	if err := CheckReadOnly(c); err != nil {
		t.Errorf("aliased dir: %v", err)
	}
}

// refusedInWords is the fuzz oracle, written independently of the
// checker: does any word of a command (after its name) spell a refused
// option of that program?
func refusedInWords(argv []string) bool {
	p := readOnlyPrograms[argv[0]]
	if p == nil {
		return false
	}
	for _, w := range argv[1:] {
		for _, r := range p.refused {
			switch {
			case p.exactWords:
				if w == r {
					return true
				}
			case strings.HasPrefix(r, "--"):
				if w == r || strings.HasPrefix(w, r+"=") {
					return true
				}
				name, _, _ := strings.Cut(w, "=")
				if _, exact := p.opts.long[name]; len(name) >= 3 && strings.HasPrefix(r, name) && !exact {
					return true // a GNU abbreviation (an exact allowed option wins)
				}
			default:
				if strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "--") && strings.Contains(w[1:], r[1:]) {
					return true
				}
			}
		}
	}
	return false
}

// FuzzCheckReadOnly drives arbitrary command lines through the whole
// check over a fixture workspace (with links, a hard link and a FIFO): it
// never panics, and nothing it accepts has an unquoted active character,
// a program off the list, or a word that spells a refused option of its
// program.
func FuzzCheckReadOnly(f *testing.F) {
	for _, c := range readOnlyAdmitted {
		f.Add(c)
	}
	for _, c := range readOnlyRefused {
		f.Add(c)
	}
	for prog, p := range readOnlyPrograms {
		for _, r := range p.refused {
			for _, c := range refusedForms(prog, p, r)[:3] {
				f.Add(c)
			}
		}
	}
	fx := newROFixture(f)
	f.Fuzz(func(t *testing.T, cmd string) {
		err := CheckReadOnly(fx.with(cmd))
		syn := IsReadOnlyCommand(cmd)
		if err == nil && !syn {
			t.Fatalf("CheckReadOnly accepted %q that IsReadOnlyCommand refuses", cmd)
		}
		if !syn {
			return
		}
		if !utf8.ValidString(cmd) || len(cmd) > maxReadOnlyCommandBytes || unquotedActive(cmd) {
			t.Fatalf("admitted %q", cmd)
		}
		file, perr := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
		if perr != nil {
			t.Fatalf("admitted unparsable %q: %v", cmd, perr)
		}
		var argvs [][]string
		if !flattenPipeline(file.Stmts[0], &argvs) {
			t.Fatalf("admitted %q that is not a pipeline", cmd)
		}
		for _, argv := range argvs {
			if readOnlyPrograms[argv[0]] == nil {
				t.Fatalf("admitted %q: %q is not on the list", cmd, argv[0])
			}
			if refusedInWords(argv) {
				t.Fatalf("admitted %q: a word spells a refused option of %s", cmd, argv[0])
			}
		}
	})
}

// ExampleCheckReadOnly shows the check's answer for two calls in the same
// workspace: a plain read, and a read through a link out of it.
func ExampleCheckReadOnly() {
	dir, _ := os.MkdirTemp("", "octet-example-")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "notes.txt"))
	call := ShellCall{Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Shell: "/bin/bash"}
	for _, c := range []string{"head -n 1 go.mod", "cat notes.txt"} {
		call.Command = c
		fmt.Printf("%s: auto-approved=%v\n", c, CheckReadOnly(call) == nil)
	}
	// Output:
	// head -n 1 go.mod: auto-approved=true
	// cat notes.txt: auto-approved=false
}

// TestReadOnlyDocListsEveryOption keeps docs/security.md in step
// with the tables: every allowed and refused option of every program (and
// find's grammar) is named in its program's section.
func TestReadOnlyDocListsEveryOption(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	section := func(prog string) string {
		s := string(doc)
		i := strings.Index(s, "### `"+prog+"`")
		if i < 0 {
			t.Fatalf("no section for %s", prog)
		}
		s = s[i+1:]
		if j := strings.Index(s, "\n## "); j >= 0 {
			s = s[:j]
		}
		if j := strings.Index(s, "\n### "); j >= 0 {
			s = s[:j]
		}
		return s
	}
	named := func(prog, sec, opt string) {
		if !strings.Contains(sec, "`"+opt+"`") {
			t.Errorf("docs: %s section does not name `%s`", prog, opt)
		}
	}
	for prog, p := range readOnlyPrograms {
		sec := section(prog)
		for _, r := range p.refused {
			named(prog, sec, r)
		}
		if p.opts == nil {
			continue
		}
		_, cluster, _ := strings.Cut(sec, "Short flags: `")
		cluster, _, _ = strings.Cut(cluster, "`")
		for c, s := range p.opts.short {
			if s.kind == noArg {
				if strings.IndexByte(cluster, c) < 0 {
					t.Errorf("docs: %s short flags do not list -%c", prog, c)
				}
				continue
			}
			named(prog, sec, "-"+string(c))
		}
		for l := range p.opts.long {
			named(prog, sec, l)
		}
	}
	sec := section("find")
	for w := range findOperators {
		named("find", sec, w)
	}
	for w := range findNoArg {
		named("find", sec, w)
	}
	for w := range findOneArg {
		named("find", sec, w)
	}
}

// BenchmarkCheckReadOnly measures the whole check (parse, environment,
// PATH lookup, operand inspection) for typical commands in a fixture
// workspace, with the test process's real PATH.
func BenchmarkCheckReadOnly(b *testing.B) {
	f := newROFixture(b)
	cmds := []string{"ls -la", "grep -rn x src", "cat a.txt b.txt | wc -l", "sed -n 1,20p src/main.go"}
	calls := make([]ShellCall, len(cmds))
	for i, c := range cmds {
		calls[i] = f.with(c, "PATH="+os.Getenv("PATH"))
		if err := CheckReadOnly(calls[i]); err != nil {
			b.Fatalf("%s: %v", c, err)
		}
	}
	i := 0
	for b.Loop() {
		CheckReadOnly(calls[i%len(calls)])
		i++
	}
}

// TestReadOnlyReasonOnlyInDebugLog: why a shell call was not auto-approved
// reaches the broker's debug log (naming variables, never their values)
// and nothing the model sees.
func TestReadOnlyReasonOnlyInDebugLog(t *testing.T) {
	w := newROWorld(t)
	t.Setenv("BASH_FUNC_ls%%", "() {  echo VALUE-NOT-LOGGED\n}")
	var logs bytes.Buffer
	deny := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: false, Digest: r.Digest}, nil
	}}
	b := NewBroker(BrokerConfig{Policy: Controlled, Approver: deny,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	res, d := b.Dispatch(context.Background(), mustHost(t, w.bash), req("bash", `{"command":"ls"}`), DispatchObserver{})
	if d.Reason != ReasonApprovalDenied || deny.count() != 1 {
		t.Fatalf("decision %+v", d)
	}
	got := logs.String()
	if !strings.Contains(got, "shell call needs confirmation") || !strings.Contains(got, "BASH_FUNC_ls%%") {
		t.Errorf("debug log lacks the reason: %q", got)
	}
	if strings.Contains(got, "VALUE-NOT-LOGGED") {
		t.Errorf("debug log shows an environment value: %q", got)
	}
	if strings.Contains(res.Text, "BASH_FUNC") || strings.Contains(res.Text, "confirmation") || res.Text != DenialText(ReasonApprovalDenied) {
		t.Errorf("model-visible result %q is not the static denial", res.Text)
	}
}

// TestLazyPatternsCompile: every regular expression the package compiles
// at its first use compiles (a typo would otherwise panic mid-call).
func TestLazyPatternsCompile(t *testing.T) {
	if len(lazyPatterns) < 10 {
		t.Fatalf("%d lazy patterns; the read-only programs' validators alone have more", len(lazyPatterns))
	}
	for _, re := range lazyPatterns {
		if _, err := regexp.Compile(re); err != nil {
			t.Errorf("%q: %v", re, err)
		}
	}
}
