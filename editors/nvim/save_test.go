package nvim

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestSaveDocumentsBeforeCommand drives testdata/save_test.lua: before a
// command that reads the disk, octet has the plugin save the buffers it
// edited; one with only octet's edit is saved without a question (the
// command reads the edit), one the user edited too is asked about and,
// declined, stays unsaved, and the command's approval and result name it.
func TestSaveDocumentsBeforeCommand(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		writeFile(t, filepath.Join(w.ws, "a.txt"), "alpha\n")
		writeFile(t, filepath.Join(w.ws, "b.txt"), "beta\n")
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("e1", "edit", `{"path":"a.txt","old_text":"alpha","new_text":"ALPHA"}`)),
			providertest.Reply(providertest.FunctionCall("e2", "edit", `{"path":"b.txt","old_text":"beta","new_text":"BETA"}`)),
			providertest.Reply(providertest.FunctionCall("b1", "bash", `{"command":"cat a.txt b.txt"}`)),
			providertest.Text("Done."),
		)
		r := w.run(t, "save_test.lua")
		if got := readFile(t, filepath.Join(w.ws, "a.txt")); got != "ALPHA\n" || r["a_modified"] != false {
			t.Errorf("a.txt (octet's edit only) on disk %q, buffer modified %v; want it saved", got, r["a_modified"])
		}
		if got := readFile(t, filepath.Join(w.ws, "b.txt")); got != "beta\n" || r["b_modified"] != true {
			t.Errorf("b.txt (the user's edit too, declined) on disk %q, buffer modified %v; want it unsaved", got, r["b_modified"])
		}
		asked, _ := json.Marshal(r["asked"])
		if strings.Count(string(asked), `"prompt"`) != 1 || !strings.Contains(string(asked), "b.txt has your unsaved edits") {
			t.Errorf("questions asked: %s; want one, about b.txt", asked)
		}
		if f := r.str("bash_float"); !strings.Contains(f, "Not saved in the editor") || !strings.Contains(f, "b.txt") || strings.Contains(f, "a.txt,") {
			t.Errorf("the command's approval does not name b.txt as unsaved:\n%s", f)
		}
		in := inputText(t, w.prov, 3)
		if !strings.Contains(in, "ALPHA") || !strings.Contains(in, "Not saved in the editor") {
			t.Errorf("the command's result (want a.txt's edit read, b.txt named): %.3000s", in)
		}
	})
}
