package server

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// stack is the real runtime under a test (host/hosttest): a loopback
// scripted provider, real session files under a temporary OCTET_HOME,
// real tools in a temporary workspace. Crash tests pause in its Hooks and
// Intents.
type stack struct{ *hosttest.Stack }

// newStack builds the real runtime with policy.
func newStack(t *testing.T, policy tools.Policy) *stack {
	return newStackWith(t, policy, false)
}

// newStackWith builds the real runtime; recovery selects the Codex
// recovery envelope (a qualified model and endpoint, short backoff).
func newStackWith(t *testing.T, policy tools.Policy, recovery bool) *stack {
	return buildStack(t, policy, recovery, false)
}

// buildStack builds the real runtime; inProcess plays the provider script
// through providertest's in-process RoundTripper (no sockets), for tests
// that run inside a testing/synctest bubble.
func buildStack(t *testing.T, policy tools.Policy, recovery, inProcess bool) *stack {
	t.Helper()
	return &stack{hosttest.New(t, hosttest.Options{Policy: policy, Recovery: recovery, InProcess: inProcess})}
}

// editor starts a fake editor on the stack and initializes it.
func (st *stack) editor(t *testing.T, opts Options, experimental map[string]any) *fakeEditor {
	t.Helper()
	opts.Runtime = st.Runtime
	e := newEditor(t, opts)
	e.initialize(st.Workspace, experimental)
	return e
}

// newSession creates a session and returns its id.
func (e *fakeEditor) newSession() string {
	e.t.Helper()
	var res struct {
		SessionID           string         `json:"sessionId"`
		EffectiveToolPolicy map[string]any `json:"effectiveToolPolicy"`
	}
	e.mustCall("octet/session/new", map[string]any{"title": "test"}, &res)
	if res.SessionID == "" || res.EffectiveToolPolicy == nil {
		e.t.Fatalf("session/new result %+v", res)
	}
	return res.SessionID
}

// promptResult is the decoded answer to octet/prompt.
type promptAnswer struct {
	RunID   string         `json:"runId"`
	Outcome string         `json:"outcome"`
	Usage   map[string]any `json:"usage"`
	Error   string         `json:"error"`
}

// promptAsync sends octet/prompt and returns a channel with its answer.
func (e *fakeEditor) promptAsync(params map[string]any) chan promptAnswer {
	ch := make(chan promptAnswer, 1)
	go func() {
		var res promptAnswer
		if err := e.call("octet/prompt", params, &res); err != nil {
			res.Error = "call failed: " + err.Error()
			res.Outcome = "call-error"
		}
		ch <- res
	}()
	return ch
}

func waitAnswer(t *testing.T, ch chan promptAnswer) promptAnswer {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(editorTimeout):
		t.Fatal("octet/prompt never answered")
		return promptAnswer{}
	}
}

// runIDFromEvents returns the run id of the first run_started event.
func (e *fakeEditor) awaitRunID(sessionID string) string {
	e.t.Helper()
	var id string
	e.await("run_started", func(notes []note) bool {
		for _, ev := range eventsIn(notes, "") {
			if ev.SessionID == sessionID && ev.Event["kind"] == "run_started" {
				id = ev.RunID
			}
		}
		return id != ""
	})
	return id
}

