package nvim

import (
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestSessionsResumeAndPicker: a restarted Neovim's first :Octet resumes
// the workspace's last session (transcript rendered, the model sees its
// history); :OctetSessions (through vim.ui.select) resumes an older
// session, renames, forks and deletes; :OctetModel sets the model.
func TestSessionsResumeAndPicker(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(providertest.Text("Alpha done."), providertest.Text("Beta done."),
			providertest.Text("Continued beta."), providertest.Text("Back in alpha."))
		first := w.run(t, "sessions_first_test.lua")
		alpha, beta := first.str("alpha"), first.str("beta")
		if alpha == "" || beta == "" || alpha == beta {
			t.Fatalf("sessions alpha %q beta %q", alpha, beta)
		}
		r := w.run(t, "sessions_second_test.lua")
		if r.str("resumed") != beta {
			t.Errorf("restart resumed %q, want the last session %q", r.str("resumed"), beta)
		}
		if c := r.str("resumed_chat"); !strings.Contains(c, "beta task") || !strings.Contains(c, "Beta done.") || !strings.Contains(c, "Continued beta.") {
			t.Errorf("resumed chat:\n%s", c)
		}
		if in := inputText(t, w.prov, 2); !strings.Contains(in, "beta task") || !strings.Contains(in, "continue please") {
			t.Errorf("the prompt after the restart did not continue beta: %s", in)
		}
		if r.str("picked") != alpha {
			t.Errorf("picker resumed %q, want %q", r.str("picked"), alpha)
		}
		if c := r.str("picked_chat"); !strings.Contains(c, "alpha task") || !strings.Contains(c, "Alpha done.") || r["chat_shown"] != true {
			t.Errorf("picked chat (shown %v):\n%s", r["chat_shown"], c)
		}
		in := inputText(t, w.prov, 3)
		if !strings.Contains(in, "alpha task") || !strings.Contains(in, "back to alpha") || strings.Contains(in, "beta task") {
			t.Errorf("the prompt after picking alpha: %s", in)
		}
		fork := r.str("fork")
		if fork == "" || fork == alpha || !strings.Contains(r.str("fork_chat"), "back to alpha") {
			t.Errorf("fork %q of %q:\n%s", fork, alpha, r.str("fork_chat"))
		}
		listed := r.str("listed")
		if strings.Contains(listed, fork) || !strings.Contains(listed, alpha+"=alpha renamed") || !strings.Contains(listed, beta) {
			t.Errorf("sessions after rename and delete: %s", listed)
		}
		if !strings.Contains(r.str("statusline_model"), "gpt-4.1") {
			t.Errorf("statusline after :OctetModel: %q", r.str("statusline_model"))
		}
	})
}
