package server

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestVSCodeApprovalRules drives the built `octet lsp` with vscode-jsonrpc
// (testdata/vscode/approvals.js) through the approval choices: an edit
// approved for the session, the next edit of the same file admitted by the
// standing rule without a prompt (session_rule and its ruleId in
// tool_policy_decision), a bash call denied with a reason the model sees,
// approvals/list and revoke, the edit asked again, and setPolicy refusing
// a looser policy and taking a stricter one. Skipped like
// TestVSCodeJSONRPCClient.
func TestVSCodeApprovalRules(t *testing.T) {
	vscodeClient(t)
	w := newRealWorld(t, testbin.Octet(t))
	writeFile(t, filepath.Join(w.ws, "a.txt"), "hello\n")
	prov := w.prov
	edit := func(id, from, to string) providertest.Turn {
		return providertest.Reply(providertest.FunctionCall(id, "edit", `{"path":"a.txt","old_text":"`+from+`","new_text":"`+to+`"}`))
	}
	prov.Enqueue(edit("call_1", "hello", "hi"), edit("call_2", "hi", "hey"),
		providertest.Reply(providertest.FunctionCall("call_3", "bash", `{"command":"touch made"}`)),
		providertest.Text("Done."),
		edit("call_4", "hey", "yo"), providertest.Text("Done again."))

	type rule struct {
		RuleID string
		Tool   string
		Scope  map[string]any
	}
	var got struct {
		Confirms []struct {
			CallID, Tool string
			RuleScope    map[string]any
		}
		Decisions []struct{ CallID, Decision, Reason, RuleID string }
		Errors    []string
		First     promptAnswer
		Second    promptAnswer
		Listed    struct {
			Pending []any
			Rules   []rule
		}
		Revoked     map[string]any
		AfterRevoke struct{ Rules []rule }
		Looser      struct {
			Code    int
			Message string
		}
		Stricter map[string]map[string]any
		Results  []struct{ CallID, Text string }
		ExitCode int
	}
	w.runNode(t, "approvals.js", &got)
	if got.First.Outcome != "completed" || got.Second.Outcome != "completed" || got.ExitCode != 0 || len(got.Errors) != 0 {
		t.Fatalf("first %+v, second %+v, exit %d, errors %v", got.First, got.Second, got.ExitCode, got.Errors)
	}
	var asked []string
	for _, c := range got.Confirms {
		asked = append(asked, c.CallID)
	}
	if !slices.Equal(asked, []string{"call_1", "call_3", "call_4"}) {
		t.Errorf("asked %v, want call_2 admitted by the standing rule", asked)
	}
	if len(got.Confirms) > 0 && got.Confirms[0].RuleScope["path"] != "a.txt" {
		t.Errorf("ruleScope %v", got.Confirms[0].RuleScope)
	}
	if len(got.Listed.Rules) != 1 || got.Listed.Rules[0].Tool != "edit" || got.Listed.Rules[0].Scope["path"] != "a.txt" {
		t.Fatalf("approvals/list %+v", got.Listed)
	}
	ruleID := got.Listed.Rules[0].RuleID
	reasons := map[string]string{}
	for _, d := range got.Decisions {
		reasons[d.CallID] = d.Reason + " " + d.RuleID
	}
	for call, want := range map[string]string{
		"call_1": "approved_for_session " + ruleID, "call_2": "session_rule " + ruleID,
		"call_3": "approval_denied ", "call_4": "approved ",
	} {
		if reasons[call] != want {
			t.Errorf("%s decision %q, want %q", call, reasons[call], want)
		}
	}
	if got.Revoked == nil || len(got.AfterRevoke.Rules) != 0 {
		t.Errorf("revoke %v, rules after %+v", got.Revoked, got.AfterRevoke.Rules)
	}
	if got.Looser.Code != int(jsonrpc2.InvalidParams) || !strings.Contains(got.Looser.Message, "looser") {
		t.Errorf("looser setPolicy %+v", got.Looser)
	}
	if ep := got.Stricter["effect_policy"]; ep["value"] != "controlled_bash_approval" || ep["source"] != "session" {
		t.Errorf("stricter setPolicy %v", got.Stricter)
	}
	var bashResult string
	for _, r := range got.Results {
		if r.CallID == "call_3" {
			bashResult = r.Text
		}
	}
	if !strings.Contains(bashResult, "The user's reason: use make instead") {
		t.Errorf("denied bash result %q", bashResult)
	}
	if got := readFile(t, filepath.Join(w.ws, "a.txt")); got != "yo\n" {
		t.Errorf("a.txt = %q", got)
	}
}