// TestPromptStreamsEventsAndProgress drives one plain answer through the
// whole stack and checks the events, their seq, progress and the answer.
func TestPromptStreamsEventsAndProgress(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Reply(
		providertest.Reasoning("enc-1", "considering the question"),
		providertest.Message("Hello from the scripted model."),
	))
	e := st.editor(t, Options{}, map[string]any{"events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	sid := e.newSession()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "say hello"}))
	if ans.Outcome != "completed" || ans.RunID == "" || ans.Usage == nil {
		t.Fatalf("prompt answer %+v", ans)
	}
	evs := e.eventsOf(ans.RunID)
	if len(evs) < 4 {
		t.Fatalf("only %d events: %s", len(evs), e.dump())
	}
	if evs[0].Event["kind"] != "run_started" || evs[0].Event["runId"] != ans.RunID {
		t.Errorf("first event %v, want run_started with the run id", evs[0].Event)
	}
	if last := evs[len(evs)-1].Event; last["kind"] != "run_finished" || last["outcome"] != "completed" {
		t.Errorf("last event %v, want run_finished completed", last)
	}
	var text strings.Builder
	finished := 0
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d, want %d", i, ev.Seq, i+1)
		}
		if ev.SessionID != sid {
			t.Errorf("event %d sessionId %q", i, ev.SessionID)
		}
		if _, nested := ev.Event["event"]; nested {
			t.Errorf("event %d nests its data: %v", i, ev.Event)
		}
		switch ev.Event["kind"] {
		case "output_delta":
			if ev.Event["channel"] == "text" {
				text.WriteString(ev.Event["text"].(string))
			}
		case "run_finished":
			finished++
		}
	}
	if finished != 1 {
		t.Errorf("%d run_finished events, want exactly 1", finished)
	}
	if text.String() != "Hello from the scripted model." {
		t.Errorf("streamed text %q", text.String())
	}
	// Progress: created by the server, begin, reports, end.
	create := e.awaitRequest("window/workDoneProgress/create")
	var tok struct{ Token string }
	_ = json.Unmarshal(create, &tok)
	kinds, msgs := progressOf(e, tok.Token)
	if len(kinds) < 3 || kinds[0] != "begin" || kinds[len(kinds)-1] != "end" || slices.Index(kinds, "report") < 0 {
		t.Errorf("progress kinds %v for token %q", kinds, tok.Token)
	}
	if !slices.Contains(msgs, "Thinking") {
		t.Errorf("progress messages %v lack Thinking", msgs)
	}
}

// progressOf returns the $/progress kinds and messages sent on token.
func progressOf(e *fakeEditor, token string) (kinds, msgs []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.notes {
		if n.Method != "$/progress" {
			continue
		}
		var p struct {
			Token any
			Value struct{ Kind, Message string }
		}
		if json.Unmarshal(n.Params, &p) != nil || fmt.Sprint(p.Token) != token {
			continue
		}
		kinds = append(kinds, p.Value.Kind)
		msgs = append(msgs, p.Value.Message)
	}
	return kinds, msgs
}

