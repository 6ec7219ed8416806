package nvim

import (
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestResumedSessionShowsItsModel: a session whose model was chosen with
// :OctetModel is resumed by a restarted Neovim; the statusline names the
// model the session uses (octet/session/resume's model), not the
// configured default, and the next prompt goes to that model.
func TestResumedSessionShowsItsModel(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(providertest.Text("First."), providertest.Text("Second."))
		first := w.run(t, "model_resume_first_test.lua")
		if !strings.Contains(first.str("statusline"), "gpt-4.1") {
			t.Fatalf("statusline after :OctetModel: %q", first.str("statusline"))
		}
		r := w.run(t, "model_resume_second_test.lua")
		if r.str("resumed") != first.str("sid") {
			t.Fatalf("the restart resumed %q, want %q", r.str("resumed"), first.str("sid"))
		}
		reqs := w.prov.Requests()
		if len(reqs) < 2 || reqs[1].Body["model"] != "gpt-4.1" {
			t.Fatalf("the prompt after the restart did not go to gpt-4.1")
		}
		for _, k := range []string{"statusline_resumed", "statusline_after"} {
			if s := r.str(k); !strings.Contains(s, "gpt-4.1") || strings.Contains(s, "gpt-5.1") {
				t.Errorf("%s = %q, want the session's model gpt-4.1", k, s)
			}
		}
	})
}
