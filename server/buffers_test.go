package server

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// saveDocsCaps are docCaps with experimental.octet.saveDocuments.
func saveDocsCaps() map[string]any {
	c := docCaps()
	c["experimental"].(map[string]any)["octet"].(map[string]any)["saveDocuments"] = true
	return c
}

// save is the buffer's :write: the text goes to disk and didSave follows.
func (b *buffer) save(t *testing.T) {
	text, ver := b.get()
	writeFile(t, strings.TrimPrefix(b.uri, "file://"), text)
	b.e.notify("textDocument/didSave", map[string]any{"textDocument": map[string]any{"uri": b.uri, "version": ver}})
}

// bufferStack is an editor with a.txt open (saved) whose model edits
// a.txt through the editor, then runs command through bash, then
// answers.
func bufferStack(t *testing.T, policy tools.Policy, caps map[string]any, command string) (*stack, *fakeEditor, *buffer, string) {
	t.Helper()
	st := newStack(t, policy)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\n")
	st.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"goodbye"}`)),
		providertest.Reply(providertest.FunctionCall("call_2", "bash", string(mustJSON(map[string]string{"command": command})))),
		providertest.Text("Done."),
	)
	e := newEditor(t, Options{Runtime: st.Runtime})
	e.initializeWith(st.Workspace, caps)
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("octet/confirmEffect", confirmAnswer("approve", ""))
	b := e.openBuffer(file, "hello world\n")
	e.respond("workspace/applyEdit", b.applyEdits)
	awaitOverlay(t, e, st.Workspace, file, "hello world\n")
	return st, e, b, file
}

// requestsOf returns the params of every request of method the editor got.
func (e *fakeEditor) requestsOf(method string) []json.RawMessage {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []json.RawMessage
	for _, r := range e.requests {
		if r.Method == method {
			out = append(out, r.Params)
		}
	}
	return out
}

// TestSaveDocumentsBeforeCommand: the agent edits an open document (the
// buffer changes, the file does not), then runs a command. The command
// used to read the unchanged file with no warning (go test of the old
// code). Now, before it runs, octet asks an editor that advertises
// saveDocuments to save exactly that buffer: the command sees the edit.
func TestSaveDocumentsBeforeCommand(t *testing.T) {
	st, e, b, file := bufferStack(t, tools.Controlled, saveDocsCaps(), "cat a.txt")
	e.respond("octet/saveDocuments", func(params json.RawMessage) (any, error) {
		var p saveDocumentsParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		b.save(t)
		return map[string]any{"saved": p.URIs, "declined": []string{}}, nil
	})
	sid := e.newSession()
	if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit, then test"})); ans.Outcome != "completed" {
		t.Fatalf("answer %+v\n%s", ans, e.dump())
	}
	reqs := e.requestsOf("octet/saveDocuments")
	var p saveDocumentsParams
	if len(reqs) != 1 || json.Unmarshal(reqs[0], &p) != nil || len(p.URIs) != 1 || p.URIs[0] != b.uri || !strings.Contains(p.Reason, "bash") {
		t.Fatalf("octet/saveDocuments requests %s, want one for %s", reqs, b.uri)
	}
	out := lastToolOutputs(st)
	if len(out) != 2 || !strings.Contains(out[1], "goodbye world") || strings.Contains(out[1], "Not saved") {
		t.Errorf("the command saw %q, want the agent's edit, saved", out)
	}
	if got := readFile(t, file); got != "goodbye world\n" {
		t.Errorf("a.txt on disk = %q", got)
	}
}

// TestUnsavedNamedInApprovalAndResult: an editor that declines the save,
// or cannot be asked (no saveDocuments), leaves the buffer unsaved; the
// command's approval and its result name the file, so neither the
// person nor the model takes the command's view for the editor's. A
// buffer only the user changed is never saved by octet, only named.
func TestUnsavedNamedInApprovalAndResult(t *testing.T) {
	for _, tc := range []struct {
		name string
		caps map[string]any
	}{
		{"declined", saveDocsCaps()},
		{"no saveDocuments", docCaps()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, e, _, file := bufferStack(t, tools.ControlledBashApproval, tc.caps, "cat a.txt b.txt")
			writeFile(t, filepath.Join(st.Workspace, "b.txt"), "on disk\n")
			user := e.openBuffer(filepath.Join(st.Workspace, "b.txt"), "on disk\n")
			user.typeAt(0, 0, "typed ")
			awaitOverlay(t, e, st.Workspace, filepath.Join(st.Workspace, "b.txt"), "typed on disk\n")
			e.respond("octet/saveDocuments", func(params json.RawMessage) (any, error) {
				var p saveDocumentsParams
				_ = json.Unmarshal(params, &p)
				return map[string]any{"saved": []string{}, "declined": p.URIs}, nil
			})
			sid := e.newSession()
			if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit, then test"})); ans.Outcome != "completed" {
				t.Fatalf("answer %+v\n%s", ans, e.dump())
			}
			reqs := e.requestsOf("octet/saveDocuments")
			wantAsked := tc.caps["experimental"].(map[string]any)["octet"].(map[string]any)["saveDocuments"] == true
			if wantAsked != (len(reqs) == 1) || (wantAsked && strings.Contains(string(reqs[0]), "b.txt")) {
				t.Errorf("octet/saveDocuments requests %s (want one, for a.txt only: %v)", reqs, wantAsked)
			}
			const note = "Not saved in the editor (this call reads the file on disk, not the editor's text): a.txt, b.txt"
			var asked []confirmParams
			for _, raw := range e.requestsOf("octet/confirmEffect") {
				var p confirmParams
				_ = json.Unmarshal(raw, &p)
				asked = append(asked, p)
			}
			if len(asked) != 2 || asked[1].Tool != "bash" || !strings.Contains(asked[1].Detail, note) {
				t.Errorf("bash approval %+v, want its detail to name the unsaved files", asked)
			}
			out := lastToolOutputs(st)
			if len(out) != 2 || !strings.HasPrefix(out[1], note) || !strings.Contains(out[1], "hello world") {
				t.Errorf("bash result %q, want the note first and the disk's text", out)
			}
			if got := readFile(t, file); got != "hello world\n" {
				t.Errorf("a.txt on disk = %q, want it unsaved", got)
			}
		})
	}
}