// editScript enqueues an edit of a.txt followed by a final answer.
func editScript(st *stack) {
	st.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"goodbye"}`)),
		providertest.Text("Edited."),
	)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// confirmAnswer answers octet/confirmEffect with decision, echoing the
// digest unless digest overrides it.
func confirmAnswer(decision, digest string) func(json.RawMessage) (any, error) {
	return func(params json.RawMessage) (any, error) {
		var p confirmParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		d := p.Digest
		if digest != "" {
			d = digest
		}
		return map[string]string{"decision": decision, "digest": d}, nil
	}
}

// TestApproveAndDeny checks octet/confirmEffect end to end: approve
// changes the file, deny and a wrong digest leave it unchanged.
func TestApproveAndDeny(t *testing.T) {
	for _, tc := range []struct {
		name, decision, digest, want, decision2 string
	}{
		{"approve", "approve", "", "goodbye world\n", "allowed"},
		{"deny", "deny", "", "hello world\n", "denied"},
		{"wrong digest", "approve", strings.Repeat("0", 64), "hello world\n", "denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t, tools.Controlled)
			editScript(st)
			file := filepath.Join(st.Workspace, "a.txt")
			writeFile(t, file, "hello world\n")
			e := st.editor(t, Options{}, map[string]any{"confirmEffect": true, "events": true})
			e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
			e.respond("octet/confirmEffect", confirmAnswer(tc.decision, tc.digest))
			sid := e.newSession()
			ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"}))
			if ans.Outcome != "completed" {
				t.Fatalf("answer %+v\n%s", ans, e.dump())
			}
			if got := readFile(t, file); got != tc.want {
				t.Errorf("a.txt = %q, want %q", got, tc.want)
			}
			var p confirmParams
			if err := json.Unmarshal(e.awaitRequest("octet/confirmEffect"), &p); err != nil {
				t.Fatal(err)
			}
			if p.SessionID != sid || p.RunID != ans.RunID || p.CallID != "call_1" || p.Tool != "edit" ||
				len(p.Digest) != 64 || p.ExpiresAt.IsZero() || !strings.Contains(p.Diff, "+goodbye world") {
				t.Errorf("confirmEffect params %+v", p)
			}
			var decision string
			for _, ev := range e.eventsOf(ans.RunID) {
				if ev.Event["kind"] == "tool_policy_decision" {
					decision, _ = ev.Event["decision"].(string)
				}
			}
			if decision != tc.decision2 {
				t.Errorf("tool_policy_decision %q, want %q", decision, tc.decision2)
			}
		})
	}
}

// TestShowMessageRequestFallback checks that a stock LSP client (no
// experimental.octet) is asked with window/showMessageRequest, and that
// octet.prompt works through workspace/executeCommand.
func TestShowMessageRequestFallback(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\n")
	e := st.editor(t, Options{}, nil)
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("window/showMessageRequest", func(params json.RawMessage) (any, error) {
		var p struct {
			Message string
			Actions []struct{ Title string }
		}
		_ = json.Unmarshal(params, &p)
		// An edit can be approved for the session (a standing rule).
		if len(p.Actions) != 3 || p.Actions[0].Title != "Approve" || p.Actions[1].Title != "Approve for session" || p.Actions[2].Title != "Deny" {
			return nil, fmt.Errorf("unexpected actions %v", p.Actions)
		}
		return map[string]string{"title": "Approve"}, nil
	})
	var ans promptAnswer
	e.mustCall("workspace/executeCommand", map[string]any{"command": "octet.prompt", "arguments": []any{"edit a.txt"}, "workDoneToken": 42}, &ans)
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	if kinds, _ := progressOf(e, "42"); len(kinds) < 2 || kinds[0] != "begin" || kinds[len(kinds)-1] != "end" {
		t.Errorf("progress on the command's workDoneToken: %v", kinds)
	}
	if got := readFile(t, file); got != "goodbye world\n" {
		t.Errorf("a.txt = %q after Approve", got)
	}
	// A stock client gets octet/event too (it learns the runId from
	// run_started; it ignores what it does not know), and the message it
	// shows for the approval carries the diff.
	e.mu.Lock()
	evs := eventsIn(e.notes, "")
	e.mu.Unlock()
	if len(evs) == 0 || evs[0].Event["kind"] != "run_started" || evs[0].RunID != ans.RunID {
		t.Errorf("a client that advertised nothing got events %v, want run_started of %s first", evs, ans.RunID)
	}
	var smr struct{ Message string }
	_ = json.Unmarshal(e.awaitRequest("window/showMessageRequest"), &smr)
	if !strings.Contains(smr.Message, "edit a.txt") || !strings.Contains(smr.Message, "-hello world\n+goodbye world") {
		t.Errorf("showMessageRequest message %q lacks the title or the diff", smr.Message)
	}
	var r struct {
		SessionID string
		Events    []host.Event
	}
	var list struct{ Sessions []host.SessionInfo }
	e.mustCall("octet/session/list", nil, &list)
	e.mustCall("octet/session/resume", map[string]any{"sessionId": list.Sessions[0].SessionID, "afterSeq": 0}, &r)
	if len(r.Events) < 5 {
		t.Errorf("resume replayed %d events", len(r.Events))
	}
}

// TestShowMessageRequestFallbackNeverCuts: a stock client's approval
// message used to be cut at 2,000 bytes, hiding the rest of the diff. An
// edit whose message cannot be shown whole is refused without asking
// (preview_too_large, the model is told to split it), the editor is told
// why with window/showMessage, and the file is unchanged.
func TestShowMessageRequestFallbackNeverCuts(t *testing.T) {
	st := newStack(t, tools.Controlled)
	long := strings.Repeat("goodbye world, ", 200) // 3,000 bytes of diff
	st.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"`+long+`"}`)),
		providertest.Text("Could not edit."),
	)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\n")
	e := st.editor(t, Options{}, nil)
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("window/showMessageRequest", func(json.RawMessage) (any, error) {
		return map[string]string{"title": "Approve"}, nil
	})
	var ans promptAnswer
	e.mustCall("workspace/executeCommand", map[string]any{"command": "octet.prompt", "arguments": []any{"edit a.txt"}}, &ans)
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	if got := readFile(t, file); got != "hello world\n" {
		t.Errorf("a.txt changed to %d bytes without a whole approval", len(got))
	}
	e.mu.Lock()
	asked := len(e.requests)
	var shown []string
	for _, r := range e.requests {
		if r.Method == "window/showMessageRequest" {
			asked = -1
		}
	}
	for _, n := range e.notes {
		if n.Method == "window/showMessage" {
			shown = append(shown, string(n.Params))
		}
	}
	evs := eventsIn(e.notes, ans.RunID)
	e.mu.Unlock()
	if asked < 0 {
		t.Error("a cut approval message was sent")
	}
	if len(shown) != 1 || !strings.Contains(shown[0], "refused edit a.txt without asking") {
		t.Errorf("window/showMessage = %q", shown)
	}
	var reason string
	for _, ev := range evs {
		if ev.Event["kind"] == "tool_policy_decision" {
			reason, _ = ev.Event["reason"].(string)
		}
	}
	if reason != tools.ReasonPreviewTooLarge {
		t.Errorf("decision reason %q; events %v", reason, evs)
	}
	body, _ := json.Marshal(st.Provider.Requests()[1].Body)
	if !strings.Contains(string(body), "Split it into smaller calls") {
		t.Errorf("the model was not told to split the call: %s", body)
	}
}

