package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestDemoBinary runs the real binary as a user would with stdin from
// /dev/null: it must approve by itself, exit 0, leave a session file and
// change the demo workspace's greet.go.
func TestDemoBinary(t *testing.T) {
	home := t.TempDir()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, octetBin, "demo")
	cmd.Stdin = devnull
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_API_KEY="+fakeKey)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("octet demo: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	t.Logf("demo took %v", time.Since(start))
	stdout := out.String()
	for _, want := range []string{
		"approved automatically (stdin is not a terminal",
		"approval needed: edit greet.go",
		"recovered output of the interrupted attempt",
		"; retrying 1/11 in ",
		"run completed",
		"octet sessions show ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	ws := regexp.MustCompile(`workspace: (\S+)`).FindStringSubmatch(stdout)
	sp := regexp.MustCompile(`session:\s+(\S+\.jsonl)`).FindStringSubmatch(stdout)
	if ws == nil || sp == nil {
		t.Fatalf("demo output lacks workspace or session path:\n%s", stdout)
	}
	// The workspace copy is removed when the demo ends; its result line
	// shows what greet.go held then.
	if _, err := os.Stat(ws[1]); !os.IsNotExist(err) {
		t.Errorf("the demo's workspace copy %s is still there (%v)", ws[1], err)
	}
	if !strings.Contains(stdout, `greet.go:  return "Hello, " + name + "!"`) {
		t.Errorf("greet.go was not changed:\n%s", stdout)
	}
	if !strings.HasPrefix(sp[1], filepath.Join(home, "sessions")) {
		t.Errorf("session %s is not under OCTET_HOME %s", sp[1], home)
	}
	sess, err := os.ReadFile(sp[1])
	if err != nil {
		t.Fatalf("session file: %v", err)
	}
	if !bytes.Contains(sess, []byte(`"completed"`)) || !bytes.Contains(sess, []byte("Hello, ")) {
		t.Errorf("session lacks the run:\n%s", sess)
	}
	// The recovered text is never part of the committed answer.
	if bytes.Contains(sess, []byte("I will change that line")) {
		t.Error("the interrupted attempt's text was committed to the session")
	}
	assertNoSecret(t, []string{stdout, errb.String()}, home, ws[1])
}

// TestExecSIGINT interrupts a real octet exec process mid-stream: the run
// is cancelled and the exit status is 130.
func TestExecSIGINT(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Stall())
	home, ws := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, octetBin, "exec", "--json", "wait forever")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for run_started, then for the request to reach the server.
	buf := make([]byte, 4096)
	var seen bytes.Buffer
	for !bytes.Contains(seen.Bytes(), []byte("run_started")) {
		n, err := stdout.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("stdout ended before run_started: %v\n%s", err, errb.String())
		}
	}
	for deadline := time.Now().Add(20 * time.Second); len(srv.Requests()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no provider request")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stdout)
	seen.Write(rest)
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitCancelled {
		t.Fatalf("exit %d (%v), want 130\nstderr: %s", code, err, errb.String())
	}
	if !bytes.Contains(seen.Bytes(), []byte(`"outcome":"cancelled"`)) {
		t.Errorf("no cancelled run_finished:\n%s", seen.String())
	}
	assertNoSecret(t, []string{seen.String(), errb.String()}, home)
}

// TestDemoConfigIsControlled keeps the demo's approval step honest: under
// the product default (unsafe_host) an edit would not ask.
func TestDemoConfigIsControlled(t *testing.T) {
	c := demoConfig(t.TempDir(), t.TempDir(), "http://127.0.0.1:1/v1")
	if c.EffectPolicy.Value != config.Controlled || c.AllowExternalPaths.Value {
		t.Errorf("demo policy = %v external=%v", c.EffectPolicy.Value, c.AllowExternalPaths.Value)
	}
}

// TestDemoLeavesNothingBehind: the demo's workspace copy, and its home
// when OCTET_HOME is not set, are removed when it ends; with OCTET_HOME
// the session stays there to inspect.
func TestDemoLeavesNothingBehind(t *testing.T) {
	tmp := t.TempDir()
	r := runBin(t, t.TempDir(), map[string]string{"TMPDIR": tmp}, "", "demo")
	if r.code != exitOK || !strings.Contains(r.stdout, "cleanup:") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the demo left %v in TMPDIR", left)
	}
	home := t.TempDir()
	r = runBin(t, t.TempDir(), map[string]string{"TMPDIR": tmp, "OCTET_HOME": home}, "", "demo")
	if r.code != exitOK || !strings.Contains(r.stdout, "inspect:   octet sessions show ") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the demo left %v in TMPDIR", left)
	}
	if m, _ := filepath.Glob(filepath.Join(home, "sessions", "*.jsonl")); len(m) != 1 {
		t.Errorf("sessions under OCTET_HOME: %v", m)
	}
}
