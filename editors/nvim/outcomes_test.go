package nvim

import (
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestResumedChatMarksOutcomes: a denied call, a failed run and a
// cancelled run are marked in a restarted Neovim's resumed chat as the live
// chat marked them (the denial as denied, not as an error; "Cancelled.";
// the error with what to do).
func TestResumedChatMarksOutcomes(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("b1", "bash", `{"command":"make"}`)),
			providertest.Text("Not running it."),
			providertest.Status(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided"),
			providertest.Stall(),
		)
		live := w.run(t, "outcomes_test.lua").str("chat")
		r := w.run(t, "outcomes_test.lua", "OCTET_TEST_CASE=resumed")
		chat := r.str("chat")
		for _, want := range []string{"### bash · make · denied", "\n> Cancelled.", "> **Error:** ", "API key"} {
			if !strings.Contains(live, want) {
				t.Errorf("the live chat lacks %q:\n%s", want, live)
			}
			if !strings.Contains(chat, want) {
				t.Errorf("the resumed chat lacks %q:\n%s", want, chat)
			}
		}
		if strings.Contains(chat, "· error") {
			t.Errorf("the resumed chat shows the denial as an error:\n%s", chat)
		}
	})
}
