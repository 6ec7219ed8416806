//go:build linux

package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// run is a command under a guard with its combined output collected.
type run struct {
	p   *Process
	out *bytes.Buffer
	wg  sync.WaitGroup
	dir string
}

// start runs script with /bin/sh -c under a guard in a fresh directory.
func start(t *testing.T, script string, grace time.Duration) *run {
	t.Helper()
	r := &run{out: new(bytes.Buffer), dir: t.TempDir()}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(Command{
		Path: "/bin/sh", Args: []string{"sh", "-c", script}, Dir: r.dir,
		Env: os.Environ(), Stdout: pw, Stderr: pw, Grace: grace,
	})
	pw.Close()
	if err != nil {
		pr.Close()
		t.Fatalf("Start: %v", err)
	}
	r.p = p
	r.wg.Go(func() { io.Copy(r.out, pr); pr.Close() })
	return r
}

// wait waits for the guard and the output, bounded so a broken guard
// fails the test instead of hanging it.
func (r *run) wait(t *testing.T) (Status, error) {
	t.Helper()
	type res struct {
		st  Status
		err error
	}
	ch := make(chan res, 1)
	go func() { st, err := r.p.Wait(); r.wg.Wait(); ch <- res{st, err} }()
	select {
	case x := <-ch:
		return x.st, x.err
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return")
		return Status{}, nil
	}
}

// pidFile waits for dir/name to hold a pid and a newline.
func pidFile(t *testing.T, dir, name string) int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was never written", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running lists the living (non-zombie) processes whose command line is
// exactly "sleep ARG": every test uses its own ARG as a tag, so what one
// test left running cannot be mistaken for another's.
func running(arg string) []int {
	names, _ := os.ReadDir("/proc")
	want := []byte("sleep\x00" + arg + "\x00")
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Equal(cl, want) {
			continue
		}
		if p, ok := readStat(pid); ok && !p.zombie {
			out = append(out, pid)
		}
	}
	return out
}

// killTagged cleans up after a failing test.
func killTagged(arg string) {
	for _, pid := range running(arg) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// requireSetsid skips the test where setsid(1) is missing.
func requireSetsid(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid(1) not installed")
	}
}

// treeScript starts, in the background, a plain child, a setsid'd one, a
// double-forked one and a setsid'd double fork, all "sleep TAG", and
// waits until each wrote its pid file.
func treeScript(tag string) string {
	return fmt.Sprintf(`sleep %[1]s & echo $! > a.pid
setsid sleep %[1]s & echo $! > b.pid
(sleep %[1]s & echo $! > c.pid) &
setsid sh -c 'sleep %[1]s & echo $! > d.pid' &
while [ ! -s c.pid ] || [ ! -s d.pid ]; do sleep 0.01; done
`, tag)
}

var treePids = []string{"a.pid", "b.pid", "c.pid", "d.pid"}

func TestStatusAndOutput(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r := start(t, "echo out; echo err >&2; exit 7", time.Second)
	<-r.p.Exited()
	st, err := r.wait(t)
	if err != nil || st.Code != 7 || st.Signal != 0 || st.String() != "exit code 7" {
		t.Errorf("status %+v (%v), want exit code 7", st, err)
	}
	if got := r.out.String(); got != "out\nerr\n" {
		t.Errorf("output %q", got)
	}
	if r.p.Pid() <= 0 {
		t.Errorf("pid %d", r.p.Pid())
	}
	r = start(t, "kill -KILL $$", time.Second)
	st, err = r.wait(t)
	if err != nil || st.Code != -1 || st.Signal != syscall.SIGKILL {
		t.Errorf("status %+v (%v), want killed by SIGKILL", st, err)
	}
}

func TestStartFailure(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	_, err := Start(Command{Path: "/nonexistent/shell", Args: []string{"sh"}, Env: os.Environ()})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/shell") {
		t.Errorf("Start of a missing program: %v", err)
	}
	_, err = Start(Command{Path: "/bin/sh", Args: []string{"sh"}, Dir: "/nonexistent/dir", Env: os.Environ()})
	if err == nil {
		t.Error("Start in a missing directory succeeded")
	}
}

