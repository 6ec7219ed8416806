//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/config"
)

// TestLoginOnTerminal: octet login on a terminal asks for the key, does
// not echo what is typed (nothing of the key reaches the screen), and
// saves it in the credentials file, private to the user, where octet
// reads it.
func TestLoginOnTerminal(t *testing.T) {
	const key = "sk-typed-on-the-terminal-4242"
	home := filepath.Join(t.TempDir(), "home")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, octetBin, "login")
	cmd.Env = binEnv(map[string]string{"OCTET_HOME": home})
	out, typed, err := runOnPTY(t, cmd, "OpenAI API key", key+"\n")
	if err != nil {
		t.Fatalf("octet login: %v\n%s", err, out.String())
	}
	if !typed {
		t.Fatalf("no prompt:\n%s", out.String())
	}
	if bytes.Contains(out.Bytes(), []byte("typed-on")) {
		t.Errorf("the key was echoed:\n%q", out.String())
	}
	path := config.CredentialsPath(home)
	creds, err := config.LoadCredentials(home, func(string) (string, bool) { return "", false })
	if err != nil || creds.APIKey.Reveal() != key {
		t.Fatalf("credentials: %v (the key read back equal: %v)", err, creds.APIKey.Reveal() == key)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v %v", path, err, st.Mode())
	}
	if !bytes.Contains(out.Bytes(), []byte("Saved the OpenAI API key in "+path)) {
		t.Errorf("the terminal does not say where the key went:\n%s", out.String())
	}
}
