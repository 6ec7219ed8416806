package nvim

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestServerRestart: when octet lsp dies the user is told what happened
// and what to do; the next :Octet starts it again in the same session,
// and the open buffer is synced to the new server (the model reads a line
// typed after the restart).
func TestServerRestart(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		writeFile(t, filepath.Join(w.ws, "a.txt"), "on disk\n")
		w.prov.Enqueue(
			providertest.Text("Hi."),
			providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"a.txt"}`)).Pace(300e6),
			providertest.Text("Read it."),
		)
		r := w.run(t, "restart_test.lua")
		if n := r.str("notes"); !strings.Contains(n, "octet lsp exited") || !strings.Contains(n, ":Octet starts it again") {
			t.Errorf("notifications after the server died: %q", n)
		}
		if r["same_session"] != true {
			t.Errorf("the prompt after the restart went to another session")
		}
		in := inputText(t, w.prov, 2)
		if !strings.Contains(in, "hello") || !strings.Contains(in, "typed after the restart") {
			t.Errorf("after the restart the model read: %s", in)
		}
	})
}
