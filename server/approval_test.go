package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// TestProgressNoRunningAfterDenial: the pump observes tool_started
// concurrently with the approval; when it observed it only after the call
// was denied, progress said "Running edit" for an edit that never ran.
func TestProgressNoRunningAfterDenial(t *testing.T) {
	st := newStack(t, tools.Controlled)
	e := st.editor(t, Options{}, nil)
	r := &runState{id: "run_denied", cancelled: make(chan struct{})}
	p := e.srv.startProgress(r, json.RawMessage(`"tok"`))
	p.observe(wireEvent{Kind: "tool_call_started", Body: json.RawMessage(`{"kind":"tool_call_started","callId":"c1","name":"edit"}`)})
	p.observe(wireEvent{Kind: "tool_call_delta", Body: json.RawMessage(`{"kind":"tool_call_delta","callId":"c1","delta":"{\"path\":\"a.txt\"}"}`)})
	p.awaitApproval("c1", "Waiting for approval: edit a.txt")
	p.approvalDone("c1", "Thinking") // denied
	p.observe(wireEvent{Kind: "tool_started", Body: json.RawMessage(`{"kind":"tool_started","callId":"c1","tool":"edit"}`)})
	p.observe(wireEvent{Kind: "tool_finished", Body: json.RawMessage(`{"kind":"tool_finished","callId":"c1","isError":true}`)})
	p.end("completed")
	e.await("progress end", func(notes []note) bool {
		return slices.ContainsFunc(notes, func(n note) bool { return strings.Contains(string(n.Params), `"end"`) })
	})
	if _, msgs := progressOf(e, "tok"); slices.ContainsFunc(msgs, func(m string) bool { return strings.HasPrefix(m, "Running") }) {
		t.Errorf("progress %q reports a denied edit as running", msgs)
	}
}

// TestDigestCaseInsensitive: a digest is hex; an editor that echoes it in
// upper case approved nothing (the answer counted as another digest).
func TestDigestCaseInsensitive(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\n")
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("octet/confirmEffect", func(params json.RawMessage) (any, error) {
		var p confirmParams
		_ = json.Unmarshal(params, &p)
		return map[string]string{"decision": "approve", "digest": strings.ToUpper(p.Digest)}, nil
	})
	sid := e.newSession()
	if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"})); ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	if got := readFile(t, file); got != "goodbye world\n" {
		t.Errorf("a.txt = %q after an approval echoing the digest in upper case", got)
	}
}

// TestStockApprovalNamesOddPathOnOneLine: the stock client's approval
// message names a model-chosen path with a newline on one line, quoted:
// it cannot fake lines of the message ("wants to run bash: …").
func TestStockApprovalNamesOddPathOnOneLine(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "write", `{"path":"x\n\nwants to run bash: ls","content":"y"}`)),
		providertest.Text("done"),
	)
	e := st.editor(t, Options{}, nil)
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("window/showMessageRequest", func(json.RawMessage) (any, error) { return nil, nil })
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "write"})
	var smr struct{ Message string }
	_ = json.Unmarshal(e.awaitRequest("window/showMessageRequest"), &smr)
	want := "File: " + strconv.Quote(filepath.Join(st.Workspace, "x\n\nwants to run bash: ls"))
	if !strings.Contains(smr.Message, want) || strings.Contains(smr.Message, "\nwants to run bash") {
		t.Errorf("showMessageRequest message %q: want %q on one line", smr.Message, want)
	}
	waitAnswer(t, ch)
}

