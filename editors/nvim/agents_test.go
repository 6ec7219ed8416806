package nvim

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestAgentsShowChildBlock: under unsafe_host the root spawns a child
// (agents_spawn) that reads notes.txt and answers while the root waits
// (agents_wait); the parent's chat shows one block for the child, updated
// in place: its path, status and task, an activity line naming its read
// while it works, and at the end "[completed]" (highlighted as done), the
// child's answer and its usage. gX on the block finds the child. After a
// restart the resumed session's chat has the child's block again.
func TestAgentsShowChildBlock(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		writeFile(t, filepath.Join(w.ws, "notes.txt"), "alpha\nbeta\n")
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("s1", "agents_spawn", `{"task":"CHILD-ONE read notes.txt\nand say what it holds"}`)).ForRequestContaining("ROOT-PROMPT"),
			providertest.Reply(providertest.FunctionCall("w1", "agents_wait", `{"timeout_seconds":60}`)).ForRequestContaining("ROOT-PROMPT"),
			providertest.Text("The child says alpha beta.").ForRequestContaining("ROOT-PROMPT"),
			providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"notes.txt"}`)).ForRequestContaining("CHILD-ONE"),
			providertest.Text("notes.txt holds alpha and beta.").ForRequestContaining("CHILD-ONE"),
		)
		r := w.run(t, "agents_test.lua", "OCTET_TEST_CASE=show")
		chat := r.str("chat")
		t.Logf("chat:\n%s\nchild lines seen: %q", chat, r["seen"])
		if strings.Count(chat, "▸ root/worker1 ") != 1 {
			t.Errorf("want one block for root/worker1:\n%s", chat)
		}
		for _, want := range []string{
			"▸ root/worker1 [completed] CHILD-ONE read notes.txt …",
			"    answer: notes.txt holds alpha and beta.",
			"    usage: ",
			"The child says alpha beta.",
		} {
			if !strings.Contains(chat, want) {
				t.Errorf("chat lacks %q:\n%s", want, chat)
			}
		}
		var seen []string
		for _, l := range r["seen"].([]any) {
			seen = append(seen, l.(string))
		}
		if !slices.Contains(seen, "    ↳ read notes.txt") && !slices.Contains(seen, "    ↳ read notes.txt · done") {
			t.Errorf("no activity line for the child's read; child lines seen: %q", seen)
		}
		if !slices.ContainsFunc(seen, func(l string) bool { return strings.HasPrefix(l, "▸ root/worker1 [running]") }) {
			t.Errorf("the block never showed running: %q", seen)
		}
		if g, _ := r["status_groups"].([]any); !slices.Contains(g, any("OctetAgentCompleted")) {
			t.Errorf("status highlight groups on the header: %v", g)
		}
		if n, _ := r["gx_notes"].([]any); len(n) != 2 || !strings.Contains(n[0].(string), "root/worker1 is completed") ||
			!strings.Contains(n[1].(string), "no subagent block under the cursor") {
			t.Errorf("gX on the block, then on the title: %q", n)
		}
		if c := r.str("resumed_chat"); !strings.Contains(c, "▸ root/worker1 [completed] CHILD-ONE read notes.txt …") {
			t.Errorf("the resumed session's chat has no block for its child:\n%s", c)
		}
		if l := r.str("linked"); l != "DiagnosticOk" && l != "DiagnosticHint" {
			t.Errorf("OctetAgentCompleted resolves to %q", l)
		}
	})
}

// TestAgentsStopChild: the child's model call stalls; :OctetAgents lists
// the child with its status, and choosing it and "stop" sends
// octet/cancel with the child's run (not the root's); the child's block
// shows cancelled and the root's run completes. While the child runs the
// statusline says "1 subagent running".
func TestAgentsStopChild(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("s1", "agents_spawn", `{"task":"CHILD-ONE stall"}`)).ForRequestContaining("ROOT-PROMPT"),
			providertest.Reply(providertest.FunctionCall("w1", "agents_wait", `{"timeout_seconds":60}`)).ForRequestContaining("ROOT-PROMPT"),
			providertest.Text("The child was stopped.").ForRequestContaining("ROOT-PROMPT"),
			providertest.Stall().ForRequestContaining("CHILD-ONE"),
		)
		r := w.run(t, "agents_test.lua", "OCTET_TEST_CASE=stop")
		child := r.str("child_run")
		if child == "" || child == r.str("root_run") {
			t.Fatalf("child run %q, root run %q", child, r.str("root_run"))
		}
		if st := r.str("statusline_running"); !strings.Contains(st, "1 subagent running") {
			t.Errorf("statusline while the child runs: %q", st)
		}
		if st := r.str("statusline_after"); strings.Contains(st, "subagent") {
			t.Errorf("statusline after the child was stopped: %q", st)
		}
		sel, _ := r["select"].([]any)
		if len(sel) != 2 {
			t.Fatalf("vim.ui.select calls: %v", sel)
		}
		first := sel[0].(map[string]any)["items"].([]any)
		if len(first) != 1 || !strings.HasPrefix(first[0].(string), "root/worker1 [running] CHILD-ONE stall") {
			t.Errorf(":OctetAgents listed %q", first)
		}
		if acts := sel[1].(map[string]any)["items"].([]any); len(acts) == 0 || acts[0] != "stop" {
			t.Errorf("actions offered: %q", acts)
		}
		sent, _ := r["sent"].([]any)
		if len(sent) != 1 || sent[0].(map[string]any)["method"] != "octet/cancel" || sent[0].(map[string]any)["runId"] != child {
			t.Errorf("requests sent by the stop: %v (child run %s)", sent, child)
		}
		chat := r.str("chat")
		if !strings.Contains(chat, "▸ root/worker1 [cancelled] CHILD-ONE stall") || !strings.Contains(chat, "The child was stopped.") {
			t.Errorf("chat after the stop:\n%s", chat)
		}
		if g, _ := r["status_groups"].([]any); !slices.Contains(g, any("OctetAgentCancelled")) {
			t.Errorf("status highlight groups: %v", g)
		}
	})
}

// TestAgentsChildApproval: a child's approval comes to the parent's
// session; its float names the subagent first (highlighted), and
// approving it lets the child's write run.
func TestAgentsChildApproval(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		gate := make(chan struct{})
		gateFile := filepath.Join(w.tmp, "tightened")
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-done:
					close(gate)
					return
				case <-time.After(20 * time.Millisecond):
				}
				if _, err := os.Stat(gateFile); err == nil {
					close(gate)
					<-done
					return
				}
			}
		}()
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("s1", "agents_spawn", `{"task":"CHILD-ONE write one.txt"}`)).ForRequestContaining("ROOT-PROMPT"),
			providertest.Reply(providertest.FunctionCall("w1", "agents_wait", `{"timeout_seconds":60}`)).ForRequestContaining("ROOT-PROMPT"),
			providertest.Text("The child wrote it.").ForRequestContaining("ROOT-PROMPT"),
			providertest.Reply(providertest.FunctionCall("e1", "write", `{"path":"one.txt","content":"1\n"}`)).HoldUntil(gate).ForRequestContaining("CHILD-ONE"),
			providertest.Text("wrote one").ForRequestContaining("CHILD-ONE"),
		)
		r := w.run(t, "agents_test.lua", "OCTET_TEST_CASE=approve", "OCTET_TEST_GATE="+gateFile)
		if f := r.str("float_text"); !strings.HasPrefix(f, "Subagent root/worker1 asks (session ") || !strings.Contains(f, "write") {
			t.Errorf("the child's approval float:\n%s", f)
		}
		if g := r.str("float_first_hl"); g != "OctetAgentPath" {
			t.Errorf("the float's first line is highlighted %q", g)
		}
		if got := readFile(t, filepath.Join(w.ws, "one.txt")); got != "1\n" {
			t.Errorf("one.txt = %q after approving the child's write", got)
		}
		if chat := r.str("chat"); !strings.Contains(chat, "answer: wrote one") || !strings.Contains(chat, "The child wrote it.") {
			t.Errorf("chat after the child's approved write:\n%s", chat)
		}
	})
}
