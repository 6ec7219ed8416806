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

// TestChatFollowsTheStream: the chat window of a new chat, opened by
// :OctetNew with the input window current, follows a long streamed answer
// (cursor on the last line, the last line in view); moved up, it stays
// where it is while the next answer streams; moved back to the end, it
// follows again.
func TestChatFollowsTheStream(t *testing.T) {
	long := strings.Repeat("A line of the answer that keeps growing.\n\n", 40)
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(providertest.Text(long), providertest.Text(long), providertest.Text(long))
		r := w.run(t, "follow_test.lua")
		if r["input_current"] != true {
			t.Errorf("the input window is not the current one after :OctetNew")
		}
		pos := func(k string) (cursor, last, bottom float64) {
			m, _ := r[k].(map[string]any)
			cursor, _ = m["cursor"].(float64)
			last, _ = m["last"].(float64)
			bottom, _ = m["bottom"].(float64)
			return
		}
		if c, l, b := pos("first"); l < 60 || c != l || b != l {
			t.Errorf("new chat after a long answer: cursor %v, bottom line in view %v, last line %v; want both the last", c, b, l)
		}
		if c, l, _ := pos("second"); c != 3 || l < 120 {
			t.Errorf("chat moved up to line 3: cursor on %v of %v after the next answer", c, l)
		}
		if c, l, b := pos("third"); l < 180 || c != l || b != l {
			t.Errorf("chat back at the end: cursor %v, bottom %v, last %v", c, b, l)
		}
	})
}

// TestChatSurvivesFiletypeErrors: a markdown FileType handler that fails
// (the markdown ftplugin of a Neovim whose tree-sitter parser is missing,
// as in an unpacked Debian build) does not stop the chat: the answer is
// shown and the input window opens.
func TestChatSurvivesFiletypeErrors(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(providertest.Text("Hello anyway."))
		w.errorsExpected = true // the handler's own
		r := w.run(t, "filetype_test.lua")
		if !strings.Contains(r.str("chat"), "Hello anyway.") || r["input"] != true {
			t.Errorf("chat (input window shown %v):\n%s", r["input"], r.str("chat"))
		}
	})
}
