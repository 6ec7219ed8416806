package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestHelpOnEveryCommand: -h and --help on every command and subcommand
// print its usage on stdout and exit 0 (never taken as a session id or a
// server name), and `octet help CMD [SUB]` prints the same.
func TestHelpOnEveryCommand(t *testing.T) {
	home := t.TempDir()
	vars := map[string]string{"OCTET_HOME": home}
	for _, cmd := range [][]string{
		{"demo"}, {"lsp"}, {"acp"}, {"exec"}, {"version"},
		{"sessions"}, {"sessions", "list"}, {"sessions", "show"}, {"sessions", "export"}, {"sessions", "diff"},
		{"sessions", "rewind"}, {"sessions", "delete"}, {"sessions", "prune"},
		{"mcp"}, {"mcp", "list"}, {"mcp", "unpin"}, {"login"},
	} {
		name := strings.Join(cmd, " ")
		var first string
		for _, flag := range []string{"-h", "--help"} {
			r := runBin(t, home, vars, "", append(cmd, flag)...)
			if r.code != exitOK || !strings.HasPrefix(r.stdout, "usage: octet "+name) || r.stderr != "" {
				t.Errorf("%s %s: exit %d\nstdout: %s\nstderr: %s", name, flag, r.code, r.stdout, r.stderr)
			}
			first = r.stdout
		}
		r := runBin(t, home, vars, "", append([]string{"help"}, cmd...)...)
		if r.code != exitOK || r.stdout != first {
			t.Errorf("help %s: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
		}
	}
	if r := runBin(t, home, vars, "", "help"); r.code != exitOK || !strings.Contains(r.stdout, "sessions prune --older-than") {
		t.Errorf("help: exit %d\n%s", r.code, r.stdout)
	}
	for _, args := range [][]string{{"help", "nope"}, {"sessions", "shw", "x"}, {"mcp", "help", "nope"}} {
		if r := runBin(t, home, vars, "", args...); r.code != exitUsage || r.stderr == "" {
			t.Errorf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	if r := runBin(t, home, vars, "", "sessions", "shw", "x"); !strings.Contains(r.stderr, `did you mean "show"?`) {
		t.Errorf("no suggestion: %s", r.stderr)
	}
}

// TestHelpOfHelp: help's own -h or --help, and `octet help help`, print
// the overview (exit 0) as every other command's -h prints its usage.
// They were usage errors: no help for "-h": it is not an octet command.
func TestHelpOfHelp(t *testing.T) {
	home := t.TempDir()
	vars := map[string]string{"OCTET_HOME": home}
	for _, args := range [][]string{{"help", "-h"}, {"help", "--help"}, {"help", "help"}, {"--help", "-h"}} {
		r := runBin(t, home, vars, "", args...)
		if r.code != exitOK || !strings.HasPrefix(r.stdout, "usage: octet <command>") || r.stderr != "" {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestToolsFlagHelpNamesEveryTool: the --tools help of exec, lsp and acp
// names every built-in tool --tools accepts. It listed five of the nine
// (read,search,edit,write,bash), as if the others did not exist.
func TestToolsFlagHelpNamesEveryTool(t *testing.T) {
	home := t.TempDir()
	for _, cmd := range []string{"exec", "lsp", "acp"} {
		r := runBin(t, home, map[string]string{"OCTET_HOME": home}, "", cmd, "-h")
		_, help, _ := strings.Cut(r.stdout, "--tools")
		help, _, _ = strings.Cut(help, "\n  -")
		for _, tool := range config.BuiltinTools {
			if !strings.Contains(help, tool) {
				t.Errorf("%s -h: --tools help does not name %s:%s", cmd, tool, help)
			}
		}
	}
}

// TestFlagValuesCheckedAtParse: a bad flag value is a usage error (exit
// 2) before any request is made or session is kept: --max-turns below 1,
// a --shell-path that does not exist or is not executable, --tools naming
// an MCP server that is not configured, or a tool a running server does
// not list.
func TestFlagValuesCheckedAtParse(t *testing.T) {
	x, _ := mcpExecEnv(t, true, "", providertest.Text("never"))
	notExec := filepath.Join(x.ws, "notes.txt")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-turns", "0"}, `invalid value "0" for flag --max-turns: want a whole number of turns, at least 1`},
		{[]string{"--shell-path", "/nonexistent/zsh"}, "--shell-path /nonexistent/zsh: no such file"},
		{[]string{"--shell-path", notExec}, "--shell-path " + notExec + ": not an executable file"},
		{[]string{"--tools", "read,mcp__echo__nope"}, `--tools mcp__echo__nope: no MCP server "echo" is configured`},
		{[]string{"--tools", "read,mcp__t__nope"}, "--tools mcp__t__nope: MCP server t has no such tool; it lists mcp__t__add, mcp__t__big, mcp__t__echo,"},
	} {
		r := runBin(t, x.ws, x.vars, "", append(append([]string{"exec"}, tc.args...), "hi")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if n := len(x.srv.Requests()); n != 0 {
		t.Errorf("%d provider requests for refused command lines", n)
	}
	if files := x.sessionFiles(t); len(files) != 0 {
		t.Errorf("refused command lines left sessions %v", files)
	}
	// The listed tool is accepted.
	r := runBin(t, x.ws, x.vars, "", "exec", "--tools", "read,mcp__t__echo", "hi")
	if r.code != exitOK {
		t.Errorf("a listed MCP tool: exit %d: %s", r.code, r.stderr)
	}
}

// TestWarningsArePlainSentences: warnings reach stderr as sentences, not
// structured log lines.
func TestWarningsArePlainSentences(t *testing.T) {
	x := newExecEnv(t, providertest.Text("ok"))
	os.WriteFile(filepath.Join(x.home, "config.toml"), []byte("shell_path = \"/nonexistent/zsh\"\n"), 0o600)
	os.MkdirAll(filepath.Join(x.ws, ".octet"), 0o755)
	os.WriteFile(filepath.Join(x.ws, ".octet", "config.toml"), []byte("base_url = \"https://elsewhere.invalid/v1\"\n"), 0o644)
	r := runBin(t, x.ws, x.vars, "", "exec", "--model", "local-model", "hi")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"octet: warning: " + filepath.Join(x.ws, ".octet", "config.toml") + ":1: base_url ignored: ",
		`octet: warning: model "local-model": context window unknown; assuming 128000 tokens (declare context_window and max_output_tokens in [models."local-model"] of `,
		"octet: warning: shell_path /nonexistent/zsh (from config): no such file, so every bash call will fail; fix shell_path or remove it\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "level=") || strings.Contains(r.stderr, "msg=") {
		t.Errorf("structured log lines on stderr:\n%s", r.stderr)
	}
}
