package nvim

import (
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestChatStreamsAndContinues: `:Octet first prompt` streams the answer
// into the session's chat buffer in place (several buffer updates, one
// "## octet" section), the reasoning is in a closed fold, and a second
// `:Octet` continues the same session (the model sees the first
// exchange); text typed in the input window is sent with <C-s>.
func TestChatStreamsAndContinues(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(
			providertest.Reply(providertest.Reasoning("enc", "weighing the two options"), providertest.Message("Hello from octet, streamed word by word.")),
			providertest.Text("Second answer."),
			providertest.Text("Third answer."),
		)
		r := w.run(t, "chat_test.lua")
		chat1 := r.str("chat1")
		if !strings.Contains(chat1, "## You\n\nfirst prompt") || !strings.Contains(chat1, "## octet") ||
			!strings.Contains(chat1, "Hello from octet, streamed word by word.") {
			t.Errorf("chat after the first prompt:\n%s", chat1)
		}
		if !strings.Contains(chat1, "> weighing the two options") {
			t.Errorf("reasoning not in the chat:\n%s", chat1)
		}
		if n, _ := r["updates"].(float64); n < 4 {
			t.Errorf("the chat buffer was updated %v times during the run; want it streamed", n)
		}
		if r["reasoning_folded"] != true {
			t.Errorf("reasoning not folded: %v", r)
		}
		if r.str("first_sid") == "" || r.str("first_sid") != r.str("second_sid") {
			t.Errorf("second prompt in session %q, first in %q", r.str("second_sid"), r.str("first_sid"))
		}
		if !strings.Contains(r.str("chat2"), "second prompt") || !strings.Contains(r.str("chat2"), "Second answer.") {
			t.Errorf("chat after the second prompt:\n%s", r.str("chat2"))
		}
		if in := inputText(t, w.prov, 1); !strings.Contains(in, "first prompt") || !strings.Contains(in, "second prompt") {
			t.Errorf("the second request does not continue the session: %s", in)
		}
		if r["input_shown"] != true || r.str("input_after_send") != "" ||
			!strings.Contains(r.str("chat3"), "## You\n\nthird prompt\non two lines") || !strings.Contains(r.str("chat3"), "Third answer.") {
			t.Errorf("input window (shown %v, left %q) sent:\n%s", r["input_shown"], r.str("input_after_send"), r.str("chat3"))
		}
		if st := r.str("statusline"); !strings.Contains(st, "octet ask") {
			t.Errorf("statusline %q does not show the ask mode", st)
		}
	})
}
