package nvim

import (
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestInputKeepsUnsentPrompt drives testdata/unsent_test.lua: a prompt
// typed in the input window that octet.nvim refuses to send (an
// #image: attachment that cannot be read; an image given while a run is
// going, which steering cannot carry) stays in the input window, so the
// user can fix it and send it again instead of typing it anew.
func TestInputKeepsUnsentPrompt(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("r1", "bash", `{"command":"make"}`)),
			providertest.Text("Done."),
		)
		r := w.run(t, "unsent_test.lua")
		want := "what is in #image:missing.png\nand why"
		if got := r.str("input_bad_image"); got != want {
			t.Errorf("input after an unreadable image was refused = %q, want %q (notes %v)", got, want, r["notes"])
		}
		if !strings.Contains(r.str("notes"), "the prompt was not sent") {
			t.Errorf("no message says the prompt was not sent: %v", r["notes"])
		}
		if got, want := r.str("input_steer_image"), "look at #image:shot.png"; got != want {
			t.Errorf("input after an image was refused while a run is going = %q, want %q", got, want)
		}
	})
}
