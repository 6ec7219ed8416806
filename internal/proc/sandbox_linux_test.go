//go:build linux

package proc

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/sandbox"
)

// probeCheck is the shell function every attempt goes through: it prints
// NAME=allowed or NAME=denied.
const probeCheck = `check() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=allowed"; else echo "$n=denied"; fi; }
`

// attempts are what a hostile command tries, one line each.
const attempts = probeCheck + `
check read_workspace cat file
check read_home_secret cat "$SECRET"
check follow_planted_link cat link
check write_workspace sh -c 'echo x > newfile'
check write_tmpdir sh -c 'echo x > "$TMPDIR/f"'
check write_outside sh -c 'echo x > "$OUTSIDE/f"'
check write_git_config sh -c 'echo "[evil]" >> .git/config'
check create_git_hook sh -c 'echo evil > .git/hooks/pre-commit'
check remove_git rm -rf .git/HEAD
check connect_loopback bash -c 'exec 3<>/dev/tcp/127.0.0.1/$PORT'
check udp_send bash -c 'echo x > /dev/udp/127.0.0.1/$PORT'
check signal_outside kill -0 "$VICTIM"
check grandchild_read sh -c 'sh -c "cat \"$SECRET\""'
check setsid_read setsid sh -c 'cat "$SECRET"'
check has_capabilities sh -c 'grep "^CapEff" /proc/self/status | grep -qv 0000000000000000'
check double_fork_write sh -c '(sh -c "echo x > \"$OUTSIDE/df\"" &) ; sleep 0.2; test -f "$OUTSIDE/df"'
`

// sandboxWorld is a workspace with a repository, a secret in a home
// directory, a link planted in the workspace to it, a directory outside,
// a loopback listener and a process outside.
type sandboxWorld struct {
	ws, home, outside, tmp string
	env                    []string
}