// TestPrepared: a guard prepared ahead of its command starts nothing
// until Run — however long the wait — and nothing ever once abandoned:
// the guard itself is gone when Abandon returns.
func TestPrepared(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	prepare := func(name string) *Pending {
		t.Helper()
		q, err := Prepare(Command{
			Path: "/bin/sh", Args: []string{"sh", "-c", "echo ran > " + name}, Dir: dir,
			Env: os.Environ(), Grace: time.Second,
		})
		if err != nil {
			t.Fatalf("Prepare: %v", err)
		}
		return q
	}
	ran := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	later := prepare("later")
	dropped := prepare("dropped")
	time.Sleep(200 * time.Millisecond) // both guards up and waiting
	if ran("later") || ran("dropped") {
		t.Fatal("a prepared command ran before Run")
	}
	guard := dropped.p.guard
	dropped.Abandon()
	if guard.ProcessState == nil {
		t.Error("the abandoned guard was not waited for")
	}
	p, err := later.Run()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st, err := p.Wait(); err != nil || st.Code != 0 {
		t.Fatalf("status %+v (%v)", st, err)
	}
	if !ran("later") || ran("dropped") {
		t.Errorf("ran: later %v, dropped %v", ran("later"), ran("dropped"))
	}
	if _, err := later.Run(); err == nil {
		t.Error("a prepared guard ran twice")
	}
}

