//go:build unix

package proc

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWaitReturnsAtDone: once its guard has reported the command's status
// and the tree gone ("done"), Wait returns — it does not wait for the
// guard's own exit, which a Go program's takes a tenth of a short call —
// and the guard is reaped later. The guard here is a stand-in at the
// process boundary: a process that says "done" over the socket and goes
// on living.
func TestWaitReturnsAtDone(t *testing.T) {
	fds, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	defer theirs.Close()
	guard := exec.Command("sleep", "30")
	if err := guard.Start(); err != nil {
		t.Skip("no sleep:", err)
	}
	p := &Process{guard: guard, conn: ours, grace: time.Second,
		exited: make(chan struct{}), done: make(chan struct{}), terminating: make(chan struct{})}
	p.helpers.Add(2)
	go p.read(bufio.NewReaderSize(ours, maxLine))
	go p.watchdog()
	if _, err := theirs.Write([]byte("exited 3 0\ndone\n")); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		st, err := p.Wait()
		if err == nil && st.Code != 3 {
			t.Errorf("status %+v, want code 3", st)
		}
		waited <- err
	}()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("Wait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return once the guard said done")
	}
	if err := guard.Process.Signal(unix.Signal(0)); err != nil {
		t.Errorf("the stand-in guard ended before Wait returned: %v", err)
	}
	guard.Process.Kill() // the background reap collects it
}
