package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests drive the attacks on auto-approval through the real broker
// (Controlled, a denying approver) and the real bash tool over a temporary
// workspace. A refused call reaches the approver, which denies it, so the
// command never runs: each test asserts the approver was asked and that
// the attack's side effect (an outside file's content in the result, a
// written or executed file) did not happen. The file uses only APIs that
// predate ShellCall, so it also runs against the old allowlist.

const outsideSecret = "OUTSIDE-SECRET-c0ffee"

// roWorld is a workspace ws next to an outside directory out holding
// secret.txt, with the hostile entries a repository can contain.
type roWorld struct {
	ws, out string
	bash    *BashTool
}

func newROWorld(t *testing.T) *roWorld {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	// Not t.TempDir: its name is the test's, whose characters ("{", " ",
	// "'") would change how the commands below that embed it parse.
	base, err := os.MkdirTemp("", "octet-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	w := &roWorld{ws: filepath.Join(base, "ws"), out: filepath.Join(base, "out")}
	for _, d := range []string{w.ws, w.out, filepath.Join(w.ws, "src"), filepath.Join(w.ws, "bin"), filepath.Join(w.out, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(w.out, "secret.txt"), outsideSecret+"\n", 0o600)
	write(filepath.Join(w.ws, "notes.txt"), "hello notes\nsecond line\n", 0o644)
	write(filepath.Join(w.ws, "data.txt"), "b\na\nb\nc\n", 0o644)
	write(filepath.Join(w.ws, "src", "main.go"), "package main\n\nfunc main() {}\n", 0o644)
	// A file list naming the outside file, NUL-terminated as --files0-from wants.
	write(filepath.Join(w.ws, "names"), filepath.Join(w.out, "secret.txt")+"\x00", 0o644)
	write(filepath.Join(w.ws, "patterns.txt"), "hello\n", 0o644)
	// The repository's own programs: each leaves a marker when it runs.
	evil := "#!/bin/sh\ntouch '" + filepath.Join(w.ws, "pwned") + "'\n"
	write(filepath.Join(w.ws, "bin", "ls"), evil, 0o755)
	write(filepath.Join(w.ws, "evil-ls"), evil, 0o755)
	write(filepath.Join(w.ws, "setup.sh"), evil, 0o644)
	links := map[string]string{
		"link.txt": filepath.Join(w.out, "secret.txt"), // cat link.txt
		"linkdir":  w.out,                              // head linkdir/secret.txt, grep -R, find -L
		",":        w.out,                              // find , (a starting point, not an operator)
		")":        filepath.Join(w.out, "secret.txt"), // find ')'
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(w.ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	// An outside PATH directory holding a link to the repository's ls, and
	// an outside link to the repository's bin directory.
	if err := os.Symlink(filepath.Join(w.ws, "evil-ls"), filepath.Join(w.out, "bin", "ls")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(w.ws, "bin"), filepath.Join(w.out, "binlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(w.out, "secret.txt"), filepath.Join(w.ws, "hard.txt")); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("mkfifo", filepath.Join(w.ws, "fifo")).Run(); err != nil {
		t.Fatal(err)
	}
	b, err := NewBash(Config{Root: w.ws, SpillDir: t.TempDir(), BashTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	w.bash = b
	return w
}

// dispatch runs command through a Controlled broker whose approver
// denies, returning the result, the decision and how often it was asked.
func (w *roWorld) dispatch(t *testing.T, command string) (Result, ToolPolicyDecision, int) {
	t.Helper()
	args, err := json.Marshal(map[string]string{"command": command})
	if err != nil {
		t.Fatal(err)
	}
	deny := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: false, Digest: r.Digest}, nil
	}}
	b := NewBroker(BrokerConfig{Policy: Controlled, Approver: deny})
	res, d := b.Dispatch(context.Background(), mustHost(t, w.bash), req("bash", string(args)), DispatchObserver{})
	return res, d, deny.count()
}

// mustAsk asserts that command was not auto-approved (the approver was
// asked once and denied it, so nothing ran) and left no trace: neither
// the outside secret nor the outside directory's path in the result, no
// marker file, and none of the files it would have written.
func (w *roWorld) mustAsk(t *testing.T, command string, wouldWrite ...string) {
	t.Helper()
	command = strings.ReplaceAll(command, "{out}", w.out)
	res, d, asked := w.dispatch(t, command)
	if d.Reason != ReasonApprovalDenied || asked != 1 {
		t.Errorf("%s: decision %s/%s after %d prompts; want it confirmed (and denied)", command, d.Decision, d.Reason, asked)
	}
	if strings.Contains(res.Text, outsideSecret) || strings.Contains(res.Text, w.out) || strings.Contains(res.Text, "secret.txt") {
		t.Errorf("%s: the result shows the outside file: %q", command, res.Text)
	}
	for _, f := range append([]string{"pwned"}, wouldWrite...) {
		if _, err := os.Lstat(filepath.Join(w.ws, f)); err == nil {
			t.Errorf("%s: %s was written: the command ran", command, f)
		}
	}
}

// TestReadOnlyRegressFileLists: file names read from standard input or a
// file (sort/wc --files0-from, GNU's abbreviation --files0=, find
// -files0-from) reached any host file, the process's own environ
// included, with zero approvals.
func TestReadOnlyRegressFileLists(t *testing.T) {
	for _, c := range []string{
		"echo -n {out}/secret.txt | sort --files0-from=-",
		"echo -n {out}/secret.txt | sort --files0=-",
		"echo -n {out}/secret.txt | wc --files0-from=-",
		"wc --files0-from=names",
		"wc --files0=names",
		"sort --files0-from names",
		"find -files0-from names",
		"find -files0-from names -print",
		"cat names | find -files0-from -",
	} {
		t.Run(c, func(t *testing.T) { newROWorld(t).mustAsk(t, c) })
	}
	t.Run("environ", func(t *testing.T) {
		w := newROWorld(t)
		c := fmt.Sprintf("echo -n /proc/%d/environ | sort --files0-from=-", os.Getpid())
		res, d, asked := w.dispatch(t, c)
		if d.Reason != ReasonApprovalDenied || asked != 1 || strings.Contains(res.Text, "PATH=") {
			t.Errorf("%s: %s/%s after %d prompts: %q", c, d.Decision, d.Reason, asked, res.Text)
		}
	})
}

// TestReadOnlyRegressSymlinks: an operand that is (or passes through) a
// symbolic link out of the workspace, a hard link to an outside file, a
// FIFO, a socket or an absent path, and options that follow links, all
// need confirmation.
func TestReadOnlyRegressSymlinks(t *testing.T) {
	for _, c := range []string{
		"cat link.txt",
		"head link.txt",
		"head linkdir/secret.txt",
		"tail -n 5 linkdir/secret.txt",
		"grep -n OUTSIDE link.txt",
		"grep -rn OUTSIDE linkdir",
		"wc -l linkdir/secret.txt",
		"sed -n 1p link.txt",
		"sort link.txt",
		"uniq link.txt",
		"ls linkdir",
		"find linkdir",
		"find . -newer link.txt",
		// GNU find takes "," and ")" where a starting point may stand as
		// paths (-ls shows a link's target).
		"find , -ls",
		"find . , -ls",
		"find ')' -ls",
		"find -- , -ls",
		"cat hard.txt",
		"cat fifo",
		"cat sock",
		"cat missing.txt",
		"cat notes.txt link.txt",
		"cat ./src/../link.txt",
		// options that follow links
		"grep -R OUTSIDE .",
		"grep -Rn OUTSIDE .",
		"grep --dereference-recursive OUTSIDE .",
		"grep -r --dereference-recursive OUTSIDE .",
		"find -L . -name secret.txt",
		"find -H linkdir",
		"find . -follow -name secret.txt",
		"find . -xtype f",
		"ls -RL .",
		"ls -R --dereference .",
		"ls -lH linkdir",
		// stats what each link points to, to group links to directories
		// (found by the strace test)
		"ls --group-directories-first",
		"rg -L OUTSIDE",
		"rg --follow OUTSIDE",
	} {
		t.Run(c, func(t *testing.T) {
			w := newROWorld(t)
			ln, err := net.Listen("unix", filepath.Join(w.ws, "sock"))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			w.mustAsk(t, c)
		})
	}
}

// TestReadOnlyRegressWriteExec: read-only-looking commands that write or
// execute (or read patterns and names from elsewhere) need confirmation,
// and denied, wrote and ran nothing.
func TestReadOnlyRegressWriteExec(t *testing.T) {
	cases := []struct {
		cmd   string
		files []string
	}{
		{"sed -n '1w written.txt' notes.txt", []string{"written.txt"}},
		{"sed -n '1p;1w written.txt' notes.txt", []string{"written.txt"}},
		{"sed -n 's/hello/x/w written.txt' notes.txt", []string{"written.txt"}},
		{"sed -n '1W written.txt' notes.txt", []string{"written.txt"}},
		{"sed -n '1e touch pwned' notes.txt", nil},
		{"sed -n 's/hello/touch pwned/e' notes.txt", nil},
		{"sed -n '1r link.txt' notes.txt", nil},
		{"sed -n -e 1p -e '1w written.txt' notes.txt", []string{"written.txt"}},
		{"sed -n 1p -i notes.txt", nil},
		{"sed -n --in-place 1p notes.txt", nil},
		{"sort -o sorted.txt notes.txt", []string{"sorted.txt"}},
		{"sort notes.txt -o sorted.txt", []string{"sorted.txt"}},
		{"sort -uo sorted.txt notes.txt", []string{"sorted.txt"}},
		{"sort --output=sorted.txt notes.txt", []string{"sorted.txt"}},
		{"sort --outp=sorted.txt notes.txt", []string{"sorted.txt"}},
		{"sort --compress-program=./evil-ls -S 1 notes.txt", nil},
		{"sort -R --random-source=link.txt notes.txt", nil},
		{"uniq notes.txt uniq-out.txt", []string{"uniq-out.txt"}},
		{"uniq -c notes.txt uniq-out.txt", []string{"uniq-out.txt"}},
		{"uniq -- notes.txt uniq-out.txt", []string{"uniq-out.txt"}},
		{"find . -fprint found.txt", []string{"found.txt"}},
		{"find . -name notes.txt -fls found.txt", []string{"found.txt"}},
		{"find . -name notes.txt -exec touch pwned ';'", nil},
		{"find . -name notes.txt -execdir touch pwned '+'", nil},
		{"find . -name 'nothing' -o -name notes.txt -delete", nil},
		{"grep -f patterns.txt notes.txt", nil},
		{"grep --file=patterns.txt notes.txt", nil},
		{"grep -r --exclude-from=names hello .", nil},
		{"rg --pre ./evil-ls hello", nil},
		{"rg --pre=./evil-ls hello", nil},
		{"rg -z hello", nil},
		{"rg --search-zip hello", nil},
		{"rg -f patterns.txt", nil},
		{"rg --ignore-file names hello", nil},
		{"tail -f notes.txt", nil},
	}
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			w := newROWorld(t)
			w.mustAsk(t, c.cmd, c.files...)
			if _, err := os.Stat(filepath.Join(w.ws, "notes.txt")); err != nil {
				t.Fatalf("find -delete ran: %v", err)
			}
		})
	}
}

// TestReadOnlyRegressEnvironment: an environment that lets the repository
// supply the program (an in-workspace PATH entry, directly or through an
// outside link, or an outside PATH directory holding a link into the
// workspace), an exported function, a BASH_ENV inside the workspace or
// one the shell would expand, or a variable that changes how a program
// parses its words, makes every command need confirmation.
func TestReadOnlyRegressEnvironment(t *testing.T) {
	path := os.Getenv("PATH")
	cases := []struct {
		name, cmd string
		env       func(w *roWorld) map[string]string
	}{
		{"in-workspace PATH entry", "ls", func(w *roWorld) map[string]string {
			return map[string]string{"PATH": filepath.Join(w.ws, "bin") + ":" + path}
		}},
		{"PATH entry linked into the workspace", "ls", func(w *roWorld) map[string]string {
			return map[string]string{"PATH": filepath.Join(w.out, "binlink") + ":" + path}
		}},
		{"PATH entry beneath the workspace that does not exist yet", "ls", func(w *roWorld) map[string]string {
			return map[string]string{"PATH": filepath.Join(w.ws, ".venv", "bin") + ":" + path}
		}},
		{"outside PATH directory with a link into the workspace", "ls", func(w *roWorld) map[string]string {
			return map[string]string{"PATH": filepath.Join(w.out, "bin") + ":" + path}
		}},
		{"empty PATH entry", "ls", func(w *roWorld) map[string]string { return map[string]string{"PATH": path + ":"} }},
		{"exported function", "ls", func(w *roWorld) map[string]string { return map[string]string{"BASH_FUNC_ls%%": "() {  touch pwned\n}"} }},
		{"exported function for a builtin", "echo hi", func(w *roWorld) map[string]string {
			return map[string]string{"BASH_FUNC_echo%%": "() {  touch pwned\n}"}
		}},
		{"BASH_ENV inside the workspace", "ls", func(w *roWorld) map[string]string {
			return map[string]string{"BASH_ENV": filepath.Join(w.ws, "setup.sh")}
		}},
		{"BASH_ENV the shell expands", "ls", func(w *roWorld) map[string]string { return map[string]string{"BASH_ENV": "/nonexistent$(touch pwned)"} }},
		{"POSIXLY_CORRECT", "ls", func(w *roWorld) map[string]string { return map[string]string{"POSIXLY_CORRECT": "1"} }},
		{"SHELLOPTS", "ls", func(w *roWorld) map[string]string { return map[string]string{"SHELLOPTS": "xtrace"} }},
		{"BASHOPTS", "ls", func(w *roWorld) map[string]string { return map[string]string{"BASHOPTS": "extdebug"} }},
		{"LD_PRELOAD", "ls", func(w *roWorld) map[string]string {
			return map[string]string{"LD_PRELOAD": filepath.Join(w.ws, "evil.so")}
		}},
		{"LD_LIBRARY_PATH inside the workspace", "ls", func(w *roWorld) map[string]string {
			return map[string]string{"LD_LIBRARY_PATH": filepath.Join(w.ws, "lib")}
		}},
		{"GREP_OPTIONS", "grep hello notes.txt", func(w *roWorld) map[string]string { return map[string]string{"GREP_OPTIONS": "-R"} }},
		{"RIPGREP_CONFIG_PATH", "rg hello", func(w *roWorld) map[string]string {
			return map[string]string{"RIPGREP_CONFIG_PATH": filepath.Join(w.ws, "rgrc")}
		}},
		{"_POSIX2_VERSION", "sort data.txt", func(w *roWorld) map[string]string { return map[string]string{"_POSIX2_VERSION": "199209"} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newROWorld(t)
			for k, v := range c.env(w) {
				t.Setenv(k, v)
			}
			w.mustAsk(t, c.cmd)
		})
	}
}

// TestReadOnlyAllowlistStaysUseful: the everyday read-only forms are still
// auto-approved in a workspace that holds links, a FIFO and a hard link,
// they run, and what they print never includes the outside file.
func TestReadOnlyAllowlistStaysUseful(t *testing.T) {
	w := newROWorld(t)
	cases := []struct{ cmd, want string }{
		{"ls -la", "notes.txt"},
		{"ls -la src", "main.go"},
		{"ls", "notes.txt"},
		{"pwd", w.ws},
		{"echo read-only ok", "read-only ok"},
		{"cat notes.txt", "hello notes"},
		{"cat -n notes.txt", "1\thello notes"},
		{"head -n 1 notes.txt", "hello notes"},
		{"head -1 notes.txt", "hello notes"},
		{"tail -n 1 notes.txt", "second line"},
		{"wc -l notes.txt data.txt", "total"},
		{"grep -rn hello .", "notes.txt:1:hello notes"},
		{"grep -n -e second notes.txt", "2:second line"},
		{"grep -c hello notes.txt src/main.go", "notes.txt:1"},
		{"sed -n '1,2p' notes.txt", "second line"},
		{"sed -n 2p notes.txt", "second line"},
		{"sort -u data.txt | uniq -c", "1 a"},
		{"sort data.txt | uniq -c | sort -rn | head -n 1", "2 b"},
		{"find . -name '*.go' -type f", "./src/main.go"},
		{"find src -type f -name '*.go' -print -o -newer notes.txt -print", "main.go"},
		{"find . -maxdepth 1 -type d", "./src"},
		{"cat notes.txt | grep -c hello", "1"},
	}
	if _, err := exec.LookPath("rg"); err == nil {
		cases = append(cases, struct{ cmd, want string }{"rg -n hello", "notes.txt:1:hello notes"})
	}
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			res, d, asked := w.dispatch(t, c.cmd)
			if d.Reason != ReasonReadOnlyCommand || asked != 0 {
				t.Fatalf("%s: decision %s/%s after %d prompts; want auto-approved", c.cmd, d.Decision, d.Reason, asked)
			}
			if !strings.Contains(res.Text, c.want) || strings.Contains(res.Text, outsideSecret) {
				t.Errorf("%s: result %q; want %q and no outside content", c.cmd, res.Text, c.want)
			}
		})
	}
}
