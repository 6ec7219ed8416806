package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// approvalScript answers octet/confirmEffect per call id (default
// "approve") and records which calls were asked, with their params.
type approvalScript struct {
	mu      sync.Mutex
	answers map[string]map[string]string // callId → answer fields
	asked   []confirmParams
	// hold, when set, delays the answer for its call id until closed.
	hold map[string]chan struct{}
}

func (a *approvalScript) respond(params json.RawMessage) (any, error) {
	var p confirmParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	a.mu.Lock()
	hold := a.hold[p.CallID]
	a.mu.Unlock()
	if hold != nil {
		<-hold
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, p)
	ans := map[string]string{"decision": "approve"}
	for k, v := range a.answers[p.CallID] {
		ans[k] = v
	}
	ans["digest"] = p.Digest
	return ans, nil
}

// askedCalls returns the call ids that were asked, in order.
func (a *approvalScript) askedCalls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ids []string
	for _, p := range a.asked {
		ids = append(ids, p.CallID)
	}
	return ids
}

// approvalEditor starts an editor on st that answers approvals with a.
func approvalEditor(t *testing.T, st *stack, a *approvalScript) *fakeEditor {
	t.Helper()
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true, "events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("octet/confirmEffect", a.respond)
	return e
}

// callTurns enqueues one turn per call (call_1, call_2, ... in order),
// then a final answer.
func callTurns(st *stack, calls ...[2]string) {
	var turns []providertest.Turn
	for i, c := range calls {
		turns = append(turns, providertest.Reply(providertest.FunctionCall(callName(i+1), c[0], c[1])))
	}
	st.Provider.Enqueue(append(turns, providertest.Text("Done."))...)
}

func callName(i int) string { return "call_" + string(rune('0'+i/10)) + string(rune('0'+i%10)) }

// runPrompt sends one prompt and waits for a completed answer.
func runPrompt(t *testing.T, e *fakeEditor, sid string) promptAnswer {
	t.Helper()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "go"}))
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v\n%s", ans, e.dump())
	}
	return ans
}

// decisionsOf returns the tool_policy_decision events of a run by call id.
func decisionsOf(e *fakeEditor, runID string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, ev := range e.eventsOf(runID) {
		if ev.Event["kind"] == "tool_policy_decision" {
			out[ev.Event["callId"].(string)] = ev.Event
		}
	}
	return out
}

// toolResults returns the session's tool result texts by call id.
func toolResults(t *testing.T, e *fakeEditor, sid string) map[string]string {
	t.Helper()
	var r struct {
		Transcript []host.TranscriptEntry `json:"transcript"`
	}
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, &r)
	out := map[string]string{}
	for _, en := range r.Transcript {
		if en.Result != nil {
			out[en.Result.CallID] = en.Result.Text
		}
	}
	return out
}

// approvalList is the octet/approvals/list result.
type approvalList struct {
	Pending []confirmParams `json:"pending"`
	Rules   []struct {
		RuleID    string              `json:"ruleId"`
		Tool      string              `json:"tool"`
		Effect    string              `json:"effect"`
		Scope     tools.ApprovalScope `json:"scope"`
		Policy    string              `json:"policy"`
		CreatedAt string              `json:"createdAt"`
	} `json:"rules"`
}

func listApprovals(t *testing.T, e *fakeEditor, sid string) approvalList {
	t.Helper()
	var l approvalList
	e.mustCall("octet/approvals/list", map[string]any{"sessionId": sid}, &l)
	if l.Pending == nil || l.Rules == nil {
		t.Fatalf("approvals/list must return arrays: %+v", l)
	}
	return l
}