// TestApprovalTimeoutDenies checks that a client that never answers an
// approval gets a denial after the timeout, and the run still completes.
func TestApprovalTimeoutDenies(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\n")
	e := st.editor(t, Options{ApprovalTimeout: 300 * time.Millisecond}, map[string]any{"confirmEffect": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	e.respond("octet/confirmEffect", func(json.RawMessage) (any, error) { <-never; return nil, nil })
	sid := e.newSession()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"}))
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	if got := readFile(t, file); got != "hello world\n" {
		t.Errorf("a.txt = %q, want unchanged after an unanswered approval", got)
	}
	// The server withdrew its request with $/cancelRequest.
	e.await("$/cancelRequest for the approval", func(notes []note) bool {
		return slices.ContainsFunc(notes, func(n note) bool { return n.Method == "$/cancelRequest" })
	})
}

// TestApprovalDeadlineIsExpiresAt: the server used to deny at its own
// 5-minute timeout while expiresAt said the broker's 10 minutes, and the
// timeout was recorded as approval_denied. There is one deadline, stated
// in expiresAt, and passing it is recorded as approval_expired.
func TestApprovalDeadlineIsExpiresAt(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	writeFile(t, filepath.Join(st.Workspace, "a.txt"), "hello world\n")
	const timeout = 400 * time.Millisecond
	e := st.editor(t, Options{ApprovalTimeout: timeout}, map[string]any{"confirmEffect": true, "events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	askedAt := make(chan time.Time, 1)
	e.respond("octet/confirmEffect", func(json.RawMessage) (any, error) { askedAt <- time.Now(); <-never; return nil, nil })
	sid := e.newSession()
	before := time.Now()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"}))
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	var p confirmParams
	if err := json.Unmarshal(e.awaitRequest("octet/confirmEffect"), &p); err != nil {
		t.Fatal(err)
	}
	asked := <-askedAt
	if p.ExpiresAt.Before(before.Add(timeout)) || p.ExpiresAt.After(asked.Add(timeout)) {
		t.Errorf("expiresAt %v, want the server's deadline %v after the request (asked at %v)", p.ExpiresAt, timeout, asked)
	}
	var reason string
	for _, ev := range e.eventsOf(ans.RunID) {
		if ev.Event["kind"] == "tool_policy_decision" {
			reason, _ = ev.Event["reason"].(string)
		}
	}
	if reason != tools.ReasonApprovalExpired {
		t.Errorf("decision reason %q, want %q", reason, tools.ReasonApprovalExpired)
	}
}

// TestRunFailureShownToStockClient checks a failed run is answered with
// outcome failed and, for a client without octet events, shown with
// window/showMessage.
func TestRunFailureShownToStockClient(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Status(400, "invalid_request_error", "bad_request", "the request was bad"))
	e := st.editor(t, Options{}, nil)
	sid := e.newSession()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "hi"}))
	if ans.Outcome != "failed" || ans.Error == "" {
		t.Fatalf("answer %+v, want failed with an error", ans)
	}
	e.await("window/showMessage", func(notes []note) bool {
		return slices.ContainsFunc(notes, func(n note) bool {
			return n.Method == "window/showMessage" && strings.Contains(string(n.Params), "failed")
		})
	})
}

