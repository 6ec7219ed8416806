package nvim

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestApprovalFloat drives testdata/approval_test.lua: the edit approval
// float shows the diff and is visible in the chat and statusline (also
// when closed), and side by side on request; approving applies the edit to the open buffer keeping its
// unsaved line (nothing written to disk); a denial with a reason typed at
// the prompt reaches the model; an approval whose run is cancelled closes
// itself.
func TestApprovalFloat(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		writeFile(t, filepath.Join(w.ws, "a.txt"), "hello world\nthird\n")
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"goodbye"}`)),
			providertest.Text("Edited."),
			providertest.Reply(providertest.FunctionCall("call_2", "bash", `{"command":"make"}`)),
			providertest.Text("Understood."),
			providertest.Reply(providertest.FunctionCall("call_3", "bash", `{"command":"make again"}`)),
			providertest.Reply(providertest.FunctionCall("call_4", "edit", `{"path":"a.txt","old_text":"goodbye","new_text":"hi"}`)),
			providertest.Reply(providertest.FunctionCall("call_5", "edit", `{"path":"a.txt","old_text":"hi world","new_text":"hey world"}`)),
			providertest.Text("Edited twice."),
		)
		r := w.run(t, "approval_test.lua")
		if r.str("float_filetype") != "diff" || !strings.Contains(r.str("float_text"), "-hello world") ||
			!strings.Contains(r.str("float_text"), "+goodbye world") || r["float_current"] != true {
			t.Errorf("approval float (filetype %q, current %v):\n%s", r.str("float_filetype"), r["float_current"], r.str("float_text"))
		}
		if !strings.Contains(r.str("chat_pending"), "Approval pending") {
			t.Errorf("the chat does not show the pending approval:\n%s", r.str("chat_pending"))
		}
		for _, k := range []string{"statusline_pending", "statusline_closed"} {
			if !strings.Contains(r.str(k), "APPROVAL PENDING") {
				t.Errorf("%s = %q", k, r.str(k))
			}
		}
		if r["closed_float"] != true {
			t.Errorf("q did not close the float")
		}
		if sbs, _ := r["sbs"].([]any); len(sbs) != 2 || sbs[0] != "diff:hello world\ntyped here\nthird" || sbs[1] != "diff:goodbye world\ntyped here\nthird" {
			t.Errorf("side-by-side windows (before, after): %q", sbs)
		}
		if got, want := r.str("buffer"), "goodbye world\ntyped here\nthird"; got != want {
			t.Errorf("buffer after approving = %q, want %q", got, want)
		}
		if r["modified"] != true {
			t.Errorf("the buffer is not modified after the agent's edit")
		}
		if got := readFile(t, filepath.Join(w.ws, "a.txt")); got != "hello world\nthird\n" {
			t.Errorf("the edit was written behind the buffer: %q", got)
		}
		if c := r.str("chat_after"); !strings.Contains(c, "Approval: approved") || !strings.Contains(c, "+goodbye world") {
			t.Errorf("chat after approving:\n%s", c)
		}
		if strings.Contains(r.str("statusline_after"), "APPROVAL") {
			t.Errorf("statusline after approving: %q", r.str("statusline_after"))
		}
		if f := r.str("bash_float"); !strings.Contains(f, "make") || !strings.Contains(f, "Not saved in the editor") || !strings.Contains(f, "a.txt") {
			t.Errorf("bash approval float (want the command and a.txt named as not saved):\n%s", f)
		}
		if !strings.Contains(r.str("asked"), "a.txt has your unsaved edits besides octet's") {
			t.Errorf("before the bash call the user was asked %q", r.str("asked"))
		}
		if in := inputText(t, w.prov, 3); !strings.Contains(in, "The user's reason: use make instead") {
			t.Errorf("the denial reason did not reach the model: %s", in)
		}
		if c := r.str("chat_denied"); !strings.Contains(c, "### bash · make · denied") || !strings.Contains(c, "Approval: denied — use make instead") {
			t.Errorf("chat after the denial:\n%s", c)
		}
		if n, _ := r["pending_after_cancel"].(float64); n != 0 {
			t.Errorf("%v approvals pending after the run was cancelled", n)
		}
		if c := r.str("chat_cancelled"); !strings.Contains(c, "Cancelled.") || !strings.Contains(c, "withdrawn") {
			t.Errorf("chat after cancelling:\n%s", c)
		}
		if !strings.Contains(r.str("session_keys"), "[s] approve for session") {
			t.Errorf("the edit's float offers no approve for session:\n%s", r.str("session_keys"))
		}
		rule := r.str("chat_session_rule")
		if strings.Count(rule, "> Approval:") != 1 || !strings.Contains(rule, "> Approval: approved for this session") || !strings.Contains(rule, "Edited twice.") ||
			!strings.Contains(rule, "    Edited a.txt (1 replacement).") || strings.Contains(rule, "· error") {
			t.Errorf("chat of the approve-for-session run (one approval wanted):\n%s", rule)
		}
		if got := r.str("buffer_after_rule"); got != "hey world\ntyped here\nthird" {
			t.Errorf("buffer after the two edits = %q", got)
		}
	})
}

// TestApprovalWhileTyping drives testdata/approval_insert_test.lua with
// keys as typed (nvim_input): an approval float that appears while the
// user is in insert mode in the input window is in normal mode (its text
// is not typed into); a key typed as it appears decides nothing; after a
// pause "a" approves; the user is back in the input window in insert
// mode.
func TestApprovalWhileTyping(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		writeFile(t, filepath.Join(w.ws, "a.txt"), "hello world\n")
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"goodbye"}`)),
			providertest.Text("Edited."),
		)
		r := w.run(t, "approval_insert_test.lua")
		if r.str("mode_in_float") != "n" {
			t.Errorf("mode in the approval float = %q, want normal mode", r.str("mode_in_float"))
		}
		if n, _ := r["pending_after_early_key"].(float64); n != 1 || r["float_unchanged"] != true {
			t.Errorf("a key typed as the float appeared: %v pending (want 1), float unchanged %v", n, r["float_unchanged"])
		}
		if r["armed"] != true || r["answered"] != true {
			t.Errorf("after a pause: keys armed %v, run answered %v", r["armed"], r["answered"])
		}
		if n, _ := r["pending_after"].(float64); n != 0 || r.str("buffer") != "goodbye world" {
			t.Errorf("after \"a\": %v approvals pending, buffer %q", n, r.str("buffer"))
		}
		if r.str("input_text") != "" {
			t.Errorf("the input window has %q", r.str("input_text"))
		}
		if r["back_in_input"] != true || r.str("mode_after") != "i" {
			t.Errorf("after deciding: back in the input window %v, mode %q; want the input window in insert mode", r["back_in_input"], r.str("mode_after"))
		}
	})
}