// TestApproveForSessionCoversExactlyThatFile: "approve_for_session" on an
// edit of a.txt makes a standing rule that admits later edits of a.txt
// (also spelled ./a.txt) without asking, with session_rule and the
// ruleId as evidence; an edit of A.txt, of a link to a.txt, and a write
// of a.txt are asked again. A denial's reason reaches the model, bounded
// and with its controls made visible.
func TestApproveForSessionCoversExactlyThatFile(t *testing.T) {
	st := newStack(t, tools.Controlled)
	writeFile(t, filepath.Join(st.Workspace, "a.txt"), "v0\n")
	writeFile(t, filepath.Join(st.Workspace, "A.txt"), "v0\n")
	if err := os.Symlink("a.txt", filepath.Join(st.Workspace, "link.txt")); err != nil {
		t.Fatal(err)
	}
	callTurns(st,
		[2]string{"edit", `{"path":"a.txt","old_text":"v0","new_text":"v1"}`},
		[2]string{"edit", `{"path":"a.txt","old_text":"v1","new_text":"v2"}`},
		[2]string{"edit", `{"path":"./a.txt","old_text":"v2","new_text":"v3"}`},
		[2]string{"edit", `{"path":"A.txt","old_text":"v0","new_text":"x"}`},
		[2]string{"write", `{"path":"a.txt","content":"w\n"}`},
		[2]string{"edit", `{"path":"link.txt","old_text":"w","new_text":"y"}`},
		[2]string{"edit", `{"path":"a.txt/","old_text":"w","new_text":"z"}`},
	)
	a := &approvalScript{answers: map[string]map[string]string{
		"call_01": {"decision": "approve_for_session"},
		"call_04": {"decision": "deny", "reason": "not that one\x1b[31m\nplease"},
	}}
	e := approvalEditor(t, st, a)
	sid := e.newSession()
	ans := runPrompt(t, e, sid)

	if got, want := a.askedCalls(), []string{"call_01", "call_04", "call_05", "call_06"}; !slices.Equal(got, want) {
		t.Errorf("asked %v, want %v", got, want)
	}
	if sc := a.asked[0].RuleScope; sc == nil || sc.Path != "a.txt" || sc.Command != "" {
		t.Errorf("confirmEffect ruleScope %+v, want {path: a.txt}", sc)
	}
	ds := decisionsOf(e, ans.RunID)
	ruleID, _ := ds["call_01"]["ruleId"].(string)
	if ds["call_01"]["reason"] != "approved_for_session" || !strings.HasPrefix(ruleID, "rule_") {
		t.Fatalf("call_01 decision %v", ds["call_01"])
	}
	for _, c := range []string{"call_02", "call_03", "call_07"} {
		if d := ds[c]; d["decision"] != "allowed" || d["reason"] != "session_rule" || d["ruleId"] != ruleID {
			t.Errorf("%s decision %v, want allowed by session_rule %s", c, d, ruleID)
		}
	}
	if d := ds["call_04"]; d["decision"] != "denied" || d["ruleId"] != nil {
		t.Errorf("call_04 decision %v", d)
	}
	if got := readFile(t, filepath.Join(st.Workspace, "a.txt")); got != "z\n" {
		t.Errorf("a.txt = %q", got)
	}
	res := toolResults(t, e, sid)
	if want := "The user's reason: not that one^[[31m ⏎ please"; !strings.Contains(res["call_04"], want) {
		t.Errorf("denied result %q, want it to carry %q", res["call_04"], want)
	}
	l := listApprovals(t, e, sid)
	if len(l.Rules) != 1 || l.Rules[0].RuleID != ruleID || l.Rules[0].Tool != "edit" || l.Rules[0].Scope != (tools.ApprovalScope{Path: "a.txt"}) ||
		l.Rules[0].Effect != "workspace_mutation" || l.Rules[0].Policy != "controlled" || l.Rules[0].CreatedAt == "" || len(l.Pending) != 0 {
		t.Errorf("approvals/list %+v", l)
	}
}