// TestRecoveredOutputChannel interrupts a stream: the partial output must
// arrive only as octet/recoveredOutput (never as an octet/event), the
// retry as provider_retry with a "Reconnecting" progress report, and the
// run must complete with the replacement's answer.
func TestRecoveredOutputChannel(t *testing.T) {
	st := newStackWith(t, tools.Controlled, true)
	st.Provider.Enqueue(
		providertest.Text("partial words that never finish because the stream drops").DropAfter(7),
		providertest.Text("Recovered answer."),
	)
	e := st.editor(t, Options{}, map[string]any{"recoveredOutput": true, "events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	sid := e.newSession()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "go"}))
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v\n%s", ans, e.dump())
	}
	var recovered []map[string]any
	seqs := map[float64]bool{}
	e.mu.Lock()
	for _, n := range e.notes {
		var p map[string]any
		_ = json.Unmarshal(n.Params, &p)
		switch n.Method {
		case "octet/recoveredOutput":
			recovered = append(recovered, p)
			seqs[p["seq"].(float64)] = true
		case "octet/event":
			if seqs[p["seq"].(float64)] {
				t.Errorf("seq %v used twice", p["seq"])
			}
			seqs[p["seq"].(float64)] = true
			if ev, _ := p["event"].(map[string]any); ev["kind"] == "recovered_output" {
				t.Errorf("recovered_output leaked into octet/event: %v", p)
			}
		}
	}
	e.mu.Unlock()
	if len(recovered) == 0 || recovered[0]["channel"] != "text" || !strings.HasPrefix(recovered[0]["text"].(string), "partial") ||
		recovered[0]["runId"] != ans.RunID || recovered[0]["sessionId"] != sid {
		t.Errorf("octet/recoveredOutput = %v", recovered)
	}
	for i := 1; i <= len(seqs); i++ {
		if !seqs[float64(i)] {
			t.Errorf("seq %d missing: event and recoveredOutput share one gap-free counter", i)
		}
	}
	e.await("provider_retry", hasEvent("provider_retry", ans.RunID))
	var tok struct{ Token string }
	_ = json.Unmarshal(e.awaitRequest("window/workDoneProgress/create"), &tok)
	_, msgs := progressOf(e, tok.Token)
	if !slices.ContainsFunc(msgs, func(m string) bool {
		cause, _, ok := strings.Cut(m, "; retrying 1/")
		return ok && cause != ""
	}) {
		t.Errorf("progress messages %v lack a retry report naming its cause", msgs)
	}
}

// TestApproveCommand answers a pending approval with the octet.approve
// command instead of the showMessageRequest it was asked with.
func TestApproveCommand(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\n")
	e := st.editor(t, Options{}, nil)
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	e.respond("window/showMessageRequest", func(json.RawMessage) (any, error) { <-never; return nil, nil })
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"})
	e.awaitRequest("window/showMessageRequest")
	if err := e.call("workspace/executeCommand", map[string]any{"command": "octet.approve", "arguments": []any{map[string]any{"callId": "nope"}}}, nil); codeOf(err) != -32602 {
		t.Errorf("octet.approve for an unknown call: %v, want -32602", err)
	}
	var res struct{ Resolved int }
	e.mustCall("workspace/executeCommand", map[string]any{"command": "octet.approve"}, &res)
	if res.Resolved != 1 {
		t.Errorf("resolved %d", res.Resolved)
	}
	if ans := waitAnswer(t, ch); ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	if got := readFile(t, file); got != "goodbye world\n" {
		t.Errorf("a.txt = %q after octet.approve", got)
	}
}

// TestApprovalErrorAnswerDenies checks that a client answering the
// approval request with an error is denied at once (not after the
// approval timeout).
func TestApprovalErrorAnswerDenies(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\n")
	e := st.editor(t, Options{ApprovalTimeout: time.Hour}, map[string]any{"confirmEffect": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("octet/confirmEffect", func(json.RawMessage) (any, error) {
		return nil, fmt.Errorf("the editor could not show the prompt")
	})
	sid := e.newSession()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"}))
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	if got := readFile(t, file); got != "hello world\n" {
		t.Errorf("a.txt = %q after an error answer", got)
	}
}

// TestBashApproval checks a bash call under ControlledBashApproval: the
// confirmation carries the command, approval runs it (a real process),
// and progress names the command.
func TestBashApproval(t *testing.T) {
	st := newStack(t, tools.ControlledBashApproval)
	st.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_b", "bash", `{"command":"echo made > out.txt"}`)),
		providertest.Text("Ran it."),
	)
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true, "events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("octet/confirmEffect", confirmAnswer("approve", ""))
	sid := e.newSession()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "run it"}))
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	var p confirmParams
	_ = json.Unmarshal(e.awaitRequest("octet/confirmEffect"), &p)
	if p.Tool != "bash" || p.Effect != "host_process" || !strings.Contains(p.Detail, "echo made > out.txt") {
		t.Errorf("confirmEffect %+v", p)
	}
	if got := readFile(t, filepath.Join(st.Workspace, "out.txt")); got != "made\n" {
		t.Errorf("out.txt = %q", got)
	}
	var tok struct{ Token string }
	_ = json.Unmarshal(e.awaitRequest("window/workDoneProgress/create"), &tok)
	_, msgs := progressOf(e, tok.Token)
	// The approval wait is reported, and the command is reported running
	// after it (the pump's tool_started report may land on either side).
	// The title ends with the sandbox the command will run in.
	i := slices.IndexFunc(msgs, func(m string) bool { return strings.HasPrefix(m, "Waiting for approval: bash — sandbox: ") })
	if i < 0 || !slices.Contains(msgs[i:], "Running bash: echo made > out.txt") {
		t.Errorf("progress messages %q", msgs)
	}
}