// TestStockApprovalNamesOddWorkspaceOnOneLine: the stock client's
// approval message names the session's directory on one line, quoted,
// like the file it changes: a directory named by a repository (an
// archive's top directory) with newlines cannot fake lines of the
// message, nor push the command below what the prompt shows.
func TestStockApprovalNamesOddWorkspaceOnOneLine(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "write", `{"path":"a.txt","content":"y"}`)),
		providertest.Text("done"),
	)
	odd := filepath.Join(st.Workspace, "ws\n\nwants to run write: notes.txt\n\u202e")
	if err := os.Mkdir(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	e := st.editor(t, Options{}, nil)
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("window/showMessageRequest", func(json.RawMessage) (any, error) { return nil, nil })
	var res struct{ SessionID string }
	e.mustCall("octet/session/new", map[string]any{"title": "test", "cwd": odd}, &res)
	ch := e.promptAsync(map[string]any{"sessionId": res.SessionID, "text": "write"})
	var smr struct{ Message string }
	_ = json.Unmarshal(e.awaitRequest("window/showMessageRequest"), &smr)
	if !strings.Contains(smr.Message, " in "+tools.ShownPath(odd)+" wants to run write") ||
		strings.Contains(smr.Message, "\nwants to run write: notes.txt") || strings.ContainsRune(smr.Message, '\u202e') {
		t.Errorf("showMessageRequest message %q: want the directory %q on one line, visible", smr.Message, tools.ShownPath(odd))
	}
	waitAnswer(t, ch)
}

// TestStockApprovalCommands: a stock client's approval names the session
// and the file it changes (the message used to name neither); octet.approve
// finds it by an upper-case digest; octet.deny with nothing pending answers
// {resolved: 0} (it used to be an error).
func TestStockApprovalCommands(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\n")
	e := st.editor(t, Options{}, nil)
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	e.respond("window/showMessageRequest", func(json.RawMessage) (any, error) { <-never; return nil, nil })
	var res struct{ Resolved *int }
	e.mustCall("workspace/executeCommand", map[string]any{"command": "octet.deny"}, &res)
	if res.Resolved == nil || *res.Resolved != 0 {
		t.Errorf("octet.deny with nothing pending = %+v, want {resolved: 0}", res)
	}
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"})
	var smr struct{ Message string }
	_ = json.Unmarshal(e.awaitRequest("window/showMessageRequest"), &smr)
	for _, want := range []string{sid, `"test"`, st.Workspace, "File: " + file, "+goodbye world"} {
		if !strings.Contains(smr.Message, want) {
			t.Errorf("showMessageRequest message %q lacks %q", smr.Message, want)
		}
	}
	ss, err := e.srv.session(sid)
	if err != nil {
		t.Fatal(err)
	}
	var digest string
	for _, v := range ss.Pending() {
		digest = v.Digest
	}
	e.mustCall("workspace/executeCommand", map[string]any{"command": "octet.approve",
		"arguments": []any{map[string]any{"digest": strings.ToUpper(digest)}}}, &res)
	if res.Resolved == nil || *res.Resolved != 1 {
		t.Errorf("octet.approve by upper-case digest = %+v", res)
	}
	if ans := waitAnswer(t, ch); ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	if got := readFile(t, file); got != "goodbye world\n" {
		t.Errorf("a.txt = %q after octet.approve", got)
	}
}

// TestSetModelValidated: octet/setModel accepted any name, and the run
// failed later ("route not qualified"). An unknown name is refused at the
// call with the names that are allowed.
func TestSetModelValidated(t *testing.T) {
	st := newStack(t, tools.Controlled)
	e := st.editor(t, Options{}, nil)
	sid := e.newSession()
	err := e.call("octet/setModel", map[string]any{"sessionId": sid, "model": "gpt-nope"}, nil)
	if codeOf(err) != -32602 || !strings.Contains(err.Error(), `unknown model "gpt-nope"`) || !strings.Contains(err.Error(), "gpt-5.1-codex") {
		t.Errorf("setModel gpt-nope: %v, want -32602 listing the known models", err)
	}
	var eff struct{ Effective string }
	e.mustCall("octet/setModel", map[string]any{"sessionId": sid, "model": "gpt-5-2025-08-07"}, &eff)
	e.mustCall("octet/setModel", map[string]any{"sessionId": sid, "model": "gpt-test"}, &eff) // back to its own model
	if eff.Effective != "gpt-test" {
		t.Errorf("effective %q", eff.Effective)
	}
}