// TestApprovalRuleSurvivesRestartAndRevoke: a standing rule is in the
// session ledger, so a new server process resuming the session still
// applies it; octet/approvals/revoke is durable too, and the next edit is
// asked again.
func TestApprovalRuleSurvivesRestartAndRevoke(t *testing.T) {
	st := newStack(t, tools.Controlled)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "v0\n")
	edit := func(from, to string) [2]string {
		return [2]string{"edit", `{"path":"a.txt","old_text":"` + from + `","new_text":"` + to + `"}`}
	}

	a1 := &approvalScript{answers: map[string]map[string]string{"call_01": {"decision": "approve_for_session"}}}
	e1 := approvalEditor(t, st, a1)
	sid := e1.newSession()
	callTurns(st, edit("v0", "v1"))
	runPrompt(t, e1, sid)
	rules := listApprovals(t, e1, sid).Rules
	if len(rules) != 1 {
		t.Fatalf("rules %+v", rules)
	}
	stopEditor(t, e1)

	a2 := &approvalScript{}
	e2 := approvalEditor(t, st, a2)
	e2.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, nil)
	if got := listApprovals(t, e2, sid).Rules; len(got) != 1 || got[0].RuleID != rules[0].RuleID {
		t.Fatalf("after restart rules %+v, want %s", got, rules[0].RuleID)
	}
	callTurns(st, edit("v1", "v2"))
	ans := runPrompt(t, e2, sid)
	if d := decisionsOf(e2, ans.RunID)["call_01"]; d["reason"] != "session_rule" || d["ruleId"] != rules[0].RuleID || len(a2.askedCalls()) != 0 {
		t.Fatalf("after restart: decision %v, asked %v", d, a2.askedCalls())
	}
	e2.mustCall("octet/approvals/revoke", map[string]any{"sessionId": sid, "ruleId": rules[0].RuleID}, nil)
	err := e2.call("octet/approvals/revoke", map[string]any{"sessionId": sid, "ruleId": rules[0].RuleID}, nil)
	if codeOf(err) != jsonrpc2.InvalidParams || !strings.Contains(err.Error(), "no standing approval") {
		t.Errorf("second revoke: %v", err)
	}
	if got := listApprovals(t, e2, sid).Rules; len(got) != 0 {
		t.Errorf("rules after revoke %+v", got)
	}
	stopEditor(t, e2)

	a3 := &approvalScript{}
	e3 := approvalEditor(t, st, a3)
	e3.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, nil)
	if got := listApprovals(t, e3, sid).Rules; len(got) != 0 {
		t.Errorf("revocation did not survive a restart: %+v", got)
	}
	callTurns(st, edit("v2", "v3"))
	ans = runPrompt(t, e3, sid)
	if got := a3.askedCalls(); !slices.Equal(got, []string{"call_01"}) {
		t.Errorf("after revoke asked %v, want the edit asked again", got)
	}
	if d := decisionsOf(e3, ans.RunID)["call_01"]; d["reason"] != "approved" {
		t.Errorf("after revoke decision %v", d)
	}
	if got := readFile(t, file); got != "v3\n" {
		t.Errorf("a.txt = %q", got)
	}
}

// TestBashRuleExactCommand: a standing rule for a bash command covers
// exactly that command text with the same timeout: another command, the
// same words spaced differently, a trailing space or another timeout is
// asked again.
func TestBashRuleExactCommand(t *testing.T) {
	st := newStack(t, tools.Controlled)
	callTurns(st,
		[2]string{"bash", `{"command":"touch one"}`},
		[2]string{"bash", `{"command":"touch one"}`},
		[2]string{"bash", `{"command":"touch  one"}`},
		[2]string{"bash", `{"command":"touch one "}`},
		[2]string{"bash", `{"command":"touch one","timeout_ms":1000}`},
		[2]string{"bash", `{"command":"touch two"}`},
	)
	a := &approvalScript{answers: map[string]map[string]string{"call_01": {"decision": "approve_for_session"}}}
	e := approvalEditor(t, st, a)
	sid := e.newSession()
	ans := runPrompt(t, e, sid)
	if got, want := a.askedCalls(), []string{"call_01", "call_03", "call_04", "call_05", "call_06"}; !slices.Equal(got, want) {
		t.Errorf("asked %v, want %v", got, want)
	}
	sc := a.asked[0].RuleScope
	if sc == nil || sc.Command != "touch one" || sc.Dir != st.Workspace || len(sc.Env) != 64 || sc.Path != "" {
		t.Errorf("ruleScope %+v", sc)
	}
	if d := decisionsOf(e, ans.RunID)["call_02"]; d["reason"] != "session_rule" {
		t.Errorf("call_02 decision %v", d)
	}
	rules := listApprovals(t, e, sid).Rules
	if len(rules) != 1 || rules[0].Tool != "bash" || rules[0].Scope.Command != "touch one" {
		t.Errorf("rules %+v", rules)
	}
}