// TestProgressKeepsWaitingForApproval checks that while an approval is
// open, progress stays at "Waiting for approval" (the pump's tool_started,
// emitted before the approval was asked, must not report the tool as
// running), and that the tool is reported running once approved.
func TestProgressKeepsWaitingForApproval(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	writeFile(t, filepath.Join(st.Workspace, "a.txt"), "hello world\n")
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true, "events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	release := make(chan struct{})
	e.respond("octet/confirmEffect", func(p json.RawMessage) (any, error) {
		<-release
		return confirmAnswer("approve", "")(p)
	})
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"})
	e.awaitRequest("octet/confirmEffect")
	runID := e.awaitRunID(sid)
	e.await("tool_started", hasEvent("tool_started", runID))
	var tok struct{ Token string }
	_ = json.Unmarshal(e.awaitRequest("window/workDoneProgress/create"), &tok)
	// The pump observes tool_started right after forwarding it; give it
	// time to (wrongly) report before looking.
	time.Sleep(200 * time.Millisecond)
	_, held := progressOf(e, tok.Token)
	close(release)
	if ans := waitAnswer(t, ch); ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	i := slices.Index(held, "Waiting for approval: edit a.txt")
	if i < 0 {
		t.Fatalf("progress while the approval was open %q: no waiting report", held)
	}
	if slices.ContainsFunc(held[i:], func(m string) bool { return strings.HasPrefix(m, "Running") }) {
		t.Errorf("progress while the approval was open %q: reported running before approval", held)
	}
	_, all := progressOf(e, tok.Token)
	if !slices.Contains(all[i:], "Running edit: a.txt") {
		t.Errorf("progress %q: the approved edit was never reported running", all)
	}
}