func newSandboxWorld(t *testing.T) *sandboxWorld {
	t.Helper()
	w := &sandboxWorld{ws: t.TempDir(), home: t.TempDir(), outside: t.TempDir(), tmp: t.TempDir()}
	mustWrite := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(w.home, ".ssh", "id_ed25519")
	mustWrite(secret, "HOME-SECRET\n")
	mustWrite(filepath.Join(w.ws, "file"), "inside\n")
	mustWrite(filepath.Join(w.ws, ".git", "config"), "[core]\n")
	mustWrite(filepath.Join(w.ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	if err := os.MkdirAll(filepath.Join(w.ws, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(w.ws, "link")); err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := tcp.Addr().(*net.TCPAddr).Port
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })
	w.env = append(os.Environ(), "HOME="+w.home, "SECRET="+secret, "OUTSIDE="+w.outside,
		"PORT="+strconv.Itoa(port), "VICTIM="+strconv.Itoa(victim.Process.Pid), "TMPDIR="+w.tmp)
	return w
}

// spec is the Spec of profile p (nil for None) in w.
func (w *sandboxWorld) spec(p sandbox.Profile, network bool) *sandbox.Spec {
	if p == sandbox.None {
		return nil
	}
	return &sandbox.Spec{
		Profile: p, Network: network, Workspace: w.ws, Shell: "/bin/bash", TempDir: w.tmp,
		Protected: sandbox.ProtectedNames, Namespace: sandbox.Probe().Namespaces,
	}
}

// attempt runs the attempts under spec and returns each one's outcome.
func (w *sandboxWorld) attempt(t *testing.T, spec *sandbox.Spec) map[string]string {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(Command{
		Path: "/bin/bash", Args: []string{"bash", "-c", attempts}, Dir: w.ws,
		Env: w.env, Stdout: pw, Stderr: pw, Grace: time.Second, Sandbox: spec,
	})
	pw.Close()
	if err != nil {
		pr.Close()
		t.Fatalf("Start: %v", err)
	}
	out, _ := io.ReadAll(pr)
	pr.Close()
	if _, err := p.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	got := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			got[k] = v
		}
	}
	// Undo what an allowed attempt did, for the next profile.
	os.Remove(filepath.Join(w.ws, "newfile"))
	os.Remove(filepath.Join(w.outside, "f"))
	os.Remove(filepath.Join(w.outside, "df"))
	os.WriteFile(filepath.Join(w.ws, ".git", "config"), []byte("[core]\n"), 0o644)
	os.WriteFile(filepath.Join(w.ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.Remove(filepath.Join(w.ws, ".git", "hooks", "pre-commit"))
	return got
}

// TestSandboxProfiles runs a hostile command's attempts under each
// profile and checks each is refused exactly where the profile says and
// allowed where it says: with real processes and the real kernel.
func TestSandboxProfiles(t *testing.T) {
	st := sandbox.Probe()
	if st.Mechanism != "landlock" || st.ABI < 6 || !st.Network {
		t.Skipf("this kernel's sandbox (%s) cannot show every refusal", st)
	}
	w := newSandboxWorld(t)
	all := []string{"read_workspace", "read_home_secret", "follow_planted_link", "write_workspace", "write_tmpdir",
		"write_outside", "write_git_config", "create_git_hook", "remove_git", "connect_loopback", "udp_send",
		"signal_outside", "grandchild_read", "setsid_read", "double_fork_write"}
	allowedUnder := map[string][]string{
		"read-only":               {"read_workspace", "write_tmpdir"},
		"workspace-write":         {"read_workspace", "write_tmpdir", "write_workspace"},
		"workspace-write+network": {"read_workspace", "write_tmpdir", "write_workspace", "connect_loopback", "udp_send"},
		"none":                    all,
	}
	if !st.Namespaces {
		t.Logf("no namespaces here: .git stays writable under workspace-write")
		for _, k := range []string{"workspace-write", "workspace-write+network"} {
			allowedUnder[k] = append(allowedUnder[k], "write_git_config", "create_git_hook", "remove_git")
		}
	}
	if os.Geteuid() == 0 {
		// Root keeps its capabilities only outside the sandbox.
		allowedUnder["none"] = append(allowedUnder["none"], "has_capabilities")
	}
	all = append(all, "has_capabilities")
	for _, c := range []struct {
		name    string
		profile sandbox.Profile
		network bool
	}{
		{"read-only", sandbox.ReadOnly, false},
		{"workspace-write", sandbox.WorkspaceWrite, false},
		{"workspace-write+network", sandbox.WorkspaceWrite, true},
		{"none", sandbox.None, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := w.attempt(t, w.spec(c.profile, c.network))
			for _, k := range all {
				want := "denied"
				for _, a := range allowedUnder[c.name] {
					if a == k {
						want = "allowed"
					}
				}
				if got[k] != want {
					t.Errorf("%s under %s: %q, want %s", k, c.name, got[k], want)
				}
			}
		})
	}
}

// TestSandboxProfilesUnprivileged reruns TestSandboxProfiles as an
// ordinary user (nobody) when the tests run as root: root bypasses file
// permissions but not Landlock, and an ordinary user needs a user
// namespace for the .git mounts.
func TestSandboxProfilesUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: TestSandboxProfiles is the ordinary user's run")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	bin := runAsNobodyBinary(t)
	cmd := exec.Command(bin, "-test.run=^TestSandboxProfiles$", "-test.v", "-test.count=1")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Dir(bin), "HOME="+filepath.Dir(bin))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: false}}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestSandboxProfiles")) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	t.Logf("as nobody:\n%s", out)
}

// runAsNobodyBinary copies this test binary to a directory nobody may
// use (go test's own is private to root).
func runAsNobodyBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "octet-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "proc.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestSandboxSpecRefusedBeforeStart: a Spec that cannot be applied (a
// relative path) fails Start and runs nothing: a sandboxed command never
// runs unconfined.
func TestSandboxSpecRefusedBeforeStart(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	_, err := Start(Command{
		Path: "/bin/sh", Args: []string{"sh", "-c", "touch " + marker}, Dir: t.TempDir(), Env: os.Environ(),
		Sandbox: &sandbox.Spec{Profile: sandbox.WorkspaceWrite, Workspace: "relative/ws"},
	})
	if err == nil || !strings.Contains(err.Error(), "not absolute") {
		t.Fatalf("Start: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran")
	}
}
