package nvim

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestRetriesInChat: a provider that fails twice before answering shows
// "retrying 1/N in 1 s: <cause>" in the chat as it happens (the words of
// the VS Code extension too), the second retry replacing the first in
// place (one line, not one per attempt), "retried 2 times: <cause>" once
// the answer goes on;
// with a provider address that drops every connection the chat says it
// is retrying and how to cancel, the statusline says the same words, and
// <C-c> in the chat cancels the run at once.
func TestRetriesInChat(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(
			providertest.Status(503, "server_error", "overloaded", "The server is overloaded"),
			providertest.Status(503, "server_error", "overloaded", "The server is overloaded"),
			providertest.Text("Answered after all."),
		)
		r := w.run(t, "retry_test.lua", "OCTET_TEST_CASE=flaky")
		cause := "cannot connect to the provider: connection refused"
		words, _ := json.Marshal(r["words"])
		if want, _ := json.Marshal([]string{
			"retrying 3/29 in 4 s: " + cause + " (gives up in 6 min)", "retrying 4 in 1 min: " + cause, "retried 4 times: " + cause,
			"retrying compaction 1/5 in 1 s: HTTP 503", "retried compaction 1 time: HTTP 503",
		}); string(words) != string(want) {
			t.Errorf("retry words:\n%s\nwant\n%s", words, want)
		}
		seen, _ := r["seen"].([]any)
		var first string
		for _, s := range seen {
			if s, _ := s.(string); strings.Contains(s, "retrying 1/") {
				first = s
				break
			}
		}
		if first == "" || !strings.Contains(first, "retrying 1/29 in 1 s: ") || !strings.Contains(first, "503") {
			t.Errorf("the chat never showed the first retry with its cause: %q", seen)
		}
		if !strings.Contains(first, "<C-c> or :OctetCancel cancels") {
			t.Errorf("the retry line does not say how to cancel:\n%s", first)
		}
		chat := r.str("chat")
		if strings.Count(chat, "retr") != 1 || !strings.Contains(chat, "> retried 2 times: the provider answered HTTP 503") || !strings.Contains(chat, "Answered after all.") {
			t.Errorf("chat after two retries (one line, updated in place, wanted):\n%s", chat)
		}

		// An outage: the provider's address takes connections and drops
		// them at once (nothing listening at all is told at once, without
		// retrying, for a loopback address).
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		dead := "http://" + l.Addr().String() + "/v1"
		r = w.run(t, "retry_test.lua", "OCTET_TEST_CASE=outage", "OPENAI_BASE_URL="+dead)
		if c := r.str("retry_chat"); !strings.Contains(c, "> retrying 1/") || !strings.Contains(c, "<C-c> or :OctetCancel cancels") {
			t.Errorf("chat during the outage:\n%s", c)
		}
		if st := r.str("statusline"); !strings.Contains(st, " · retrying ") || !strings.Contains(st, "/29 in ") {
			t.Errorf("statusline during the outage: %q", st)
		}
		if c := r.str("chat"); !strings.Contains(c, "Cancelled.") {
			t.Errorf("chat after <C-c>:\n%s", c)
		}
		if ms, _ := r["cancel_ms"].(float64); ms > 5000 {
			t.Errorf("the run took %v ms to end after <C-c>", ms)
		}
	})
}
