//go:build unix

package main

import (
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestExecStdoutClosedSettles runs the real binary in a real shell
// pipeline, `octet exec --json … | head -c 100`, while the provider
// streams a long answer: once head has its 100 bytes and exits, octet's
// next write fails, and the run is cancelled and settled like one a
// client cancelled (its checkpoint durable, its request settled), and
// octet exits 141 (documented). On the old code SIGPIPE killed octet
// mid-run (exit 141 too, from the signal), leaving no checkpoint and the
// request unsettled.
func TestExecStdoutClosedSettles(t *testing.T) {
	x := newExecEnv(t)
	began := time.Now()
	code, stderr := headPipeline(t, x, `--json "write a long answer"`)
	file := x.oneSession(t)
	s, err := session.Inspect(file)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cps := s.Checkpoints()
	if len(cps) != 1 || cps[0].Outcome != "cancelled" {
		t.Fatalf("checkpoints %+v (exit %d, after %s; stderr: %s)", cps, code, time.Since(began), stderr)
	}
	if tot := s.Totals(); tot.UnsettledDispatches != 0 {
		t.Errorf("%d request(s) left unsettled: %+v", tot.UnsettledDispatches, tot)
	}
	if code != exitStdoutClosed {
		t.Errorf("octet exit status %d, want %d", code, exitStdoutClosed)
	}
	if !strings.Contains(stderr, "standard output was closed") || !strings.Contains(stderr, "the run was cancelled and settled") {
		t.Errorf("stderr does not say what happened:\n%s", stderr)
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("the pipeline took %s: the run was not cancelled when its reader left", d)
	}
	sid := sessionIDOf(file)
	show := runCLI(t, x.ws, x.vars, "sessions", "show", sid)
	if !strings.Contains(show.stdout, ": cancelled") {
		t.Errorf("sessions show has no outcome:\n%s", show.stdout)
	}
}

// headPipeline runs `octet exec ARGS… | head -c 100` in a real shell while
// the provider streams a long answer, and returns octet's exit status and
// stderr.
func headPipeline(t *testing.T, x *execEnv, args string) (int, string) {
	t.Helper()
	words := strings.Repeat("streaming words for a reader that stops early ", 60)
	x.srv.Enqueue(providertest.Text(words).Pace(20 * time.Millisecond))
	sh := exec.CommandContext(t.Context(), "bash", "-c", `"$OCTET" exec `+args+` | head -c 100 >/dev/null; echo "${PIPESTATUS[0]}"`)
	sh.Dir = x.ws
	sh.Env = append(os.Environ(), "OCTET="+octetBin)
	for k, v := range x.vars {
		sh.Env = append(sh.Env, k+"="+v)
	}
	var stderr strings.Builder
	sh.Stderr = &stderr
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("pipeline: %v\nstderr: %s", err, stderr.String())
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("pipeline printed %q", out)
	}
	return code, stderr.String()
}

