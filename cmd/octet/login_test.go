package main

import (
	"os"
	"path/filepath"
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

// TestLoginSavesTheSelectedProvidersKey: octet login saves the key of
// model_provider (anthropic's as its [api_keys] entry, OpenAI's kept), or
// of --provider; a provider whose key only a variable holds, one that
// needs none and one that does not exist are refused saying why, with
// nothing written.
func TestLoginSavesTheSelectedProvidersKey(t *testing.T) {
	home := t.TempDir()
	vars := map[string]string{"OCTET_HOME": home}
	writeConfig := func(text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	noEnv := func(string) (string, bool) { return "", false }
	if r := runBin(t, home, vars, "sk-openai-1\n", "login"); r.code != exitOK || !strings.Contains(r.stdout, "Saved the OpenAI API key") {
		t.Fatalf("openai: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	writeConfig("model_provider = \"anthropic\"\n[model_providers.envonly]\nbase_url = \"https://gw.example.com/v1\"\nenv_key = \"GW_KEY\"\n")
	r := runBin(t, home, vars, "sk-ant-2\n", "login")
	if r.code != exitOK || !strings.Contains(r.stdout, "Saved the API key of provider anthropic") || strings.Contains(r.stdout+r.stderr, "sk-ant") {
		t.Fatalf("anthropic: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	creds, err := config.LoadCredentials(home, noEnv)
	if err != nil || creds.APIKey.Reveal() != "sk-openai-1" || creds.Keys["anthropic"].Reveal() != "sk-ant-2" {
		t.Fatalf("credentials after both logins: %v, %d keys", err, len(creds.Keys))
	}
	if r := runBin(t, home, vars, "sk-or-3\n", "login", "--provider", "openrouter"); r.code != exitOK {
		t.Fatalf("--provider openrouter: exit %d\n%s", r.code, r.stderr)
	}
	if creds, _ := config.LoadCredentials(home, noEnv); creds.Keys["openrouter"].Reveal() != "sk-or-3" {
		t.Error("--provider openrouter did not save its key")
	}
	for _, c := range []struct{ provider, want string }{
		{"envonly", "takes its key from GW_KEY only"},
		{"ollama", "needs no key"},
		{"nosuch", `no provider "nosuch"`},
	} {
		before, _ := os.ReadFile(config.CredentialsPath(home))
		r := runBin(t, home, vars, "sk-never\n", "login", "--provider", c.provider)
		after, _ := os.ReadFile(config.CredentialsPath(home))
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) || string(before) != string(after) {
			t.Errorf("--provider %s: exit %d, file changed %v\n%s", c.provider, r.code, string(before) != string(after), r.stderr)
		}
	}
}
