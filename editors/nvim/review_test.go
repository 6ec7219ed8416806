package nvim

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestReviewDiffAndRewind drives testdata/review_test.lua: :OctetDiff
// shows the run's two changes, reverting one file restores only it (the
// other is kept), and :OctetRewind takes the files and the conversation
// back to before the prompt.
func TestReviewDiffAndRewind(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		a, b := filepath.Join(w.ws, "a.txt"), filepath.Join(w.ws, "b.txt")
		writeFile(t, a, "alpha\n")
		writeFile(t, b, "beta\n")
		w.prov.Enqueue(
			providertest.Text("Hi."),
			providertest.Reply(
				providertest.FunctionCall("e1", "edit", `{"path":"a.txt","old_text":"alpha","new_text":"ALPHA"}`),
				providertest.FunctionCall("e2", "edit", `{"path":"b.txt","old_text":"beta","new_text":"BETA"}`),
			),
			providertest.Text("Changed both."),
		)
		r := w.run(t, "review_test.lua")
		if r.str("policy") != "unsafe_host" {
			t.Errorf("mode full gave policy %q", r.str("policy"))
		}
		d := r.str("diff")
		if !strings.Contains(d, "=== a.txt (modify)") || !strings.Contains(d, "+ALPHA") || !strings.Contains(d, "=== b.txt (modify)") {
			t.Errorf("diff buffer:\n%s", d)
		}
		if da := r.str("diff_after"); !strings.Contains(da, "=== b.txt (modify)  [reverted]") || !strings.Contains(da, "=== a.txt (modify)  [kept]") {
			t.Errorf("diff buffer after revert and keep:\n%s", da)
		}
		if got := readFile(t, a); got != "alpha\n" {
			t.Errorf("a.txt after the rewind = %q", got)
		}
		if got := readFile(t, b); got != "beta\n" {
			t.Errorf("b.txt = %q", got)
		}
		if re := r.str("rerendered"); !strings.Contains(re, "**Changed a.txt** (modify)") || !strings.Contains(re, "+BETA") || !strings.Contains(re, "### edit · b.txt · done") {
			t.Errorf("chat rendered from the transcript:\n%s", re)
		}
		c := r.str("chat_after_rewind")
		if !strings.Contains(c, "Rewound files and conversation") || strings.Contains(c, "## You\n\nchange both") || !strings.Contains(c, "Hi.") {
			t.Errorf("chat after the rewind:\n%s", c)
		}
		if r.str("head_type") != "assistant" {
			t.Errorf("head after the rewind is a %q entry, want the first answer", r.str("head_type"))
		}
	})
}
