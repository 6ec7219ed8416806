package server

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider/providertest"
)

// vimClient returns Vim 9 (the channel's "lsp" mode, which stock LSP
// plugins such as yegappan/lsp use), skipping the test without it
// (.ci/run installs Debian's vim).
func vimClient(t *testing.T) string {
	t.Helper()
	vim, err := exec.LookPath("vim")
	if err != nil {
		t.Skip("vim not installed")
	}
	if out, err := exec.Command(vim, "--version").Output(); err != nil || !strings.Contains(string(out), "+channel") {
		t.Skip("vim has no +channel")
	}
	if testing.Short() {
		t.Skip("builds the octet binary")
	}
	return vim
}

// runVim runs the Vim script testdata/vim/<script> silently (no
// terminal) against the world and decodes the JSON it wrote; octet's
// stderr goes to a file the failure message shows.
func (w *realWorld) runVim(t *testing.T, vim, script string, got any) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", "vim", script))
	if err != nil {
		t.Fatal(err)
	}
	stderr := filepath.Join(w.tmp, "octet.stderr")
	res := w.runClient(t, vim, []string{"-N", "-u", "NONE", "-i", "NONE", "-n", "-es", "-S", path}, "OCTET_TEST_STDERR="+stderr)
	if err := json.Unmarshal(res, got); err != nil {
		logs, _ := os.ReadFile(stderr)
		t.Fatalf("vim result %s: %v\noctet's stderr:\n%s", res, err, logs)
	}
}

// TestVimStockClient: Vim 9.0's channel numbers its own requests 1, 2,
// 3… and takes any incoming message whose id is one it is waiting on for
// that response. octet used to number its requests the same way, so
// its second approval (id 2) reached Vim while Vim's octet.prompt (id 2)
// was pending: Vim took the approval for the command's answer, never
// answered it, and the run hung. octet's requests have string ids, as
// the editor contract says, which never match Vim's; Vim answers them
// as yegappan/lsp does (raw, since ch_sendexpr refuses a string id).
// The command's answer carries the run's final answer as
// text, which a stock client (it shows no octet/event) otherwise never
// sees.
func TestVimStockClient(t *testing.T) {
	vim := vimClient(t)
	w := newRealWorld(t, testbin.Octet(t))
	writeFile(t, filepath.Join(w.ws, "a.txt"), "hello a\n")
	writeFile(t, filepath.Join(w.ws, "b.txt"), "hello b\n")
	w.prov.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"goodbye"}`)),
		providertest.Reply(providertest.FunctionCall("call_2", "edit", `{"path":"b.txt","old_text":"hello","new_text":"goodbye"}`)),
		providertest.Text("Both files now say goodbye."),
	)
	var got struct {
		Status string
		Answer struct {
			ID     any
			Method string
			Result struct {
				Outcome string
				Text    *string
			}
		}
		Messages []map[string]any
	}
	w.runVim(t, vim, "stock_test.vim", &got)
	if got.Status != "answered" || got.Answer.Method != "" {
		t.Fatalf("octet.prompt in Vim: %s, its callback got %+v; messages %v", got.Status, got.Answer, got.Messages)
	}
	if res := got.Answer.Result; res.Outcome != "completed" || res.Text == nil || *res.Text != "Both files now say goodbye." {
		t.Errorf("octet.prompt answered %+v, want completed with the final answer as text", got.Answer)
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if s := readFile(t, filepath.Join(w.ws, f)); !strings.HasPrefix(s, "goodbye") {
			t.Errorf("%s = %q after two approvals", f, s)
		}
	}
	asked := 0
	for _, m := range got.Messages {
		if id, ok := m["id"]; ok {
			if str, isString := id.(string); !isString || !strings.HasPrefix(str, requestIDPrefix) {
				t.Errorf("octet sent a request with id %v (%v), want a string %q…", id, m["method"], requestIDPrefix)
			}
			asked++
		}
	}
	if asked != 2 {
		t.Errorf("Vim's callback got %d requests from octet, want the 2 approvals: %v", asked, got.Messages)
	}
}