// TestExecStdoutClosedWritesOutputFile: -o FILE is written when the run
// ends because stdout was closed, as when it fails or is cancelled with
// Ctrl-C (the README: "even when the run fails"). It was left as it was:
// a script reading FILE after `octet exec -o FILE … | head` read the
// answer of an earlier run.
func TestExecStdoutClosedWritesOutputFile(t *testing.T) {
	x := newExecEnv(t)
	answer := filepath.Join(x.ws, "answer.md")
	if err := os.WriteFile(answer, []byte("the answer of an earlier run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stderr := headPipeline(t, x, `-o answer.md "write a long answer"`)
	if code != exitStdoutClosed {
		t.Fatalf("octet exit status %d, want %d; stderr: %s", code, exitStdoutClosed, stderr)
	}
	got, err := os.ReadFile(answer)
	if err != nil || strings.Contains(string(got), "earlier run") {
		t.Errorf("-o file after the run: %q, %v", got, err)
	}
}

// TestExecStdoutClosedEphemeral: with --ephemeral, the message of a run
// ended by a closed stdout does not send the user to sessions show for a
// session that was removed with the run.
func TestExecStdoutClosedEphemeral(t *testing.T) {
	x := newExecEnv(t)
	code, stderr := headPipeline(t, x, `--ephemeral "write a long answer"`)
	if code != exitStdoutClosed || !strings.Contains(stderr, "the run was cancelled") {
		t.Fatalf("octet exit status %d, want %d; stderr: %s", code, exitStdoutClosed, stderr)
	}
	if strings.Contains(stderr, "sessions show") || !strings.Contains(stderr, "not kept (--ephemeral)") {
		t.Errorf("stderr names a session that is gone:\n%s", stderr)
	}
	if files := x.sessionFiles(t); len(files) != 0 {
		t.Errorf("sessions kept: %v", files)
	}
}

// TestExecSIGHUPSettles: SIGHUP (the terminal octet exec runs in was
// closed) cancels the run and settles it with its checkpoint, as SIGINT
// and SIGTERM do. It killed octet mid-run: no checkpoint, the request in
// flight left unsettled.
func TestExecSIGHUPSettles(t *testing.T) {
	words := strings.Repeat("streaming words for a terminal that goes away ", 60)
	x := newExecEnv(t, providertest.Text(words).Pace(20*time.Millisecond))
	cmd := x.octetCmd(t, "exec", "write a long answer")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := startHangable(cmd); err != nil {
		t.Fatal(err)
	}
	x.awaitRequests(t, 1)
	time.Sleep(200 * time.Millisecond) // the answer is streaming
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitCancelled {
		t.Errorf("exit status %d (%v), want %d; stderr: %s", code, cmd.ProcessState, exitCancelled, stderr.String())
	}
	file := x.oneSession(t)
	s, err := session.Inspect(file)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if cps := s.Checkpoints(); len(cps) != 1 || cps[0].Outcome != "cancelled" {
		t.Errorf("checkpoints %+v; stderr: %s", cps, stderr.String())
	}
	if tot := s.Totals(); tot.UnsettledDispatches != 0 {
		t.Errorf("%d request(s) left unsettled", tot.UnsettledDispatches)
	}

	// Under nohup (SIGHUP ignored) the run goes on to its end.
	x.srv.Enqueue(providertest.Text("still here " + strings.Repeat("and going on ", 20)).Pace(20 * time.Millisecond))
	sh := exec.CommandContext(t.Context(), "bash", "-c", `trap "" HUP; exec "$OCTET" exec "carry on"`)
	sh.Dir = x.ws
	sh.Env = append(os.Environ(), "OCTET="+octetBin)
	for k, v := range x.vars {
		sh.Env = append(sh.Env, k+"="+v)
	}
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	x.awaitRequests(t, 2)
	sh.Process.Signal(syscall.SIGHUP)
	answer, _ := io.ReadAll(out)
	if err := sh.Wait(); err != nil || !strings.Contains(string(answer), "still here") {
		t.Errorf("under nohup: %v, stdout %q", err, answer)
	}
}

// startHangable starts cmd with SIGHUP's default action, also when this
// test process runs with SIGHUP ignored (under nohup, as CI scripts may
// run): an ignored signal stays ignored across exec, a caught one is
// reset to its default, so SIGHUP is caught here while cmd starts.
func startHangable(cmd *exec.Cmd) error {
	if signal.Ignored(syscall.SIGHUP) {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGHUP)
		defer signal.Stop(c)
	}
	return cmd.Start()
}

// TestDemoStdoutClosedLeavesNothingBehind: `octet demo | head` (a reader
// that stops early) cancels and settles the demo's run, removes its
// temporary workspace and home, and exits 141, as exec does. SIGPIPE
// killed the demo: its /tmp/octet-demo-workspace-* copy (and temporary
// home) stayed, and its session was left with no checkpoint.
func TestDemoStdoutClosedLeavesNothingBehind(t *testing.T) {
	for _, keep := range []bool{false, true} {
		tmp, home := t.TempDir(), t.TempDir()
		vars := map[string]string{"TMPDIR": tmp, "OCTET": octetBin}
		if keep {
			vars["OCTET_HOME"] = home
		}
		sh := exec.CommandContext(t.Context(), "bash", "-c", `"$OCTET" demo | head -c 50 >/dev/null; echo "${PIPESTATUS[0]}"`)
		sh.Dir, sh.Env = t.TempDir(), binEnv(vars)
		var stderr strings.Builder
		sh.Stderr = &stderr
		out, err := sh.Output()
		if err != nil {
			t.Fatalf("pipeline: %v\nstderr: %s", err, stderr.String())
		}
		if code := strings.TrimSpace(string(out)); code != strconv.Itoa(exitStdoutClosed) {
			t.Errorf("OCTET_HOME set %v: demo exit status %s, want %d; stderr: %s", keep, code, exitStdoutClosed, stderr.String())
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("OCTET_HOME set %v: the demo left %v in TMPDIR", keep, left)
		}
		if !keep {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(home, "sessions", "*.jsonl"))
		if len(files) != 1 {
			t.Fatalf("sessions %v", files)
		}
		s, err := session.Inspect(files[0])
		if err != nil {
			t.Fatal(err)
		}
		cps, tot := s.Checkpoints(), s.Totals()
		s.Close()
		if len(cps) != 1 || tot.UnsettledDispatches != 0 {
			t.Errorf("checkpoints %+v, %d request(s) unsettled; stderr: %s", cps, tot.UnsettledDispatches, stderr.String())
		}
	}
}
