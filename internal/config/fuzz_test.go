package config

import (
	"os"
	"strings"
	"testing"
)

// FuzzParseConfig checks that no config text panics the strict decoder and
// that every error it returns carries the file name.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("model = \"x\"\neffect_policy = \"controlled\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fc, err := parseFile("c.toml", data, BuiltinTools)
		if err != nil {
			if fe := err.Error(); len(fe) < 6 || fe[:6] != "c.toml" {
				t.Fatalf("error without file name: %q", fe)
			}
			return
		}
		c := Defaults()
		fc.apply(&c, SourceConfig)
		fc.tighten(&c)
	})
}

// FuzzCredentials checks that no credentials file content panics the
// reader and that no error ever quotes the file's content.
func FuzzCredentials(f *testing.F) {
	f.Add([]byte("openai_api_key = \"sk-abc\"\n"))
	f.Add([]byte("[api_keys]\nanthropic = \"sk-ant-abc\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		home := t.TempDir()
		path := CredentialsPath(home)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		creds, err := LoadCredentials(home, func(string) (string, bool) { return "", false })
		if err == nil {
			if creds.APIKey.IsZero() {
				t.Fatal("accepted an empty key")
			}
			return
		}
		msg := strings.ReplaceAll(err.Error(), path, "")
		msg = strings.ReplaceAll(msg, "openai_api_key", "") // the one key name messages may name
		for _, tok := range strings.Fields(string(data)) {
			tok = strings.Trim(tok, "\"'=[]{},")
			if len(tok) >= 12 && strings.Contains(msg, tok) {
				t.Fatalf("error %q quotes file content %q", err, tok)
			}
		}
	})
}
