//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/octet-agent/octet/provider/providertest"
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

// runOnPTY runs cmd with a pseudo-terminal as its controlling terminal and
// its stdin, stdout and stderr, answers the first prompt (the terminal
// showing prompt) with answer, and returns everything the terminal showed
// ("\r\n" as "\n"), whether the prompt came, and how cmd ended.
func runOnPTY(t *testing.T, cmd *exec.Cmd, prompt, answer string) (*bytes.Buffer, bool, error) {
	t.Helper()
	master, slave := openPTY(t)
	defer master.Close()
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
		if !answered && bytes.Contains(out.Bytes(), []byte(prompt)) {
			master.WriteString(answer)
			answered = true
		}
		if err != nil { // EIO once the child closed the terminal
			break
		}
	}
	err := cmd.Wait()
	shown := bytes.NewBuffer(bytes.ReplaceAll(out.Bytes(), []byte("\r\n"), []byte("\n")))
	return shown, answered, err
}

// TestDemoAsksOnTerminal runs the real demo binary on a pseudo-terminal
// (its controlling terminal, so /dev/tty is the pty) and answers the
// approval prompt like a person.
func TestDemoAsksOnTerminal(t *testing.T) {
	for _, tc := range []struct {
		answer, want string
	}{{"y\n", `"Hello, "`}, {"n\n", `"Helo, "`}} {
		t.Run(tc.answer[:1], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, octetBin, "demo")
			cmd.Env = append(os.Environ(), "OCTET_HOME="+t.TempDir())
			out, answered, err := runOnPTY(t, cmd, approvePrompt, tc.answer)
			if err != nil {
				t.Fatalf("demo: %v\n%s", err, out.String())
			}
			if !answered {
				t.Fatalf("no approval prompt on the terminal:\n%s", out.String())
			}
			if bytes.Contains(out.Bytes(), []byte("approved automatically")) {
				t.Error("approved without asking although stdin is a terminal")
			}
			// The workspace copy is gone once the demo ends: its result
			// line shows what greet.go held then.
			m := regexp.MustCompile(`greet.go:\s+(.*)`).FindSubmatch(out.Bytes())
			if m == nil || !bytes.Contains(m[1], []byte("return "+tc.want)) {
				t.Errorf("greet.go after answering %q:\n%s", tc.answer, out.String())
			}
		})
	}
}

// TestExecApprovalPromptOwnsItsLines runs the real exec binary on a
// pseudo-terminal: the answer text streamed before a confirmed edit, the
// edit's tool line and the approval prompt appear in that order, each on
// its own line (the prompt was written by the agent's goroutine while the
// renderer still held earlier events, and glued to the answer text).
func TestExecApprovalPromptOwnsItsLines(t *testing.T) {
	for i := range 3 { // the old race showed itself on most, not all, runs
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			x := newExecEnv(t,
				providertest.Reply(providertest.Message("I will change beta now."),
					providertest.FunctionCall("c1", "edit", `{"path":"notes.txt","old_text":"beta","new_text":"gamma"}`)),
				providertest.Text("edited"),
			)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, octetBin, "exec", "--effect-policy", "controlled", "change beta")
			cmd.Dir = x.ws
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			for k, v := range x.vars {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, answered, err := runOnPTY(t, cmd, approvePrompt, "y\n")
			shown := out.String()
			if err != nil || !answered {
				t.Fatalf("exec: %v, prompt shown %v\n%s", err, answered, shown)
			}
			text := strings.Index(shown, "I will change beta now.")
			tool := strings.Index(shown, "▸ edit")
			prompt := strings.Index(shown, "── approval needed")
			if text < 0 || tool < 0 || prompt < 0 || !(text < tool && tool < prompt) {
				t.Errorf("answer text at %d, tool line at %d, prompt at %d; want them in that order:\n%s", text, tool, prompt, shown)
			}
			if prompt > 0 && shown[prompt-1] != '\n' {
				t.Errorf("the approval prompt does not start its own line:\n%s", shown)
			}
			if got, _ := os.ReadFile(filepath.Join(x.ws, "notes.txt")); string(got) != "alpha\ngamma\n" {
				t.Errorf("notes.txt = %q after approving", got)
			}
		})
	}
}
