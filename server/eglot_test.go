package server

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/internal/testbin"
)

// eglotClient returns Emacs when eglot loads in it, skipping the test
// otherwise (.ci/run installs Debian's emacs-nox and elpa-eglot).
func eglotClient(t *testing.T) string {
	t.Helper()
	emacs, err := exec.LookPath("emacs")
	if err != nil {
		t.Skip("emacs not installed")
	}
	if testing.Short() {
		t.Skip("builds the octet binary")
	}
	if out, err := exec.Command(emacs, "--batch", "--eval", "(require 'eglot)").CombinedOutput(); err != nil {
		t.Skipf("eglot does not load: %v %s", err, out)
	}
	return emacs
}

// TestEglotStockClient: eglot asks its own "Proceed?" before it applies
// a workspace/applyEdit, so an edit octet's approval admitted was put to
// the person a second time, while octet waited for a machine's answer
// (10 s) and failed the edit after it, whatever the person then chose.
// octet sends workspace/applyEdit only to clients that take its
// approvals themselves (experimental.octet.confirmEffect); a stock
// client's open, saved document is changed on disk, after the one
// approval.
func TestEglotStockClient(t *testing.T) {
	emacs := eglotClient(t)
	w := newRealWorld(t, testbin.Octet(t))
	writeFile(t, filepath.Join(w.ws, "a.txt"), "hello world\n")
	editScript(&stack{&hosttest.Stack{Provider: w.prov}})
	script, err := filepath.Abs(filepath.Join("testdata", "eglot", "stock_test.el"))
	if err != nil {
		t.Fatal(err)
	}
	raw := w.runClient(t, emacs, []string{"--batch", "-l", script})
	var got struct {
		Status    string
		Answer    struct{ Outcome, Text string }
		Questions []string
		Buffer    string
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	if got.Status != "answered" || got.Answer.Outcome != "completed" || got.Answer.Text != "Edited." {
		t.Fatalf("octet.prompt in eglot: %s %+v", got.Status, got.Answer)
	}
	if len(got.Questions) != 1 || !strings.Contains(got.Questions[0], "wants to run edit") {
		t.Errorf("the person was asked %d questions, want only octet's approval: %q", len(got.Questions), got.Questions)
	}
	if s := readFile(t, filepath.Join(w.ws, "a.txt")); s != "goodbye world\n" {
		t.Errorf("a.txt = %q after the approved edit", s)
	}
}
