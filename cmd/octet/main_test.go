package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeKey is a credential that must never appear in any output or file.
const fakeKey = "sk-octet-test-NEVER-PRINT-9f8e7d"

// octetBin is the real binary, built once by TestMain.
var octetBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "octet-bin-")
	if err != nil {
		panic(err)
	}
	octetBin = filepath.Join(dir, "octet")
	args := []string{"build", "-o", octetBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("build octet: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cliResult is the outcome of one in-process command line.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command in-process with a controlled environment: no
// terminal, the given variables only, cwd as the working directory.
func runCLI(t *testing.T, cwd string, vars map[string]string, args ...string) cliResult {
	t.Helper()
	return runCLIStdin(t, cwd, vars, "", args...)
}

// runCLIStdin is runCLI with stdin holding the given text.
func runCLIStdin(t *testing.T, cwd string, vars map[string]string, stdin string, args ...string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	e := env{
		stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb,
		lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		cwd:    cwd,
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	code := run(ctx, args, e)
	return cliResult{code, out.String(), errb.String()}
}

// assertNoSecret fails when fakeKey appears in any of the texts or in any
// file under the directories.
func assertNoSecret(t *testing.T, texts []string, dirs ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(s, fakeKey) || strings.Contains(s, "NEVER-PRINT") {
			t.Errorf("the API key leaked into output:\n%s", s)
		}
	}
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return nil
			}
			if p == filepath.Join(d, "credentials") {
				return nil // the one place the key may live
			}
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, []byte(fakeKey)) {
				t.Errorf("the API key leaked into %s", p)
			}
			return nil
		})
	}
}

func TestUsageErrors(t *testing.T) {
	home := t.TempDir()
	vars := map[string]string{"OCTET_HOME": home, "OPENAI_API_KEY": fakeKey}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no command", nil, []string{"usage: octet"}},
		{"unknown command", []string{"serve"}, []string{`unknown command "serve"`}},
		{"safe-mode with effect-policy", []string{"exec", "--safe-mode", "--effect-policy", "controlled", "hi"}, []string{"--safe-mode conflicts with --effect-policy"}},
		{"hidden safe alias conflicts too", []string{"exec", "--safe", "--effect-policy=unsafe_host", "hi"}, []string{"--safe-mode conflicts with --effect-policy"}},
		{"yolo", []string{"exec", "--yolo", "hi"}, []string{"--yolo is no longer accepted"}},
		{"unknown tool", []string{"exec", "--tools", "read,grep", "hi"}, []string{`unknown tool "grep"`, "read, search, edit, write, apply_patch, bash"}},
		{"bad policy", []string{"exec", "--effect-policy", "everything", "hi"}, []string{"unknown effect policy", "unsafe_host"}},
		{"approve and deny", []string{"exec", "--approve", "--deny", "hi"}, []string{"--approve conflicts with --deny"}},
		{"no prompt", []string{"exec"}, []string{"exactly one prompt"}},
		{"bad flag", []string{"exec", "--frobnicate", "hi"}, []string{"unknown flag --frobnicate; the flags are --allow-shell, --approve,", "octet exec -h lists the flags"}},
		{"sessions without command", []string{"sessions"}, []string{"usage: octet sessions"}},
		{"session id with path", []string{"sessions", "show", "../x"}, []string{"invalid session id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, t.TempDir(), vars, tt.args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d\nstderr: %s", r.code, exitUsage, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if tt.name == "yolo" && strings.Contains(r.stderr, "--yolo ") && strings.Contains(r.stderr, "flags:") {
				t.Error("usage lists the hidden --yolo flag")
			}
			assertNoSecret(t, []string{r.stdout, r.stderr}, home)
		})
	}
}

// TestBadFlagsSpeakGNU: a bad flag is named as the user would write it
// (--name, even when typed -name), with the closest flag suggested, in one
// line instead of the whole usage.
func TestBadFlagsSpeakGNU(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "-bogus", "hi"}, "octet: exec: unknown flag --bogus; the flags are --allow-shell,"},
		{[]string{"exec", "--aprove", "hi"}, "octet: exec: unknown flag --aprove; did you mean --approve? (octet exec -h lists the flags)\n"},
		{[]string{"exec", "--sesion", "x", "hi"}, "did you mean --session?"},
		{[]string{"exec", "--turns", "3", "hi"}, "did you mean --max-turns?"},
		{[]string{"exec", "--max-turns", "many", "hi"}, `invalid value "many" for flag --max-turns`},
		{[]string{"exec", "--allow-shell=maybe", "hi"}, `invalid boolean value "maybe" for --allow-shell`},
		{[]string{"lsp", "--saf-mode"}, "did you mean --safe-mode?"},
		{[]string{"sessions", "--all", "list"}, "sessions: unknown flag --all; flags come after the command"},
		{[]string{"sessions", "list", "--all"}, "unknown flag --all (sessions list takes no flags)"},
	} {
		r := runCLI(t, t.TempDir(), map[string]string{"OCTET_HOME": t.TempDir()}, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
		if strings.Contains(r.stderr, "flags:\n") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: more than one line:\n%s", tc.args, r.stderr)
		}
		if strings.Contains(r.stderr, "--yolo") || strings.Contains(r.stderr, "--safe,") {
			t.Errorf("%v: suggests a hidden flag:\n%s", tc.args, r.stderr)
		}
	}
}

func TestHelpHidesHiddenFlags(t *testing.T) {
	r := runCLI(t, t.TempDir(), nil, "exec", "-h")
	if r.code != exitOK {
		t.Fatalf("exit %d", r.code)
	}
	if !strings.Contains(r.stdout, "--safe-mode") || !strings.Contains(r.stdout, "--effect-policy") {
		t.Errorf("help lacks flags:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "--safe ") || strings.Contains(r.stdout, "--yolo") {
		t.Errorf("help lists hidden flags:\n%s", r.stdout)
	}
}

func TestConfigErrorExitsWithFileLine(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("model = \"x\"\nallow_shell = maybe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, t.TempDir(), map[string]string{"OCTET_HOME": home, "OPENAI_API_KEY": fakeKey}, "exec", "hi")
	if r.code != exitUsage || !strings.Contains(r.stderr, filepath.Join(home, "config.toml")+":2:") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestCredentialErrors(t *testing.T) {
	home := t.TempDir()
	vars := map[string]string{"OCTET_HOME": home, "OPENAI_BASE_URL": "https://api.invalid/v1"}
	r := runCLI(t, t.TempDir(), vars, "exec", "hi")
	if r.code != exitUsage || !strings.Contains(r.stderr, "OPENAI_API_KEY") || !strings.Contains(r.stderr, filepath.Join(home, "credentials")) {
		t.Errorf("missing key: exit %d stderr %q", r.code, r.stderr)
	}
	cred := filepath.Join(home, "credentials")
	if err := os.WriteFile(cred, []byte("openai_api_key = \""+fakeKey+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(cred, 0o644)
	r = runCLI(t, t.TempDir(), vars, "exec", "hi")
	if r.code != exitUsage || !strings.Contains(r.stderr, "chmod 600 "+cred) {
		t.Errorf("loose mode: exit %d stderr %q", r.code, r.stderr)
	}
	assertNoSecret(t, []string{r.stdout, r.stderr}, home)
}

func TestVersion(t *testing.T) {
	r := runCLI(t, t.TempDir(), nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "octet ") || !strings.Contains(r.stdout, "go1.") {
		t.Errorf("version: %d %q", r.code, r.stdout)
	}
}