// TestExitStopsWholeTree: when the command exits by itself, everything it
// left running — including processes that called setsid or double-forked,
// which a process-group kill misses — is gone once Wait returns.
func TestExitStopsWholeTree(t *testing.T) {
	requireSetsid(t)
	const tag = "301.1"
	defer killTagged(tag)
	r := start(t, treeScript(tag)+"exit 3", 5*time.Second)
	st, err := r.wait(t)
	if err != nil || st.Code != 3 {
		t.Fatalf("status %+v (%v)", st, err)
	}
	for _, f := range treePids {
		pid := pidFile(t, r.dir, f)
		if p, ok := readStat(pid); ok && !p.zombie {
			t.Errorf("%s (pid %d) still runs after Wait", f, pid)
		}
	}
	if left := running(tag); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

// TestTerminate: a terminated command gets SIGTERM (not an inherited
// "ignore"), and the whole tree with it, well before the grace period.
func TestTerminate(t *testing.T) {
	requireSetsid(t)
	const tag = "302.1"
	defer killTagged(tag)
	r := start(t, treeScript(tag)+"touch ready; wait", 10*time.Second)
	pidFile(t, r.dir, "d.pid")
	for {
		if _, err := os.Stat(filepath.Join(r.dir, "ready")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	begin := time.Now()
	r.p.Terminate()
	r.p.Terminate() // idempotent
	st, err := r.wait(t)
	if err != nil || st.Signal != syscall.SIGTERM {
		t.Errorf("status %+v (%v), want SIGTERM", st, err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("terminate took %s although every process dies on SIGTERM", took)
	}
	if left := running(tag); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

// TestTerminateReachesStoppedProcesses: a stopped process is continued
// after SIGTERM, so it handles the signal (here: dies of it) within the
// grace period instead of waiting for SIGKILL.
func TestTerminateReachesStoppedProcesses(t *testing.T) {
	const tag = "308.1"
	defer killTagged(tag)
	r := start(t, fmt.Sprintf(`sleep %s & echo $! > a.pid; kill -STOP $!; wait`, tag), 10*time.Second)
	pidFile(t, r.dir, "a.pid")
	begin := time.Now()
	r.p.Terminate()
	if _, err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("a stopped process needed SIGKILL: %s", took)
	}
}

// TestTerminateEscalatesToKill: processes that ignore SIGTERM are killed
// after the grace period.
func TestTerminateEscalatesToKill(t *testing.T) {
	const tag = "303.1"
	defer killTagged(tag)
	const grace = 300 * time.Millisecond
	r := start(t, fmt.Sprintf(`trap '' TERM; sleep %s & echo $! > a.pid; wait`, tag), grace)
	pidFile(t, r.dir, "a.pid")
	begin := time.Now()
	r.p.Terminate()
	st, err := r.wait(t)
	if err != nil || st.Signal != syscall.SIGKILL {
		t.Errorf("status %+v (%v), want SIGKILL", st, err)
	}
	if took := time.Since(begin); took < grace {
		t.Errorf("killed after %s, before the %s grace period", took, grace)
	}
	if left := running(tag); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

// TestGuardSurvivesStopSignals: a command that signals its guard with
// SIGTERM/SIGINT/SIGHUP/SIGQUIT and then signals its own process group
// (which holds the guard) with kill 0 does not take the guard with it:
// the status is reported, the guard confirms the tree gone (no
// ErrGuardLost), and the setsid'd process, which only the guard can
// reach, is dead.
func TestGuardSurvivesStopSignals(t *testing.T) {
	requireSetsid(t)
	const tag = "304.1"
	defer killTagged(tag)
	r := start(t, fmt.Sprintf(`for s in TERM INT HUP QUIT; do kill -$s $PPID; done
setsid sleep %s & echo $! > a.pid
sleep 0.3
kill -TERM -$$
trap '' HUP INT
kill -HUP 0
kill -INT 0
kill -TERM 0
sleep 5`, tag), 5*time.Second)
	st, err := r.wait(t)
	if err != nil || st.Signal != syscall.SIGTERM {
		t.Errorf("status %+v (%v), want the shell killed by its own SIGTERM", st, err)
	}
	pidFile(t, r.dir, "a.pid")
	if left := running(tag); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

// TestMarkerAndSocketNotInherited: the command's environment has no guard
// marker and it holds no socket (the guard's descriptor is closed on
// exec), so nothing it runs can become a guard or keep octet's socket.
func TestMarkerAndSocketNotInherited(t *testing.T) {
	r := start(t, `env; for f in /proc/$$/fd/*; do echo "fd $f $(readlink $f)"; done`, time.Second)
	if _, err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	out := r.out.String()
	if strings.Contains(out, markerEnv) {
		t.Errorf("the command inherited the marker:\n%s", out)
	}
	if strings.Contains(out, "socket:") || !strings.Contains(out, "fd /proc/") {
		t.Errorf("the command's descriptors:\n%s", out)
	}
}

// TestEnvironments: the command gets exactly the environment it was given
// (Go runtime settings included), while its guard runs with none of it —
// so GODEBUG=inittrace=1 adds nothing to the command's output — but the
// marker and its own GOMAXPROCS=1, and holds nothing of octet's (octet's
// own credentials stay out of /proc/GUARD/environ).
func TestEnvironments(t *testing.T) {
	t.Setenv("OCTET_TEST_OCTET_ONLY", "octet-only")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(Command{
		Path: "/bin/sh", Args: []string{"sh", "-c", `echo "$FOO|$GODEBUG|$GOMAXPROCS"; tr '\0' '\n' < /proc/$PPID/environ | sort`},
		Env:    []string{"PATH=" + os.Getenv("PATH"), "FOO=bar", "GODEBUG=inittrace=1", "GOMAXPROCS=7", markerEnv + "=spoofed"},
		Stdout: pw, Stderr: pw,
	})
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(pr)
	pr.Close()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	want := "bar|inittrace=1|7\n" + guardProcs + "\n" + markerEnv + "=" + markerValue + "\n"
	if string(out) != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}

// TestMarkerWithoutSocketIsIgnored: a binary started with the marker set
// by hand but no guard socket on fd 3 runs normally, with the marker
// removed.
func TestMarkerWithoutSocketIsIgnored(t *testing.T) {
	if os.Getenv("PROC_TEST_HELPER") == "plain" {
		fmt.Printf("plain run, marker %q\n", os.Getenv(markerEnv))
		return
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMarkerWithoutSocketIsIgnored$", "-test.v")
	cmd.Env = append(os.Environ(), "PROC_TEST_HELPER=plain", markerEnv+"="+markerValue, "GORACE=atexit_sleep_ms=0")
	cmd.ExtraFiles = []*os.File{f}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `plain run, marker ""`) {
		t.Errorf("helper: %v\n%s", err, out)
	}
}

// TestGuardKilledByCommand: a command that SIGKILLs its own guard (out of
// scope for the guarantee) still loses its process group: Wait — or Start,
// when the guard died before reporting the start — reports ErrGuardLost,
// and the group is killed.
func TestGuardKilledByCommand(t *testing.T) {
	for _, delay := range []string{"0", "0.2"} {
		tag := "305." + delay[len(delay)-1:]
		defer killTagged(tag)
		script := fmt.Sprintf(`sleep %s & sleep %s; kill -KILL $PPID; sleep %s`, tag, delay, tag)
		pw, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Start(Command{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Dir: t.TempDir(), Env: os.Environ(), Stdout: pw, Grace: time.Second})
		pw.Close()
		if err == nil {
			var st Status
			st, err = p.Wait()
			if st.Code != -1 {
				t.Errorf("delay %s: status %+v", delay, st)
			}
		}
		if !errors.Is(err, ErrGuardLost) {
			t.Errorf("delay %s: err %v; want ErrGuardLost", delay, err)
		}
		waitNone(t, tag, 2*time.Second)
	}
}

// TestStoppedGuardIsKilled: a guard the command stopped (SIGSTOP) cannot
// hang octet: after the grace period and a slack, Wait kills it and
// reports ErrGuardLost, and the command's group is killed.
func TestStoppedGuardIsKilled(t *testing.T) {
	t.Parallel()
	const tag = "306.1"
	defer killTagged(tag)
	// (The pause lets the guard report the start first: a guard stopped
	// before that makes Start wait for its 30 s report timeout.)
	r := start(t, fmt.Sprintf(`sleep 0.2; kill -STOP $PPID; sleep %s & echo $! > a.pid; wait`, tag), 100*time.Millisecond)
	pidFile(t, r.dir, "a.pid")
	begin := time.Now()
	r.p.Terminate()
	_, err := r.wait(t)
	if !errors.Is(err, ErrGuardLost) {
		t.Errorf("err %v, want ErrGuardLost", err)
	}
	if took := time.Since(begin); took > 100*time.Millisecond+guardSlack+5*time.Second {
		t.Errorf("Wait took %s", took)
	}
	waitNone(t, tag, 2*time.Second)
}

// waitNone fails unless no "sleep TAG" process runs within d.
func waitNone(t *testing.T, tag string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := running(tag)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running after %s: %v", d, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const envHelperDir = "PROC_TEST_PARENT_DIR"

// TestHelperParent is the octet stand-in of TestParentDeathKillsTree: it
// starts the tree under a guard, records the guard's pid and waits to be
// killed.
func TestHelperParent(t *testing.T) {
	dir := os.Getenv(envHelperDir)
	if dir == "" {
		t.Skip("helper process of TestParentDeathKillsTree")
	}
	tag := os.Getenv("PROC_TEST_TAG")
	// A forking loop too: its children are reparented to the guard and
	// killed in the next round.
	script := treeScript(tag) + fmt.Sprintf(`(while :; do setsid sleep %s & sleep 0.02; done) &
touch ready; wait`, tag)
	p, err := Start(Command{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Dir: dir, Env: os.Environ(), Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "guard.pid"), []byte(strconv.Itoa(p.guard.Process.Pid)+"\n"), 0o644)
	time.Sleep(time.Minute)
	t.Fatal("the helper was supposed to be killed")
}

// TestParentDeathKillsTree: when the process that started a guard dies by
// SIGKILL, the guard kills every process of the tree — setsid'd and
// double-forked ones and a forking loop included — within 2 s, and exits.
func TestParentDeathKillsTree(t *testing.T) {
	requireSetsid(t)
	t.Parallel()
	const tag = "307.1"
	defer killTagged(tag)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperParent$", "-test.count=1")
	cmd.Env = append(os.Environ(), envHelperDir+"="+dir, "PROC_TEST_TAG="+tag)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	guardPid := pidFile(t, dir, "guard.pid")
	for _, f := range treePids {
		pidFile(t, dir, f)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the loop fork a few
	if len(running(tag)) < 5 {
		t.Fatalf("the tree is not running: %v", running(tag))
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitNone(t, tag, 2*time.Second)
	deadline := time.Now().Add(2 * time.Second)
	for {
		if p, ok := readStat(guardPid); !ok || p.zombie {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the guard did not exit")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGuardsReaped: a guard Wait no longer waits for (it said "done") is
// reaped all the same — no guard of a finished command is left, not even
// as a zombie.
func TestGuardsReaped(t *testing.T) {
	StopSpares() // another test's spare is no guard of these commands
	for range 5 {
		if st, err := start(t, "true", time.Second).wait(t); err != nil || st.Code != 0 {
			t.Fatalf("status %+v (%v)", st, err)
		}
	}
	var left []procInfo
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if left = descendants(os.Getpid()); len(left) == 0 {
			return
		}
	}
	t.Errorf("processes left after the commands ended: %+v", left)
}
