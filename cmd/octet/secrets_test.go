//go:build unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// ancestorsProbe prints, for the shell's parent and each ancestor above
// it, whether its /proc/<pid>/environ is readable: what
// `tr '\0' '\n' < /proc/$PPID/environ` would get.
const ancestorsProbe = `p=$PPID; while [ "$p" -gt 1 ]; do if tr '\0' '\n' < /proc/$p/environ >/dev/null 2>&1; then echo "ancestor $p readable"; else echo "ancestor $p denied"; fi; p=$(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f2); done`

// TestToolsCannotReadOctetsEnvironment runs the real octet binary with
// OPENAI_API_KEY in its environment: a bash command cannot read octet's
// /proc/<pid>/environ (PR_SET_DUMPABLE is off), and a command that prints
// the key from a file it can read gets it redacted before the model, the
// session file or the event stream see it.
func TestToolsCannotReadOctetsEnvironment(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("PR_SET_DUMPABLE is Linux")
	}
	srv := providertest.New(t)
	srv.Enqueue(
		providertest.Reply(
			providertest.FunctionCall("c1", "bash", mustArgs(t, map[string]any{"command": ancestorsProbe})),
			providertest.FunctionCall("c2", "bash", mustArgs(t, map[string]any{"command": "cat creds.txt"})),
		),
		providertest.Text("done"),
	)
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "creds.txt"), []byte("OPENAI_API_KEY="+fakeKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, octetBin, "exec", "--json", "look around")
	// Root reads every process's environment whatever octet does; run
	// octet as an ordinary user, as it runs for the people who use it.
	asUnprivileged(t, cmd, home, ws)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	octetPID := cmd.Process.Pid
	if err := cmd.Wait(); err != nil {
		t.Fatalf("octet exec: %v\n%s", err, stderr.String())
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider requests", len(reqs))
	}
	body, _ := json.Marshal(reqs[1].Body)
	outputs := string(body)
	m := regexp.MustCompile(`ancestor ` + strconv.Itoa(octetPID) + ` (readable|denied)`).FindStringSubmatch(outputs)
	if m == nil {
		t.Fatalf("the probe did not reach octet (pid %d) among the shell's ancestors: %s", octetPID, outputs)
	}
	if m[1] != "denied" {
		t.Errorf("octet's /proc/%d/environ is readable by the tools it runs", octetPID)
	}
	if !strings.Contains(outputs, "OPENAI_API_KEY=[REDACTED]") {
		t.Errorf("the key printed by a command was not redacted in what the model got: %s", outputs)
	}
	assertNoSecret(t, []string{outputs, stdout.String(), stderr.String()}, home)
}

func mustArgs(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// asUnprivileged makes cmd run as the unprivileged user nobody when the
// test runs as root (CI does), handing it dirs and the octet binary.
func asUnprivileged(t *testing.T, cmd *exec.Cmd, dirs ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	const nobody = 65534
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, _ os.DirEntry, err error) error {
			if err == nil {
				err = os.Chown(p, nobody, nobody)
			}
			return err
		})
		// t.TempDir's parents are private to root: let nobody through.
		for p := filepath.Dir(d); p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
			os.Chmod(p, 0o711)
		}
	}
	os.Chmod(filepath.Dir(octetBin), 0o755)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
}
