package nvim

import (
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestPlanChecklist: update_plan's plan events become one checklist
// block in the chat, updated in place, without a tool block; a restarted
// Neovim resuming the session shows the plan again.
func TestPlanChecklist(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("p1", "update_plan", `{"explanation":"parser first","plan":[{"step":"Read the parser","status":"in_progress"},{"step":"Fix the bug","status":"pending"}]}`)),
			providertest.Reply(providertest.FunctionCall("p2", "update_plan", `{"plan":[{"step":"Read the parser","status":"completed"},{"step":"Fix the bug","status":"in_progress"}]}`)),
			providertest.Text("Fixed."),
		)
		r := w.run(t, "plan_test.lua")
		if f := r.str("first"); !strings.Contains(f, "**Plan** — parser first\n- [>] Read the parser\n- [ ] Fix the bug") {
			t.Errorf("first plan:\n%s", f)
		}
		want := "**Plan**\n- [x] Read the parser\n- [>] Fix the bug"
		c := r.str("chat")
		if strings.Count(c, "**Plan**") != 1 || !strings.Contains(c, want) || strings.Contains(c, "update_plan") || !strings.Contains(c, "Fixed.") {
			t.Errorf("chat after the run (want one plan block updated in place, no update_plan block):\n%s", c)
		}
		r = w.run(t, "plan_test.lua", "OCTET_TEST_PHASE=resume")
		if c := r.str("chat"); strings.Count(c, "**Plan**") != 1 || !strings.Contains(c, want) || strings.Contains(c, "update_plan") {
			t.Errorf("resumed chat:\n%s", c)
		}
	})
}
