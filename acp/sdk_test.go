package acp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestSDKPromptStreaming: initialize negotiates version 1 with loadSession
// and embedded context; a prompt with a resource link and an embedded
// resource gives the model both; the answer streams as
// agent_message_chunk (reasoning as agent_thought_chunk) and ends with
// end_turn; usage arrives as usage_update (the context filled of the
// model's window, the cost so far), never as a chunk, and no _octet/*
// notification reaches a client that did not ask for them; an unknown
// session is an error and the connection goes on.
func TestSDKPromptStreaming(t *testing.T) {
	w := newWorld(t)
	writeFile(t, filepath.Join(w.ws, "notes.txt"), "LINKED NOTES\n")
	w.prov.Enqueue(providertest.Reply(providertest.Reasoning("enc", "thinking about it"), providertest.Message("Hello from octet.")).
		WithUsage(provider.Usage{InputTokens: 10, OutputTokens: 5}))
	var got struct {
		sdkOut
		UnknownSession struct {
			Code    int
			Message string
		}
	}
	w.run(t, "stream", &got)
	if got.Init.ProtocolVersion != 1 || !got.Init.AgentCapabilities.LoadSession || !got.Init.AgentCapabilities.PromptCapabilities.EmbeddedContext {
		t.Errorf("initialize answered %+v", got.Init)
	}
	if got.Answer.StopReason != "end_turn" || got.ExitCode != 0 {
		t.Errorf("stopReason %q, exit %d", got.Answer.StopReason, got.ExitCode)
	}
	if s := got.text("agent_message_chunk"); s != "Hello from octet." {
		t.Errorf("agent_message_chunk text %q", s)
	}
	if s := got.text("agent_thought_chunk"); !strings.Contains(s, "thinking about it") {
		t.Errorf("agent_thought_chunk text %q", s)
	}
	if len(got.Ext) != 0 {
		t.Errorf("_octet/* notifications to a client that did not ask for them: %+v", got.Ext)
	}
	var usage []update
	for _, u := range got.Updates {
		if u.SessionUpdate == "usage_update" {
			usage = append(usage, u)
		}
	}
	// 10 input and 5 output tokens of gpt-5.1-codex ($1.25 and $10 per
	// million).
	if len(usage) != 1 || usage[0].Used != 15 || usage[0].Size != 400_000 || usage[0].Cost == nil ||
		usage[0].Cost.Amount != 0.0000625 || usage[0].Cost.Currency != "USD" {
		t.Errorf("usage_update %+v", usage)
	}
	reqs := w.prov.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d provider requests", len(reqs))
	}
	input := string(reqs[0].Raw)
	for _, want := range []string{"hello", "LINKED NOTES", "EMBEDDED SPEC", "file:///elsewhere/spec.md"} {
		if !strings.Contains(input, want) {
			t.Errorf("model input lacks %q: %s", want, input)
		}
	}
	if got.UnknownSession.Code != codeResourceNotFound {
		t.Errorf("prompt of an unknown session: %+v", got.UnknownSession)
	}
}

// TestSDKApprovals: an edit answered allow_always records the exact-scope
// standing rule; the next edit of the same file is admitted without a
// permission request; an edit of another file is asked again, answered
// reject_once, and the model sees the denial.
func TestSDKApprovals(t *testing.T) {
	w := newWorld(t)
	writeFile(t, filepath.Join(w.ws, "a.txt"), "hello\n")
	writeFile(t, filepath.Join(w.ws, "b.txt"), "bee\n")
	edit := func(id, path, from, to string) providertest.Turn {
		return providertest.Reply(providertest.FunctionCall(id, "edit", `{"path":"`+path+`","old_text":"`+from+`","new_text":"`+to+`"}`))
	}
	w.prov.Enqueue(edit("call_1", "a.txt", "hello", "hi"), edit("call_2", "a.txt", "hi", "hey"),
		edit("call_3", "b.txt", "bee", "wasp"), providertest.Text("Done."))
	var got sdkOut
	w.run(t, "approvals", &got)
	if got.Answer.StopReason != "end_turn" {
		t.Fatalf("stopReason %q", got.Answer.StopReason)
	}
	if asked := got.asked(); !slices.Equal(asked, []string{"call_1", "call_3"}) {
		t.Errorf("asked for %v, want call_1 and call_3 (call_2 is covered by the allow_always rule)", asked)
	}
	p := got.Permissions[0]
	if !slices.Equal(p.Options, []string{"allow_once", "allow_always", "reject_once", "reject_always"}) || p.Kind != "edit" {
		t.Errorf("permission request %+v", p)
	}
	if p.Title != "`edit a.txt`" || fencedBody(t, permissionText(p.Content), "diff") != "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-hello\n+hi" {
		t.Errorf("permission request %q, content %v: want octet's diff of the edit", p.Title, p.Content)
	}
	if s := readFile(t, filepath.Join(w.ws, "a.txt")); s != "hey\n" {
		t.Errorf("a.txt = %q", s)
	}
	if s := readFile(t, filepath.Join(w.ws, "b.txt")); s != "bee\n" {
		t.Errorf("b.txt = %q: the rejected edit ran", s)
	}
	for id, want := range map[string]string{"call_1": "completed", "call_2": "completed", "call_3": "failed"} {
		st := got.statuses(id)
		if len(st) == 0 || st[0] != "tool_call:pending" || st[len(st)-1] != "tool_call_update:"+want {
			t.Errorf("%s statuses %v, want pending ... %s", id, st, want)
		}
	}
	if !slices.ContainsFunc(got.Updates, func(u update) bool {
		return u.ToolCallID == "call_1" && len(u.Locations) == 1 && u.Locations[0].Path == filepath.Join(w.ws, "a.txt")
	}) {
		t.Error("no tool_call with a.txt's location")
	}
	// The denial reached the model: the request after call_3 carries its
	// function_call_output saying so.
	reqs := w.prov.Requests()
	last := reqs[len(reqs)-1]
	out := callOutput(t, last.Body, "call_3")
	if !strings.Contains(strings.ToLower(out), "denied") && !strings.Contains(strings.ToLower(out), "not approved") {
		t.Errorf("model saw call_3's result %q, want a denial", out)
	}
}

