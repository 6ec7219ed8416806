//go:build linux

package mcp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/sandbox"
	"github.com/octet-agent/octet/tools"
)

// TestStdioServerSandbox: a stdio server runs with its user's access by
// default, and confined when its configuration asks for a sandbox: the
// same server script that reads a secret outside the workspace reads it
// unconfined and is refused in the workspace-write sandbox, where the
// server itself still starts and serves its tools.
func TestStdioServerSandbox(t *testing.T) {
	if st := sandbox.Probe(); !st.Available() {
		t.Skipf("no sandbox here: %s", st)
	}
	secret := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secret, []byte("HOME-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		profile tools.SandboxProfile
		leaks   bool
	}{{tools.SandboxNone, true}, {"", true}, {tools.SandboxWorkspaceWrite, false}, {tools.SandboxReadOnly, false}} {
		t.Run(string(c.profile), func(t *testing.T) {
			ws := t.TempDir()
			seen := filepath.Join(ws, "seen")
			if c.profile == tools.SandboxReadOnly {
				// read-only cannot write the workspace: report on stderr.
				seen = "/dev/stderr"
			}
			sp := Spec{Name: "s", Command: "/bin/sh", Args: []string{"-c", "cat " + secret + " > " + seen + " 2>&1; exec " + serverBin},
				StartupTimeout: 30 * time.Second, ToolTimeout: 10 * time.Second,
				Sandbox: c.profile, SandboxPaths: tools.SandboxConfig{ReadPaths: []string{filepath.Dir(serverBin)}}}
			f := start(t, Options{Servers: []Spec{sp}, Workspace: ws})
			waitFor(t, "the server to run", func() bool { return f.server(t, "s").State == StateRunning })
			var got string
			if c.profile == tools.SandboxReadOnly {
				got = f.log.String()
			} else {
				b, _ := os.ReadFile(seen)
				got = string(b)
			}
			if leaked := strings.Contains(got, "HOME-SECRET"); leaked != c.leaks {
				t.Fatalf("server read the secret: %v, want %v (%q)", leaked, c.leaks, got)
			}
			if !c.leaks && !strings.Contains(got, "Permission denied") {
				t.Errorf("no refusal seen: %q", got)
			}
		})
	}
}
