package main

import (
	"strings"
	"testing"

	"github.com/octet-agent/octet/internal/config"
)

// TestLoginFromStdin: with stdin not a terminal, octet login takes the
// key from its first line (never printing it) and says where it went; a
// blank or two-word key is refused (exit 2) and nothing is written.
func TestLoginFromStdin(t *testing.T) {
	home := t.TempDir()
	vars := map[string]string{"OCTET_HOME": home}
	noEnv := func(string) (string, bool) { return "", false }
	for _, bad := range []string{"", "\n", "sk-one two\n"} {
		r := runBin(t, home, vars, bad, "login")
		if r.code != exitUsage || strings.Contains(r.stderr+r.stdout, "sk-one") {
			t.Errorf("key %q: exit %d\nstdout %s\nstderr %s", bad, r.code, r.stdout, r.stderr)
		}
		if _, err := config.LoadCredentials(home, noEnv); err == nil {
			t.Fatalf("key %q was saved", bad)
		}
	}
	r := runBin(t, home, vars, "  sk-from-stdin-77  \n", "login")
	if r.code != exitOK || strings.Contains(r.stdout+r.stderr, "sk-from") || !strings.Contains(r.stdout, config.CredentialsPath(home)) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	creds, err := config.LoadCredentials(home, noEnv)
	if err != nil || creds.APIKey.Reveal() != "sk-from-stdin-77" {
		t.Errorf("credentials %v, key equal %v", err, creds.APIKey.Reveal() == "sk-from-stdin-77")
	}
}