// TestNoBashRuleUnderSafeMode: controlled_bash_approval (--safe-mode)
// approves every shell call once: no ruleScope is offered, and
// "approve_for_session" approves only that call.
func TestNoBashRuleUnderSafeMode(t *testing.T) {
	st := newStack(t, tools.ControlledBashApproval)
	callTurns(st, [2]string{"bash", `{"command":"touch one"}`}, [2]string{"bash", `{"command":"touch one"}`})
	a := &approvalScript{answers: map[string]map[string]string{"call_01": {"decision": "approve_for_session"}}}
	e := approvalEditor(t, st, a)
	sid := e.newSession()
	ans := runPrompt(t, e, sid)
	if got := a.askedCalls(); !slices.Equal(got, []string{"call_01", "call_02"}) {
		t.Errorf("asked %v, want both calls", got)
	}
	if a.asked[0].RuleScope != nil {
		t.Errorf("ruleScope offered under safe mode: %+v", a.asked[0].RuleScope)
	}
	if d := decisionsOf(e, ans.RunID)["call_01"]; d["decision"] != "allowed" || d["reason"] != "approved" || d["ruleId"] != nil {
		t.Errorf("call_01 decision %v", d)
	}
	if rules := listApprovals(t, e, sid).Rules; len(rules) != 0 {
		t.Errorf("rules %+v", rules)
	}
}

// policyOf decodes an EffectiveToolPolicy's effect_policy setting.
func policyOf(t *testing.T, raw map[string]any) (value, source string) {
	t.Helper()
	ep, _ := raw["effect_policy"].(map[string]any)
	value, _ = ep["value"].(string)
	source, _ = ep["source"].(string)
	return value, source
}

