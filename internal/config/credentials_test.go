//go:build unix

package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fakeKey = "sk-test-DO-NOT-LEAK-4f1c2a"

func TestCredentialsFromEnvFirst(t *testing.T) {
	home := t.TempDir()
	writeFile(t, CredentialsPath(home), `openai_api_key = "sk-file"`, 0o600)
	c, err := LoadCredentials(home, envMap(map[string]string{"OPENAI_API_KEY": fakeKey}))
	if err != nil || c.APIKey.Reveal() != fakeKey || c.From != "OPENAI_API_KEY" {
		t.Fatalf("got %v from %q, %v", c.APIKey.Reveal() == fakeKey, c.From, err)
	}
}

func TestCredentialsFile(t *testing.T) {
	home := t.TempDir()
	writeFile(t, CredentialsPath(home), "# octet credentials\nopenai_api_key = \""+fakeKey+"\"\n", 0o600)
	c, err := LoadCredentials(home, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.APIKey.Reveal() != fakeKey || c.From != CredentialsPath(home) {
		t.Errorf("from %q", c.From)
	}
}

func TestCredentialsModeRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o666} {
		t.Run(fmt.Sprintf("%04o", mode), func(t *testing.T) {
			home := t.TempDir()
			path := CredentialsPath(home)
			writeFile(t, path, "openai_api_key = \""+fakeKey+"\"\n", mode)
			_, err := LoadCredentials(home, envMap(nil))
			me, ok := errors.AsType[*ModeError](err)
			if !ok {
				t.Fatalf("err = %v, want *ModeError", err)
			}
			if me.Mode.Perm() != mode {
				t.Errorf("mode = %o", me.Mode.Perm())
			}
			for _, want := range []string{path, "chmod 600 " + path, fmt.Sprintf("%04o", mode)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q lacks %q", err, want)
				}
			}
			if strings.Contains(err.Error(), fakeKey) {
				t.Error("message leaks the key")
			}
		})
	}
	// 0400 is private too and accepted.
	home := t.TempDir()
	writeFile(t, CredentialsPath(home), "openai_api_key = \""+fakeKey+"\"\n", 0o400)
	if _, err := LoadCredentials(home, envMap(nil)); err != nil {
		t.Errorf("0400 refused: %v", err)
	}
}

func TestCredentialsMissing(t *testing.T) {
	home := t.TempDir()
	_, err := LoadCredentials(home, envMap(map[string]string{"OPENAI_API_KEY": "  "}))
	if _, ok := errors.AsType[*MissingKeyError](err); !ok {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"OPENAI_API_KEY", CredentialsPath(home), "chmod 600"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestCredentialsBadFileNeverEchoesKey(t *testing.T) {
	for name, text := range map[string]string{
		"unterminated": "openai_api_key = \"" + fakeKey + "\n",
		"bare":         fakeKey + "\n",
		"quoted key":   "\"" + fakeKey + "\" = 1\n",
		"wrong type":   "openai_api_key = [\"" + fakeKey + "\"]\n",
		"empty":        "openai_api_key = \"\"\n",
	} {
		home := t.TempDir()
		writeFile(t, CredentialsPath(home), text, 0o600)
		_, err := LoadCredentials(home, envMap(nil))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), fakeKey) || strings.Contains(err.Error(), "DO-NOT-LEAK") {
			t.Errorf("%s: error leaks the key: %v", name, err)
		}
		if !strings.Contains(err.Error(), CredentialsPath(home)) {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
	}
}

func TestSecretRedacted(t *testing.T) {
	c := Credentials{APIKey: NewSecret(fakeKey), From: "OPENAI_API_KEY"}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("creds", "key", c.APIKey, "creds", c)
	js, _ := json.Marshal(c)
	out := []string{
		fmt.Sprint(c.APIKey), fmt.Sprintf("%v %+v %#v %s %q %x", c, c, c, c.APIKey, c.APIKey, c.APIKey),
		string(js), buf.String(), fmt.Errorf("wrap: %v", c.APIKey).Error(),
	}
	for _, s := range out {
		if strings.Contains(s, fakeKey) {
			t.Errorf("leaked: %s", s)
		}
	}
	if !strings.Contains(out[0], "[redacted]") {
		t.Errorf("Sprint = %q", out[0])
	}
}

func TestCredentialsNotRegular(t *testing.T) {
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, "credentials"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCredentials(home, envMap(nil)); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("err = %v", err)
	}
}

// TestCredentialsFIFODoesNotHang: a FIFO at the credentials path is
// refused at once (it used to block opening it for reading).
func TestCredentialsFIFODoesNotHang(t *testing.T) {
	home := t.TempDir()
	mkfifo(t, filepath.Join(home, "credentials"))
	var err error
	noHang(t, "LoadCredentials", func() { _, err = LoadCredentials(home, envMap(nil)) })
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("err = %v", err)
	}
}

// TestGlobalConfigFIFODoesNotHang: likewise for $OCTET_HOME/config.toml,
// which is a configuration error naming the file.
func TestGlobalConfigFIFODoesNotHang(t *testing.T) {
	home := t.TempDir()
	mkfifo(t, filepath.Join(home, "config.toml"))
	var err error
	noHang(t, "Load", func() { _, err = Load(Options{Home: home, LookupEnv: envMap(nil)}) })
	if fe, ok := errors.AsType[*FileError](err); !ok || !strings.Contains(fe.Error(), "config.toml") || !strings.Contains(fe.Error(), "FIFO") {
		t.Errorf("err = %v", err)
	}
}