// callOutput returns the function_call_output of callID in a Responses
// request body.
func callOutput(t *testing.T, body map[string]any, callID string) string {
	t.Helper()
	input, _ := body["input"].([]any)
	for _, it := range input {
		m, _ := it.(map[string]any)
		if m["type"] == "function_call_output" && m["call_id"] == callID {
			s, _ := m["output"].(string)
			return s
		}
	}
	b, _ := json.Marshal(body)
	t.Fatalf("no function_call_output for %s in %s", callID, b)
	return ""
}

// TestSDKCancel: session/cancel after the first chunk of a stalled answer
// ends the prompt with stopReason cancelled; session/cancel while a
// permission request is pending ends that prompt too, without waiting
// for the client's answer to the request, and the call does not run.
func TestSDKCancel(t *testing.T) {
	w := newWorld(t)
	w.prov.Enqueue(providertest.Text("Once upon a time, and then it went on ").StallAfter(6),
		providertest.Reply(providertest.FunctionCall("call_1", "bash", `{"command":"touch made"}`)))
	var got struct {
		sdkOut
		First, Second struct{ StopReason string }
	}
	w.run(t, "cancel", &got)
	if got.First.StopReason != "cancelled" || got.Second.StopReason != "cancelled" {
		t.Fatalf("stop reasons %q and %q, want cancelled twice", got.First.StopReason, got.Second.StopReason)
	}
	if got.text("agent_message_chunk") == "" {
		t.Error("no chunk streamed before the cancel")
	}
	if asked := got.asked(); !slices.Equal(asked, []string{"call_1"}) {
		t.Errorf("asked for %v", asked)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "made")); err == nil {
		t.Error("the cancelled call ran")
	}
}

// TestSDKLoad: a session answered by one octet acp process is loaded by
// another: session/load replays its prompt and answer as session/update
// before answering, and the session goes on; session/set_mode takes a
// stricter policy and refuses a looser one.
func TestSDKLoad(t *testing.T) {
	w := newWorld(t)
	w.prov.Enqueue(providertest.Text("I will remember."), providertest.Text("Still here."))
	var got struct {
		First struct {
			sdkOut
			SessionID string
		}
		Second struct {
			sdkOut
			Replayed int
			Loaded   struct {
				Modes struct {
					CurrentModeID  string
					AvailableModes []struct{ ID, Description string }
				}
			}
			Looser struct{ Code int }
		}
	}
	w.run(t, "load", &got)
	second := got.Second
	if got.First.Answer.StopReason != "end_turn" || second.Answer.StopReason != "end_turn" {
		t.Fatalf("stop reasons %q, %q", got.First.Answer.StopReason, second.Answer.StopReason)
	}
	replayed := sdkOut{Updates: second.Updates[:second.Replayed]}
	if s := replayed.text("user_message_chunk"); s != "remember this" {
		t.Errorf("replayed user text %q", s)
	}
	if s := replayed.text("agent_message_chunk"); s != "I will remember." {
		t.Errorf("replayed answer %q", s)
	}
	if m := second.Loaded.Modes; m.CurrentModeID != "controlled" || len(m.AvailableModes) != 2 {
		t.Errorf("modes %+v: want controlled current, two modes (unsafe_host is looser than the launch policy)", m)
	}
	for _, m := range second.Loaded.Modes.AvailableModes {
		// Each mode says which OS sandbox its commands run in (or that
		// this host has none).
		if !strings.Contains(m.Description, "OS sandbox") {
			t.Errorf("mode %s does not state the sandbox: %q", m.ID, m.Description)
		}
	}
	if second.Looser.Code != codeInvalidParams {
		t.Errorf("set_mode unsafe_host: %+v", second.Looser)
	}
	reqs := w.prov.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Raw), "I will remember.") {
		t.Errorf("the loaded session's prompt did not carry the earlier conversation: %d requests", len(reqs))
	}
}

// TestSDKClientOwnedWrite: with fs.readTextFile and fs.writeTextFile the
// edit is computed on the editor's buffer (read through
// fs/read_text_file) and, once approved, applied through
// fs/write_text_file; the file on disk is not touched.
func TestSDKClientOwnedWrite(t *testing.T) {
	w := newWorld(t)
	path := filepath.Join(w.ws, "a.txt")
	writeFile(t, path, "hello on disk\n")
	w.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"unsaved","new_text":"saved"}`)),
		providertest.Text("Fixed."))
	var got struct {
		sdkOut
		Buffers map[string]string
	}
	w.run(t, "fswrite", &got)
	if got.Answer.StopReason != "end_turn" {
		t.Fatalf("stopReason %q", got.Answer.StopReason)
	}
	if len(got.Writes) != 1 || got.Writes[0].Path != path || got.Writes[0].Content != "hello saved\n" {
		t.Errorf("fs/write_text_file calls %+v", got.Writes)
	}
	if !slices.Contains(got.Reads, path) {
		t.Errorf("fs/read_text_file calls %v", got.Reads)
	}
	if s := readFile(t, path); s != "hello on disk\n" {
		t.Errorf("disk file %q: the write went behind the editor", s)
	}
	if asked := got.asked(); !slices.Equal(asked, []string{"call_1"}) {
		t.Errorf("asked for %v", asked)
	}
}
