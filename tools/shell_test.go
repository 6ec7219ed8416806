package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveShellWindowsRules runs the Windows shell selection on every
// platform: the configured shell_path must be an .exe, else bash on PATH,
// else unavailable with a reason naming Git for Windows — never /bin/sh or
// another fallback.
func TestResolveShellWindowsRules(t *testing.T) {
	dir := t.TempDir()
	bash := filepath.Join(dir, "bash.exe")
	if err := os.WriteFile(bash, []byte("MZ"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "bash.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	onPath := func(string) (string, error) { return bash, nil }
	nowhere := func(string) (string, error) { return "", errors.New("not found") }

	if p, sel := resolveShell(bash, true, nowhere); sel != ShellConfigured || p != bash {
		t.Errorf("configured bash.exe: %q %q", p, sel)
	}
	if p, sel := resolveShell(script, true, onPath); sel != ShellUnavailable || p != "" {
		t.Errorf("configured non-.exe: %q %q, want unavailable (no fallback)", p, sel)
	}
	if p, sel := resolveShell("", true, onPath); sel != ShellPathBash || p != bash {
		t.Errorf("bash on PATH: %q %q", p, sel)
	}
	if p, sel := resolveShell("", true, nowhere); sel != ShellUnavailable || p != "" {
		t.Errorf("no bash: %q %q, want unavailable even though /bin/sh may exist", p, sel)
	}
	if r := shellUnavailableReason(true); !strings.Contains(r, "Git for Windows") || !strings.Contains(r, "shell_path") {
		t.Errorf("reason %q does not say what to install or configure", r)
	}
	// The Unix rules accept the executable script and ignore .exe names.
	if _, sel := resolveShell(script, false, nowhere); sel != ShellConfigured {
		t.Errorf("unix: configured script: %q", sel)
	}
	if _, sel := resolveShell(bash, false, nowhere); sel != ShellUnavailable {
		t.Errorf("unix: non-executable bash.exe: %q", sel)
	}
}