// TestEventsTurnedOff checks that a client that sets
// experimental.octet.events to false gets no octet/event, while the events
// stay buffered for octet/session/resume.
func TestEventsTurnedOff(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text("Hello."))
	e := st.editor(t, Options{}, map[string]any{"events": false})
	sid := e.newSession()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "hi"}))
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	if evs := e.eventsOf(""); len(evs) != 0 {
		t.Errorf("%d octet/event notifications sent to a client that set events to false", len(evs))
	}
	var r struct{ Events []host.Event }
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid, "afterSeq": 0}, &r)
	if len(r.Events) < 3 || r.Events[0].Method != "octet/event" {
		t.Errorf("resume replayed %+v", r.Events)
	}
}

// TestProgressCreateNeverAnswered: a client that advertises
// window.workDoneProgress but never answers window/workDoneProgress/create
// still gets the run's events as they happen, its prompt is answered when
// the run ends (it used to wait for the create request's timeout), and the
// next prompt on the session runs (it used to fail with -32010 meanwhile).
func TestProgressCreateNeverAnswered(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text("Hello there."), providertest.Text("Again."))
	e := st.editor(t, Options{RequestTimeout: time.Hour}, map[string]any{"events": true})
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { <-never; return nil, nil })
	sid := e.newSession()
	for _, text := range []string{"hi", "again"} {
		ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": text}))
		if ans.Outcome != "completed" {
			t.Fatalf("prompt %q answer %+v", text, ans)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.notes {
		if n.Method == "$/progress" {
			t.Errorf("progress on a token the client never accepted: %s", n.Params)
		}
	}
}

// TestProgressCreateAnsweredLate: a token the client accepts after the
// run ended gets its begin and end at once (its progress UI does not wait
// forever), and is not registered for the ended run.
func TestProgressCreateAnsweredLate(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text("Hello there."))
	e := st.editor(t, Options{RequestTimeout: time.Hour}, map[string]any{"events": true})
	release := make(chan struct{})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { <-release; return nil, nil })
	sid := e.newSession()
	if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "hi"})); ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	close(release)
	var tok struct{ Token string }
	_ = json.Unmarshal(e.awaitRequest("window/workDoneProgress/create"), &tok)
	e.await("progress end", func(notes []note) bool {
		return slices.ContainsFunc(notes, func(n note) bool {
			return n.Method == "$/progress" && strings.Contains(string(n.Params), `"end"`)
		})
	})
	if kinds, msgs := progressOf(e, tok.Token); !slices.Equal(kinds, []string{"begin", "end"}) || msgs[1] != "Done" {
		t.Errorf("late token progress %v %v, want begin then end Done", kinds, msgs)
	}
}

// TestApprovalWhileProgressTokenPending: the run reaches an approval
// before the client has accepted the progress token; the wait is not lost:
// begin, sent once the token is accepted, says "Waiting for approval".
func TestApprovalWhileProgressTokenPending(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	writeFile(t, filepath.Join(st.Workspace, "a.txt"), "hello world\n")
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true, "events": true})
	asked, release := make(chan struct{}), make(chan struct{})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) {
		<-asked // accept the token only once the approval is open
		return nil, nil
	})
	e.respond("octet/confirmEffect", func(p json.RawMessage) (any, error) {
		close(asked)
		<-release
		return confirmAnswer("approve", "")(p)
	})
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"})
	var tok struct{ Token string }
	_ = json.Unmarshal(e.awaitRequest("window/workDoneProgress/create"), &tok)
	e.await("progress begin", func(notes []note) bool {
		return slices.ContainsFunc(notes, func(n note) bool { return n.Method == "$/progress" })
	})
	_, msgs := progressOf(e, tok.Token)
	close(release)
	if ans := waitAnswer(t, ch); ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	if len(msgs) == 0 || msgs[0] != "Waiting for approval: edit a.txt" {
		t.Errorf("progress while the approval was open %q, want begin with the approval wait", msgs)
	}
}