// TestSessionPolicy: effectPolicy on session/new and
// octet/session/setPolicy tighten the launch policy for one session,
// durably (a restarted server keeps it); a looser or unknown policy is
// refused with InvalidParams and a refused session/new leaves no file. A
// standing rule granted under controlled does not apply once the session
// is stricter, and applies again when it is back.
func TestSessionPolicy(t *testing.T) {
	st := newStack(t, tools.Controlled)
	writeFile(t, filepath.Join(st.Workspace, "a.txt"), "v0\n")
	a := &approvalScript{answers: map[string]map[string]string{"call_01": {"decision": "approve_for_session"}}}
	e := approvalEditor(t, st, a)

	for _, bad := range []string{"unsafe_host", "yolo"} {
		err := e.call("octet/session/new", map[string]any{"effectPolicy": bad}, nil)
		if codeOf(err) != jsonrpc2.InvalidParams {
			t.Errorf("session/new effectPolicy %s: %v, want InvalidParams", bad, err)
		}
	}
	if err := e.call("octet/session/new", map[string]any{"effectPolicy": "unsafe_host"}, nil); !strings.Contains(err.Error(), "looser") {
		t.Errorf("refusal does not say why: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(st.Home, "sessions")); len(ents) != 0 {
		t.Errorf("refused session/new left %d files", len(ents))
	}

	var created struct {
		SessionID           string         `json:"sessionId"`
		EffectiveToolPolicy map[string]any `json:"effectiveToolPolicy"`
	}
	e.mustCall("octet/session/new", map[string]any{"effectPolicy": "controlled_bash_approval"}, &created)
	sid := created.SessionID
	if v, src := policyOf(t, created.EffectiveToolPolicy); v != "controlled_bash_approval" || src != "session" {
		t.Errorf("session/new policy %s (%s)", v, src)
	}
	err := e.call("octet/session/setPolicy", map[string]any{"sessionId": sid, "effectPolicy": "unsafe_host"}, nil)
	if codeOf(err) != jsonrpc2.InvalidParams || !strings.Contains(err.Error(), "looser than the launch policy controlled") {
		t.Errorf("setPolicy unsafe_host: %v", err)
	}
	// ls is auto-approved under controlled, asked under the session's policy.
	callTurns(st, [2]string{"bash", `{"command":"ls"}`})
	runPrompt(t, e, sid)
	if got := a.askedCalls(); !slices.Equal(got, []string{"call_01"}) {
		t.Fatalf("asked %v: the session's stricter policy was not applied", got)
	}

	var eff map[string]any
	e.mustCall("octet/session/setPolicy", map[string]any{"sessionId": sid, "effectPolicy": "controlled"}, &eff)
	if v, src := policyOf(t, eff); v != "controlled" || src != "default" {
		t.Errorf("back to the launch policy: %s (%s)", v, src)
	}
	a.mu.Lock()
	a.asked = nil
	a.mu.Unlock()
	edit := func(from, to string) [2]string {
		return [2]string{"edit", `{"path":"a.txt","old_text":"` + from + `","new_text":"` + to + `"}`}
	}
	callTurns(st, edit("v0", "v1"), edit("v1", "v2"))
	runPrompt(t, e, sid) // call_01 granted for the session under controlled, call_02 by it
	if got := a.askedCalls(); !slices.Equal(got, []string{"call_01"}) {
		t.Fatalf("asked %v", got)
	}
	e.mustCall("octet/session/setPolicy", map[string]any{"sessionId": sid, "effectPolicy": "controlled_bash_approval"}, &eff)
	stopEditor(t, e)

	a2 := &approvalScript{}
	e2 := approvalEditor(t, st, a2)
	e2.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, nil)
	e2.mustCall("octet/policy", map[string]any{"sessionId": sid}, &eff)
	if v, src := policyOf(t, eff); v != "controlled_bash_approval" || src != "session" {
		t.Errorf("after restart policy %s (%s)", v, src)
	}
	callTurns(st, edit("v2", "v3"))
	ans := runPrompt(t, e2, sid)
	if got := a2.askedCalls(); !slices.Equal(got, []string{"call_01"}) {
		t.Errorf("under the stricter policy the controlled rule was used: asked %v", got)
	}
	e2.mustCall("octet/session/setPolicy", map[string]any{"sessionId": sid, "effectPolicy": "controlled"}, nil)
	callTurns(st, edit("v3", "v4"))
	ans = runPrompt(t, e2, sid)
	if d := decisionsOf(e2, ans.RunID)["call_01"]; d["reason"] != "session_rule" {
		t.Errorf("back under controlled the rule did not apply: %v", d)
	}
	if err := e2.call("octet/session/setPolicy", map[string]any{"sessionId": sid}, nil); codeOf(err) != jsonrpc2.InvalidParams {
		t.Errorf("setPolicy without effectPolicy: %v", err)
	}
}

