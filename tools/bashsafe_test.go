package tools

import (
	"strings"
	"testing"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

var readOnlyAdmitted = []string{
	`ls`,
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
