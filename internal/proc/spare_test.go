//go:build linux

package proc

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// readySpare waits for the spare Warm started and returns its pid.
func readySpare(t *testing.T) int {
	t.Helper()
	spares.mu.Lock()
	s := spares.next
	spares.mu.Unlock()
	if s == nil {
		t.Fatal("no spare started")
	}
	select {
	case <-s.ready:
	case <-time.After(startTimeout):
		t.Fatal("the spare did not start")
	}
	if s.err != nil {
		t.Fatalf("spare: %v", s.err)
	}
	return s.g.cmd.Process.Pid
}

// killSpare kills the spare guard pid and waits for it to exit.
func killSpare(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if p, ok := readStat(pid); !ok || p.zombie {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed spare did not exit")
		}
	}
}

// TestSpareGuard: once warmed, a command runs under the spare guard
// started before it was known — in its own directory, with exactly its
// environment and its own standard descriptors, which the guard does not
// keep; the spare held none of it (its environment is the marker and
// GOMAXPROCS, its directory /). A spare that died idle is not used: the
// command gets a guard of its own.
func TestSpareGuard(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	defer StopSpares()
	Warm()
	spare := readySpare(t)
	var env []byte
	var err error
	for deadline := time.Now().Add(10 * time.Second); len(env) == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		env, err = os.ReadFile("/proc/" + strconv.Itoa(spare) + "/environ") // empty until its exec is done
	}
	if want := markerEnv + "=" + markerValue + "\x00" + guardProcs + "\x00"; err != nil || string(env) != want {
		t.Errorf("the idle spare's environment = %q, %v; want %q", env, err, want)
	}
	if wd, err := os.Readlink("/proc/" + strconv.Itoa(spare) + "/cwd"); err != nil || wd != "/" {
		t.Errorf("the idle spare's directory = %q, %v", wd, err)
	}

	dir := t.TempDir()
	run := func(script string) (string, *Process) {
		t.Helper()
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		q, err := Prepare(Command{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Dir: dir,
			Env: []string{"FOO=bar"}, Stdout: pw, Grace: time.Second})
		pw.Close() // the caller's copy: the guard gets its own
		if err != nil {
			t.Fatal(err)
		}
		p, err := q.Run()
		if err != nil {
			t.Fatal(err)
		}
		// Only the command holds the pipe: the guard closed its copy.
		pipe, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(pr.Fd())))
		fds, _ := filepath.Glob("/proc/" + strconv.Itoa(p.guard.Process.Pid) + "/fd/*")
		for _, fd := range fds {
			if l, _ := os.Readlink(fd); l == pipe {
				t.Errorf("the guard holds the command's output pipe: %s (%s)", fd, l)
			}
		}
		out, _ := io.ReadAll(pr)
		pr.Close()
		if st, err := p.Wait(); err != nil || st.Code != 0 {
			t.Fatalf("status %+v, %v", st, err)
		}
		return string(out), p
	}
	out, p := run(`echo "$FOO $(pwd)"; echo err >&2; sleep 0.2`)
	if want := "bar " + dir + "\n"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
	if p.guard.Process.Pid != spare {
		t.Errorf("the command ran under guard %d, not the spare %d", p.guard.Process.Pid, spare)
	}

	Warm()
	next := readySpare(t)
	if next == spare {
		t.Fatal("Warm kept the used spare")
	}
	// A spare that dies idle (killed by hand) is passed over.
	killSpare(t, next)
	out, p = run(`echo again > ` + filepath.Join(dir, "f") + `; cat ` + filepath.Join(dir, "f"))
	if out != "again\n" || p.guard.Process.Pid == next {
		t.Errorf("after the spare died: output %q, guard %d (the dead spare was %d)", out, p.guard.Process.Pid, next)
	}
}

// TestSpareKilledAfterPrepare: a spare that dies after Prepare took it —
// while the caller takes its checkpoint, killed by another command or by
// hand — never had the command, so Run starts the command under a guard
// of its own rather than fail the call.
func TestSpareKilledAfterPrepare(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	defer StopSpares()
	Warm()
	spare := readySpare(t)
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	q, err := Prepare(Command{Path: "/bin/sh", Args: []string{"sh", "-c", "echo ran >> " + f}, Dir: dir, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if q.p.guard.Process.Pid != spare {
		t.Fatalf("Prepare took guard %d, not the spare %d", q.p.guard.Process.Pid, spare)
	}
	killSpare(t, spare)
	p, err := q.Run()
	if err != nil {
		t.Fatalf("Run after the spare died: %v", err)
	}
	if st, err := p.Wait(); err != nil || st.Code != 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	if p.guard.Process.Pid == spare {
		t.Error("the command was sent to the dead spare")
	}
	if b, err := os.ReadFile(f); err != nil || string(b) != "ran\n" {
		t.Errorf("the command's file = %q, %v; want it run once", b, err)
	}
}