// TestRevocationByAnotherWriterHolds: a revocation another process appends
// to the session file holds at once in a server that has the session
// open (rules are read from the ledger at each use, never cached).
func TestRevocationByAnotherWriterHolds(t *testing.T) {
	st := newStack(t, tools.Controlled)
	writeFile(t, filepath.Join(st.Workspace, "a.txt"), "v0\n")
	a := &approvalScript{answers: map[string]map[string]string{"call_01": {"decision": "approve_for_session"}}}
	e := approvalEditor(t, st, a)
	sid := e.newSession()
	callTurns(st, [2]string{"edit", `{"path":"a.txt","old_text":"v0","new_text":"v1"}`})
	runPrompt(t, e, sid)
	rules := listApprovals(t, e, sid).Rules
	if len(rules) != 1 {
		t.Fatalf("rules %+v", rules)
	}
	other, err := session.Open(filepath.Join(st.Home, "sessions", sid+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	err = other.Append(session.ApprovalRecord(session.Approval{Op: session.ApprovalRevoke, RuleID: rules[0].RuleID, Time: time.Now()}))
	other.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := listApprovals(t, e, sid).Rules; len(got) != 0 {
		t.Errorf("rules after a foreign revocation %+v", got)
	}
	callTurns(st, [2]string{"edit", `{"path":"a.txt","old_text":"v1","new_text":"v2"}`})
	runPrompt(t, e, sid)
	if got := a.askedCalls(); !slices.Equal(got, []string{"call_01", "call_01"}) {
		t.Errorf("asked %v: the revoked rule was still used", got)
	}
}

// TestStockClientApproveForSession: a client without confirmEffect is
// offered "Approve for session" for a call a rule can cover, and choosing
// it grants the rule.
func TestStockClientApproveForSession(t *testing.T) {
	st := newStack(t, tools.Controlled)
	writeFile(t, filepath.Join(st.Workspace, "a.txt"), "v0\n")
	callTurns(st,
		[2]string{"edit", `{"path":"a.txt","old_text":"v0","new_text":"v1"}`},
		[2]string{"edit", `{"path":"a.txt","old_text":"v1","new_text":"v2"}`})
	e := st.editor(t, Options{}, nil)
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	var asked int
	e.respond("window/showMessageRequest", func(json.RawMessage) (any, error) {
		asked++
		return map[string]string{"title": "Approve for session"}, nil
	})
	sid := e.newSession()
	ans := runPrompt(t, e, sid)
	if asked != 1 {
		t.Errorf("asked %d times, want once", asked)
	}
	if d := decisionsOf(e, ans.RunID)["call_02"]; d["reason"] != "session_rule" {
		t.Errorf("call_02 decision %v", d)
	}
	if got := readFile(t, filepath.Join(st.Workspace, "a.txt")); got != "v2\n" {
		t.Errorf("a.txt = %q", got)
	}
}

// TestSetPolicyDuringRunAppliesAtNextCall: a policy set while a run waits
// for an approval leaves that call as it was admitted and applies from the
// run's next call (a read-only ls, auto-approved under controlled, is
// then asked).
func TestSetPolicyDuringRunAppliesAtNextCall(t *testing.T) {
	st := newStack(t, tools.Controlled)
	callTurns(st, [2]string{"bash", `{"command":"touch one"}`}, [2]string{"bash", `{"command":"ls"}`})
	release := make(chan struct{})
	a := &approvalScript{hold: map[string]chan struct{}{"call_01": release}}
	e := approvalEditor(t, st, a)
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "go"})
	e.awaitRequest("octet/confirmEffect")
	e.mustCall("octet/session/setPolicy", map[string]any{"sessionId": sid, "effectPolicy": "controlled_bash_approval"}, nil)
	close(release)
	ans := waitAnswer(t, ch)
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	if got := a.askedCalls(); !slices.Equal(got, []string{"call_01", "call_02"}) {
		t.Errorf("asked %v: the next call was not decided under the new policy", got)
	}
	ds := decisionsOf(e, ans.RunID)
	if v, _ := policyOf(t, ds["call_01"]["effectiveToolPolicy"].(map[string]any)); v != "controlled" {
		t.Errorf("call_01 decided under %s, want the policy it was admitted under", v)
	}
	if v, _ := policyOf(t, ds["call_02"]["effectiveToolPolicy"].(map[string]any)); v != "controlled_bash_approval" {
		t.Errorf("call_02 decided under %s", v)
	}
}
