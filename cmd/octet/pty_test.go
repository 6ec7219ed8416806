package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns a pseudo-terminal pair (Linux /dev/ptmx).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open pts: %v", err)
	}
	return m, s
}

// TestDemoAsksOnTerminal runs the real demo binary on a pseudo-terminal
// (its controlling terminal, so /dev/tty is the pty) and answers the
// approval prompt like a person.
func TestDemoAsksOnTerminal(t *testing.T) {
	for _, tc := range []struct {
		answer, want string
	}{{"y\n", `"Hello, "`}, {"n\n", `"Helo, "`}} {
		t.Run(tc.answer[:1], func(t *testing.T) {
			master, slave := openPTY(t)
			defer master.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, octetBin, "demo")
			cmd.Env = append(os.Environ(), "OCTET_HOME="+t.TempDir())
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			var out bytes.Buffer
			buf := make([]byte, 4096)
			answered := false
			for {
				n, err := master.Read(buf)
				out.Write(buf[:n])
				if !answered && bytes.Contains(out.Bytes(), []byte("Approve? [y/N]")) {
					master.WriteString(tc.answer)
					answered = true
				}
				if err != nil { // EIO once the child closed the terminal
					break
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("demo: %v\n%s", err, out.String())
			}
			if !answered {
				t.Fatalf("no approval prompt on the terminal:\n%s", out.String())
			}
			if bytes.Contains(out.Bytes(), []byte("approved automatically")) {
				t.Error("approved without asking although stdin is a terminal")
			}
			m := regexp.MustCompile(`workspace: (\S+)`).FindSubmatch(out.Bytes())
			if m == nil {
				t.Fatalf("no workspace in output:\n%s", out.String())
			}
			t.Cleanup(func() { os.RemoveAll(string(m[1])) })
			got, _ := os.ReadFile(filepath.Join(string(m[1]), "greet.go"))
			if !bytes.Contains(got, []byte("return "+tc.want)) {
				t.Errorf("greet.go after answering %q:\n%s", tc.answer, got)
			}
		})
	}
}
