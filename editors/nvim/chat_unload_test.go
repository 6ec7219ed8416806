package nvim

import (
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestChatSurvivesBdelete drives testdata/chat_unload_test.lua: the user
// closes the chat with :bdelete (which unloads it, emptying the buffer)
// once after an answer and once while the next answer streams. No Lua
// error, and the chat shown again has the whole conversation: its title,
// every prompt and every answer in full. The input window closed with
// :bdelete comes back working (<C-s> sends from it).
func TestChatSurvivesBdelete(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(
			providertest.Text("First answer."),
			providertest.Text("Second answer streams in many words until it is complete at last.").Pace(40*time.Millisecond),
			providertest.Text("Third answer."),
		)
		r := w.run(t, "chat_unload_test.lua")
		c := r.str("chat")
		for _, want := range []string{"# octet · first question", "first question", "First answer.", "second question",
			"Second answer streams in many words until it is complete at last.", "third question", "Third answer."} {
			if !strings.Contains(c, want) {
				t.Errorf("the chat after :bdelete lacks %q:\n%s", want, c)
			}
		}
		if r.str("input_buftype") != "nofile" {
			t.Errorf("the input buffer after :bdelete has buftype %q", r.str("input_buftype"))
		}
		if !strings.HasPrefix(c, "# octet · first question") {
			t.Errorf("the chat does not start with its title:\n%s", c)
		}
	})
}
