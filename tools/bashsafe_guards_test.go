//go:build unix

package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests in this file each guard one rule of the read-only checker that
// no other test noticed when it was removed (mutation testing; see
// internal/mutants/mutants.txt).

// TestReadOnlyShellSyntaxGuards: what a shell would expand or treat
// specially is refused, whatever else the command is: a tilde where the
// shell expands it, "!" inside double quotes (history expansion), and
// the DEL byte; and a command over 4 KiB.
func TestReadOnlyShellSyntaxGuards(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want bool
	}{
		{"ls a~b", true},
		{"ls ~", false},
		{"ls ~/x", false},
		{"ls x=~", false},
		{"ls x=~/y", false},
		{"ls a:~/y", false},
		{`ls "a b"`, true},
		{`ls "a!b"`, false},
		{"ls a\x7f", false},
		{"ls 'a\x7f'", false},
		{"grep -e ~ a.txt", false},
		{"grep -e a~ a.txt", true},
		{"ls a\x1f", false},
		{"ls " + strings.Repeat("a", maxReadOnlyCommandBytes-3), true},
		{"ls " + strings.Repeat("a", maxReadOnlyCommandBytes-2), false},
	} {
		if got := IsReadOnlyCommand(c.cmd); got != c.want {
			t.Errorf("IsReadOnlyCommand(%q) = %v, want %v", c.cmd, got, c.want)
		}
	}
}

// TestReadOnlyLoaderAndLookupGuards: LD_LIBRARY_PATH is split on ";" too,
// as the loader does, so a relative entry hidden after one is refused; an
// exported function's name is refused whatever its value; a program is
// found only as an executable regular file.
func TestReadOnlyLoaderAndLookupGuards(t *testing.T) {
	f := newROFixture(t)
	for _, env := range []string{"LD_LIBRARY_PATH=/usr/lib;lib", "LD_LIBRARY_PATH=/usr/lib;" + filepath.Join(f.ws, "bin")} {
		if err := CheckReadOnly(f.with("ls", env)); err == nil {
			t.Errorf("%s accepted", env)
		}
	}
	if err := CheckReadOnly(f.with("ls", "BASH_FUNC_ls%%=x")); err == nil {
		t.Error("an exported shell function name was accepted")
	}
	if err := CheckReadOnly(f.with("ls", "LD_LIBRARY_PATH=/usr/lib;/lib")); err != nil {
		t.Errorf("two absolute loader entries refused: %v", err)
	}
	plain := filepath.Join(f.out, "plain")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plain, "ls"), []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckReadOnly(f.with("ls", "PATH="+plain)); err == nil {
		t.Error("a non-executable file on PATH was taken for the program")
	}
}

// TestOptTablePathOptions: an option marked as naming a file (no program's
// table has one today; find's expression has its own) is inspected like an
// operand when given in its long form, and refused in its short form, so
// a table that gains one can never let its file go uninspected.
func TestOptTablePathOptions(t *testing.T) {
	tab := newOpts("a", nil, map[string]optSpec{"--file": {kind: reqArg, path: true}, "-f": {kind: reqArg, path: true}})
	for _, args := range [][]string{{"--file=x.txt", "y"}, {"--file", "x.txt", "y"}} {
		_, operands, err := tab.parse(args)
		if err != nil || len(operands) != 2 || operands[0] != "x.txt" {
			t.Errorf("parse(%q) = operands %q, %v; want x.txt inspected as an operand", args, operands, err)
		}
	}
	for _, args := range [][]string{{"-f", "x.txt"}, {"-fx.txt"}, {"-af", "x.txt"}} {
		if _, _, err := tab.parse(args); err == nil {
			t.Errorf("parse(%q) accepted a short path option", args)
		}
	}
}
