package config

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestSaveCredentials: octet login's file is read back by
// LoadCredentials (so its mode or DACL passes the privacy check) with the
// key exactly; saving again replaces the key; on Unix the file is 0600
// and a home directory it creates is 0700; keys that cannot be one are
// refused without echoing them.
func TestSaveCredentials(t *testing.T) {
	// Not t.TempDir: its cleanup fails under Wine (internal/winat).
	base, err := os.MkdirTemp("", "octet-login")
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "octet-home")
	t.Cleanup(func() { os.Remove(CredentialsPath(home)); os.Remove(home); os.Remove(base) })
	noEnv := func(string) (string, bool) { return "", false }
	for _, key := range []string{`sk-first"quote\back`, "sk-second"} {
		path, err := SaveCredentials(home, "openai", NewSecret(key))
		if err != nil {
			t.Fatal(err)
		}
		if path != CredentialsPath(home) {
			t.Errorf("saved to %s", path)
		}
		creds, err := LoadCredentials(home, noEnv)
		if err != nil || creds.APIKey.Reveal() != key {
			t.Fatalf("read back %v: key equal %v", err, creds.APIKey.Reveal() == key)
		}
	}
	if runtime.GOOS != "windows" {
		for p, want := range map[string]os.FileMode{home: 0o700, CredentialsPath(home): 0o600} {
			if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
				t.Errorf("%s: %v, mode %v, want %v", p, err, st.Mode().Perm(), want)
			}
		}
	}
	entries, _ := os.ReadDir(home)
	if len(entries) != 1 {
		t.Errorf("home holds %d files, want the credentials file alone", len(entries))
	}
	for _, bad := range []string{"", "sk-one two", "sk-line\nbreak", strings.Repeat("k", maxKeyBytes+1)} {
		_, err := SaveCredentials(home, "openai", NewSecret(bad))
		if err == nil || (bad != "" && strings.Contains(err.Error(), bad)) {
			t.Errorf("key %.20q: %v", bad, err)
		}
	}
}

// TestSaveCredentialsKeepsOtherProvidersKeys: octet login replaces the
// OpenAI key and keeps the other providers' [api_keys] entries (it used
// to write the file whole, losing them).
func TestSaveCredentialsKeepsOtherProvidersKeys(t *testing.T) {
	home := t.TempDir()
	writeFile(t, CredentialsPath(home), "openai_api_key = \"sk-old\"\n[api_keys]\nanthropic = \"sk-ant-\\\"quoted\\\\\"\ngw = \"gw\\u0007bell\"\n", 0o600)
	if _, err := SaveCredentials(home, "openai", NewSecret("sk-new")); err != nil {
		t.Fatal(err)
	}
	creds, err := LoadCredentials(home, envMap(nil))
	if err != nil || creds.APIKey.Reveal() != "sk-new" {
		t.Fatalf("openai key: %v", err)
	}
	if creds.Keys["anthropic"].Reveal() != `sk-ant-"quoted\` || creds.Keys["gw"].Reveal() != "gw\abell" || len(creds.Keys) != 2 {
		t.Errorf("kept keys = %d, anthropic equal %v, gw equal %v", len(creds.Keys), creds.Keys["anthropic"].Reveal() == `sk-ant-"quoted\`, creds.Keys["gw"].Reveal() == "gw\abell")
	}
}

// TestSaveCredentialsForAProvider: octet login saves another provider's
// key as its [api_keys] entry, keeping OpenAI's and the others'; an
// [api_keys] openai entry (which would win) goes when OpenAI's key is
// saved; a file that cannot be read is left as it is, its keys kept.
func TestSaveCredentialsForAProvider(t *testing.T) {
	home := t.TempDir()
	writeFile(t, CredentialsPath(home), "openai_api_key = \"sk-openai\"\n[api_keys]\ngw = \"gw-key\"\nopenai = \"sk-stale\"\n", 0o600)
	if _, err := SaveCredentials(home, "anthropic", NewSecret("sk-ant-new")); err != nil {
		t.Fatal(err)
	}
	creds, err := LoadCredentials(home, envMap(nil))
	if err != nil || creds.Keys["anthropic"].Reveal() != "sk-ant-new" || creds.Keys["gw"].Reveal() != "gw-key" || creds.APIKey.Reveal() != "sk-openai" {
		t.Fatalf("after saving anthropic's key: %v, %d keys", err, len(creds.Keys))
	}
	if _, err := SaveCredentials(home, "openai", NewSecret("sk-openai-new")); err != nil {
		t.Fatal(err)
	}
	key, _, err := LoadProviderKey(home, ProviderPresets()["openai"], envMap(nil))
	if err != nil || key.Reveal() != "sk-openai-new" {
		t.Fatalf("the OpenAI key after saving it: %v, new %v", err, key.Reveal() == "sk-openai-new")
	}
	if _, err := SaveCredentials(home, "bad name", NewSecret("sk-x")); err == nil {
		t.Error("an entry name that is not one was saved")
	}
	if runtime.GOOS != "windows" {
		if err := os.Chmod(CredentialsPath(home), 0o644); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(CredentialsPath(home))
		_, err := SaveCredentials(home, "gw", NewSecret("gw-new"))
		after, _ := os.ReadFile(CredentialsPath(home))
		if err == nil || !strings.Contains(err.Error(), "chmod 600") || string(before) != string(after) {
			t.Errorf("saving over an unsafe file: %v (file changed: %v)", err, string(before) != string(after))
		}
	}
}
