package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/tools"
)

// pipeTTY is a terminal stand-in made of two real pipes: the test writes
// the person's answer into one and reads the prompt from the other.
type pipeTTY struct {
	r *os.File // what the approver reads (the person's keys)
	w *os.File // what the approver writes (the prompt)
}

func (p pipeTTY) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipeTTY) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeTTY) Close() error                { p.r.Close(); return p.w.Close() }

func newPipeTTY(t *testing.T, answer string) (io.ReadWriteCloser, *os.File) {
	t.Helper()
	keysR, keysW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	promptR, promptW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if answer != "" {
		keysW.WriteString(answer)
	}
	t.Cleanup(func() { keysW.Close(); promptR.Close() })
	go io.Copy(io.Discard, promptR)
	return pipeTTY{r: keysR, w: promptW}, keysW
}

func confirmReq() tools.ConfirmRequest {
	return tools.ConfirmRequest{
		Digest: strings.Repeat("ab", 32),
		Title:  "edit notes.txt\x1b[2J",
		Diff:   "--- a/notes.txt\n+++ b/notes.txt\n-beta\n+gamma\n",
	}
}

func TestTermApproverAsks(t *testing.T) {
	for answer, want := range map[string]bool{"y\n": true, "yes\n": true, "n\n": false, "\n": false, "sure\n": false} {
		tty, _ := newPipeTTY(t, answer)
		var notice bytes.Buffer
		a := &termApprover{mode: askTerminal, open: func() (io.ReadWriteCloser, error) { return tty, nil }, notice: &notice}
		got, err := a.Confirm(t.Context(), confirmReq())
		if err != nil {
			t.Fatalf("%q: %v", answer, err)
		}
		if got.Approved != want || got.Digest != confirmReq().Digest {
			t.Errorf("%q: got %+v, want approved=%v with the request digest", answer, got, want)
		}
	}
}

func TestTermApproverEOFDenies(t *testing.T) {
	tty, keys := newPipeTTY(t, "")
	keys.Close()
	a := &termApprover{mode: askTerminal, open: func() (io.ReadWriteCloser, error) { return tty, nil }, notice: io.Discard}
	got, err := a.Confirm(t.Context(), confirmReq())
	if err != nil || got.Approved {
		t.Errorf("EOF: %+v %v", got, err)
	}
}

func TestTermApproverCancel(t *testing.T) {
	tty, _ := newPipeTTY(t, "")
	a := &termApprover{mode: askTerminal, open: func() (io.ReadWriteCloser, error) { return tty, nil }, notice: io.Discard}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	got, err := a.Confirm(ctx, confirmReq())
	if err == nil || got.Approved {
		t.Errorf("cancelled prompt: %+v %v", got, err)
	}
}

func TestTermApproverNoTerminalDenies(t *testing.T) {
	var notice bytes.Buffer
	a := &termApprover{mode: askTerminal, open: func() (io.ReadWriteCloser, error) { return nil, os.ErrNotExist }, notice: &notice}
	got, err := a.Confirm(t.Context(), confirmReq())
	if err != nil || got.Approved || !strings.Contains(notice.String(), "--approve") {
		t.Errorf("%+v %v %q", got, err, notice.String())
	}
	if strings.Contains(notice.String(), "\x1b") {
		t.Error("terminal escape passed through to the terminal")
	}
}

// TestDescribeShowsWholeDiff: the terminal prompt used to cut diffs at
// 8 KiB; it now prints what the broker admitted for review, whole.
func TestDescribeShowsWholeDiff(t *testing.T) {
	diff := strings.Repeat("+line\n", 4<<10) + "+LAST\n"
	out := describe(tools.ConfirmRequest{Title: "write big.txt", Diff: diff, Digest: "abc"})
	if !strings.Contains(out, "+LAST\n") || strings.Contains(out, "truncated") || strings.Count(out, "+line") != 4<<10 {
		t.Errorf("diff not whole (%d bytes)", len(out))
	}
}
