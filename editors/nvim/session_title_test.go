package nvim

import (
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestResumedChatKeepsRenamedTitle: a session renamed with
// :OctetSessions is resumed by a restarted Neovim; its chat is titled
// with the name the server has for it, not with its first prompt.
func TestResumedChatKeepsRenamedTitle(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(providertest.Text("Done."))
		first := w.run(t, "title_first_test.lua")
		if first.str("title") != "# octet · Renamed Title" {
			t.Fatalf("chat title after the rename = %q", first.str("title"))
		}
		r := w.run(t, "title_second_test.lua")
		if got := r.str("title"); got != "# octet · Renamed Title" {
			t.Errorf("resumed chat title = %q, want the session's name", got)
		}
	})
}
