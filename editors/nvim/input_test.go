package nvim

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestInputAndRunControl drives testdata/input_test.lua: recovered output
// in its own section and not in the answer, a failed run's error with
// what to do, steering and a follow-up reaching the model at their
// boundaries, the selection and #buffer attachments, :OctetFinishNow
// making the rest of the run tool-free, and the full-access
// switch visible in the statusline and applied on the server.
func TestInputAndRunControl(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		writeFile(t, filepath.Join(w.ws, "a.txt"), "first line\nsecond line\nthird line\n")
		w.prov.Enqueue(
			providertest.Text("partial words that never finish because the stream drops").DropAfter(7),
			providertest.Text("Recovered answer."),
			providertest.Status(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided"),
			providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"a.txt"}`)).Pace(100e6),
			providertest.Text("After steering."),
			providertest.Text("After the follow-up."),
			providertest.Text("It is a file."),
			providertest.Text("Compared."),
			providertest.Reply(providertest.FunctionCall("r2", "read", `{"path":"a.txt"}`)).Pace(100e6),
			providertest.Text("Finished."),
		)
		r := w.run(t, "input_test.lua")
		chat := r.str("recovered_chat")
		inSection := false
		for _, l := range strings.Split(chat, "\n") {
			if strings.Contains(l, "partial") && !strings.HasPrefix(l, "> ") {
				t.Errorf("recovered text outside its quoted section: %q", l)
			}
			inSection = inSection || strings.HasPrefix(l, "> partial")
		}
		if !inSection || !strings.Contains(chat, "> **Recovered output** (text of interrupted attempt") || !strings.Contains(chat, "\nRecovered answer.") {
			t.Errorf("recovered output not in its own section:\n%s", chat)
		}
		if c := r.str("failed_chat"); !strings.Contains(c, "> **Error:**") || !strings.Contains(c, "API key") || !strings.Contains(c, "> What to do:") {
			t.Errorf("failed run:\n%s", c)
		}
		reqs := w.prov.Requests()
		var steered, followed int = -1, -1
		for i := range reqs {
			in := requestInput(reqs[i])
			if steered < 0 && strings.Contains(in, "steer text") {
				steered = i
			}
			if followed < 0 && strings.Contains(in, "follow text") {
				followed = i
			}
		}
		if steered < 0 || followed <= steered {
			t.Errorf("steering first in request %d, follow-up in %d; want the follow-up after the steering", steered, followed)
		}
		if c := r.str("steered_chat"); !strings.Contains(c, "## You (steering)\n\nsteer text") || !strings.Contains(c, "follow text") ||
			!strings.Contains(c, "After the follow-up.") {
			t.Errorf("steered chat:\n%s", c)
		}
		// The last request is the finish-now run's second: tool-free, with
		// the text as steering.
		fin := reqs[len(reqs)-1]
		if fin.Body["tool_choice"] != "none" || fin.Body["tools"] != nil || !strings.Contains(requestInput(fin), "wrap up") {
			t.Errorf("after :OctetFinishNow the request has tool_choice %v, tools %v, input %s", fin.Body["tool_choice"], fin.Body["tools"] != nil, requestInput(fin))
		}
		if !strings.Contains(r.str("finished_chat"), "Finished.") {
			t.Errorf("finish-now chat:\n%s", r.str("finished_chat"))
		}
		reqs = reqs[:len(reqs)-2]
		ask := requestInput(reqs[len(reqs)-2])
		if !strings.Contains(ask, "what is this") || !strings.Contains(ask, "attachment 1: a.txt lines 1-2") || !strings.Contains(ask, "second line\\n--- end of attachment 1") {
			t.Errorf("the selection was not attached: %s", ask)
		}
		buf := requestInput(reqs[len(reqs)-1])
		if !strings.Contains(buf, "compare #buffer") || !strings.Contains(buf, "attachment 1: a.txt") || !strings.Contains(buf, "third line") {
			t.Errorf("#buffer was not attached: %s", buf)
		}
		if !strings.Contains(r.str("statusline_full"), "FULL ACCESS") || r.str("server_policy") != "unsafe_host" {
			t.Errorf("full access: statusline %q, server policy %q", r.str("statusline_full"), r.str("server_policy"))
		}
		if !strings.Contains(r.str("statusline_full"), "FULL ACCESS · no sandbox") {
			t.Errorf("full access statusline does not show the sandbox: %q", r.str("statusline_full"))
		}
		if !strings.Contains(r.str("statusline_ask"), "octet ask · workspace-write sandbox") && !strings.Contains(r.str("statusline_ask"), "octet ask · no OS sandbox") {
			t.Errorf("statusline after :OctetPolicy ask does not show the sandbox next to the mode: %q", r.str("statusline_ask"))
		}
		if !strings.Contains(r.str("statusline_ask"), "octet ask") {
			t.Errorf("statusline after :OctetPolicy ask: %q", r.str("statusline_ask"))
		}
	})
}
