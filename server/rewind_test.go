package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/host"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
	"go.lsp.dev/jsonrpc2"
)

// rewindAnswer is octet/session/rewind's result as a client decodes it.
type rewindAnswer struct {
	Changes []struct {
		Path     string `json:"path"`
		Kind     string `json:"kind"`
		Diff     string `json:"diff"`
		Conflict string `json:"conflict"`
	} `json:"changes"`
	Applied       bool     `json:"applied"`
	RewindEntryID string   `json:"rewindEntryId"`
	Head          string   `json:"head"`
	Expired       []string `json:"expired"`
}

// rewindFiles rewinds the files of session sid to entry (applied, not
// dry) and returns the answer.
func (e *fakeEditor) rewindFiles(sid, entry string) rewindAnswer {
	e.t.Helper()
	var a rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": entry, "files": true}, &a)
	return a
}

// byPath returns the answer's change of path (kind "" when absent).
func (a rewindAnswer) byPath(path string) (kind, diff, conflict string) {
	for _, c := range a.Changes {
		if c.Path == path {
			return c.Kind, c.Diff, c.Conflict
		}
	}
	return "", "", ""
}

// wantFile checks a workspace file's bytes and mode (absent: data nil).
func wantFile(t *testing.T, what, path string, data []byte, mode fs.FileMode) {
	t.Helper()
	got, err := os.ReadFile(path)
	if data == nil {
		if !os.IsNotExist(err) {
			t.Errorf("%s: %s exists (%q, %v), want it absent", what, path, got, err)
		}
		return
	}
	if err != nil || string(got) != string(data) {
		t.Errorf("%s: %s = %q, %v; want %q", what, path, got, err, data)
		return
	}
	if st, err := os.Lstat(path); err != nil || st.Mode().Perm() != mode {
		t.Errorf("%s: mode of %s = %v, %v; want %v", what, path, st.Mode().Perm(), err, mode)
	}
}

// entryIDs returns the active branch's entry ids, oldest first.
func entryIDs(t *testing.T, e *fakeEditor, sid string) []string {
	t.Helper()
	var page host.TranscriptPage
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": sid}, &page)
	ids := make([]string, len(page.Entries))
	for i, en := range page.Entries {
		ids[len(ids)-1-i] = en.ID
	}
	return ids
}

func writeMode(t *testing.T, path, data string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestSessionRewindFiles drives real edits and writes through the fake
// editor and rewinds them: a dry run changes nothing; a rewind restores
// bytes and modes (and removes a created file) and reports a file the
// user changed since as a conflict, leaving it alone; rewinding the
// rewind restores the later state; a forced path is overwritten; a
// conversation rewind moves the head.
func TestSessionRewindFiles(t *testing.T) {
	st := newStack(t, tools.UnsafeHost)
	a := filepath.Join(st.Workspace, "a.txt")
	sh := filepath.Join(st.Workspace, "run.sh")
	b := filepath.Join(st.Workspace, "new", "b.txt")
	writeMode(t, a, "one\ntwo\n", 0o640)
	writeMode(t, sh, "echo hi\n", 0o755)
	st.Provider.Enqueue(
		pt.Reply(
			pt.FunctionCall("e1", "edit", `{"path":"a.txt","old_text":"one","new_text":"1"}`),
			pt.FunctionCall("w1", "write", `{"path":"new/b.txt","content":"bee\n"}`),
			pt.FunctionCall("w2", "write", `{"path":"run.sh","content":"echo bye\n"}`),
		),
		pt.Reply(pt.FunctionCall("e2", "edit", `{"path":"a.txt","old_text":"two","new_text":"2"}`)),
		pt.Text("done"),
	)
	e, sid := st.ranGo(t, nil)
	ids := entryIDs(t, e, sid)
	start, end := ids[0], ids[len(ids)-1] // the prompt; the final answer
	wantFile(t, "after the run", a, []byte("1\n2\n"), 0o640)

	var dry rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": start, "files": true, "dryRun": true}, &dry)
	if dry.Applied || len(dry.Changes) != 4 || dry.RewindEntryID != "" {
		t.Fatalf("dry run: %+v", dry)
	}
	if kind, diff, _ := dry.byPath("a.txt"); kind != "modify" || diff != "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-1\n-2\n+one\n+two\n" {
		t.Errorf("dry run of a.txt: %s %q", kind, diff)
	}
	if kind, _, _ := dry.byPath("new/b.txt"); kind != "delete" {
		t.Errorf("dry run of new/b.txt: %s", kind)
	}
	if kind, diff, _ := dry.byPath("new"); kind != "delete" || diff != "directory new removed" {
		t.Errorf("dry run of new, the directory the write created: %s %q", kind, diff)
	}
	wantFile(t, "after the dry run", a, []byte("1\n2\n"), 0o640)
	wantFile(t, "after the dry run", b, []byte("bee\n"), 0o644)
	if got := entryIDs(t, e, sid); len(got) != len(ids) {
		t.Errorf("a dry run appended to the ledger: %v", got)
	}

	// The user changes run.sh after octet's write: a conflict.
	writeMode(t, sh, "user\n", 0o755)
	rw := e.rewindFiles(sid, start)
	if !rw.Applied || rw.RewindEntryID == "" || rw.Head != rw.RewindEntryID {
		t.Fatalf("rewind: %+v", rw)
	}
	if _, _, c := rw.byPath("run.sh"); !strings.Contains(c, "changed since octet last changed it") {
		t.Errorf("conflict of run.sh = %q", c)
	}
	wantFile(t, "after the rewind", a, []byte("one\ntwo\n"), 0o640)
	wantFile(t, "after the rewind", b, nil, 0)
	wantFile(t, "after the rewind", filepath.Dir(b), nil, 0)
	wantFile(t, "after the rewind", sh, []byte("user\n"), 0o755)

	// Rewinding the rewind restores the later state.
	back := e.rewindFiles(sid, end)
	if !back.Applied || len(back.Changes) != 3 {
		t.Fatalf("rewind of the rewind: %+v", back)
	}
	wantFile(t, "after the rewind of the rewind", a, []byte("1\n2\n"), 0o640)
	wantFile(t, "after the rewind of the rewind", b, []byte("bee\n"), 0o644)
	wantFile(t, "after the rewind of the rewind", sh, []byte("user\n"), 0o755)

	// Forced, the conflicting path is overwritten; the conversation
	// moves back too.
	var forced rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": start, "files": true, "conversation": true, "force": []string{"run.sh"}}, &forced)
	if !forced.Applied || forced.Head != start {
		t.Fatalf("forced rewind: %+v", forced)
	}
	if _, _, c := forced.byPath("run.sh"); c != "" {
		t.Errorf("forced path still a conflict: %q", c)
	}
	wantFile(t, "after the forced rewind", a, []byte("one\ntwo\n"), 0o640)
	wantFile(t, "after the forced rewind", b, nil, 0)
	wantFile(t, "after the forced rewind", sh, []byte("echo hi\n"), 0o755)
	if got := entryIDs(t, e, sid); len(got) != 1 || got[0] != start {
		t.Errorf("branch after a conversation rewind: %v", got)
	}

	// And back again, from the other branch: to the states octet's ledger
	// holds for that entry (run.sh as octet wrote it; the user's change is
	// kept in the forced rewind's own pre-image).
	var again rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": back.RewindEntryID, "files": true, "conversation": true}, &again)
	if !again.Applied || again.Head != back.RewindEntryID || len(again.Changes) != 4 {
		t.Fatalf("rewind to the other branch: %+v", again)
	}
	wantFile(t, "back on the other branch", sh, []byte("echo bye\n"), 0o755)
	wantFile(t, "back on the other branch", a, []byte("1\n2\n"), 0o640)
}

// TestSessionRewindOpenDocument: a rewind of an open document the editor
// edits goes to the editor as workspace/applyEdit with the buffer's
// version, like the agent's edit did; the disk is untouched. A prompt
// while the rewind waits for the editor is refused as busy.
func TestSessionRewindOpenDocument(t *testing.T) {
	_, e, b, file := docEditStack(t, Options{}, docCaps())
	var sid string
	prompted := make(chan error, 1)
	calls := 0
	e.respond("workspace/applyEdit", func(params json.RawMessage) (any, error) {
		if calls++; calls == 2 { // the rewind's
			go func() { prompted <- e.call("octet/prompt", map[string]any{"sessionId": sid, "text": "now"}, nil) }()
			time.Sleep(300 * time.Millisecond)
		}
		return b.applyEdits(params)
	})
	sid = e.newSession()
	if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit"})); ans.Outcome != "completed" {
		t.Fatalf("answer %+v\n%s", ans, e.dump())
	}
	if text, _ := b.get(); text != "goodbye world\ntyped 😀 here\nthird\n" {
		t.Fatalf("buffer after the edit %q", text)
	}
	var rw rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": entryIDs(t, e, sid)[0], "files": true}, &rw)
	if !rw.Applied || len(rw.Changes) != 1 || rw.Changes[0].Conflict != "" {
		t.Fatalf("rewind: %+v", rw)
	}
	text, ver := b.get()
	if text != "hello world\ntyped 😀 here\nthird\n" {
		t.Errorf("buffer after the rewind %q", text)
	}
	if len(b.edits) != 2 || b.edits[1].Edit.DocumentChanges[0].TextDocument.Version != ver-1 {
		t.Errorf("applyEdit requests %+v (buffer version %d)", b.edits, ver)
	}
	if got := readFile(t, file); got != "hello world\nthird\n" {
		t.Errorf("the rewind wrote behind the buffer: disk %q", got)
	}
	if err := <-prompted; codeOf(err) != CodeSessionBusy || !strings.Contains(err.Error(), "is being rewound") {
		t.Errorf("prompt during the rewind: %v", err)
	}
}

// TestSessionRewindEditorRefuses: the editor refuses the rewind's
// applyEdit of an open document. The path's conflict says so and what to
// do — rewind again, not the model's "read the file again" — and doing
// so finishes the rewind.
func TestSessionRewindEditorRefuses(t *testing.T) {
	_, e, b, _ := docEditStack(t, Options{}, docCaps())
	calls := 0
	e.respond("workspace/applyEdit", func(params json.RawMessage) (any, error) {
		if calls++; calls == 2 { // the rewind's first
			return map[string]any{"applied": false, "failureReason": "the buffer is locked"}, nil
		}
		return b.applyEdits(params)
	})
	sid := e.newSession()
	if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit"})); ans.Outcome != "completed" {
		t.Fatalf("answer %+v\n%s", ans, e.dump())
	}
	start := entryIDs(t, e, sid)[0]
	rw := e.rewindFiles(sid, start)
	if _, _, c := rw.byPath("a.txt"); rw.Applied || !strings.Contains(c, "the buffer is locked") || strings.Contains(c, "read the file again") || !strings.Contains(c, "rewind to the same entry again") {
		t.Fatalf("refused rewind: %+v", rw)
	}
	again := e.rewindFiles(sid, start)
	if !again.Applied || len(again.Changes) != 1 || again.Changes[0].Conflict != "" {
		t.Fatalf("rewind again: %+v", again)
	}
	if text, _ := b.get(); text != "hello world\ntyped 😀 here\nthird\n" {
		t.Errorf("buffer after the rewind %q", text)
	}
}

// TestSessionRewindHoldsTheSession: a rewind holds its session as a run
// does. While it waits for the editor's applyEdit answer, the session is
// neither released for being idle (the idle timeout passes meanwhile)
// nor closed and deleted by octet/session/delete (refused as busy); the
// rewind then completes. Before, a rewinding session counted as idle:
// the release and the delete closed its file under the rewind.
func TestSessionRewindHoldsTheSession(t *testing.T) {
	_, e, b, _ := docEditStack(t, Options{SessionIdleTimeout: 60 * time.Millisecond}, docCaps())
	var sid string
	deleted := make(chan error, 1)
	openAfterIdle := make(chan bool, 1)
	calls := 0
	e.respond("workspace/applyEdit", func(params json.RawMessage) (any, error) {
		if calls++; calls == 2 { // the rewind's
			go func() { deleted <- e.call("octet/session/delete", map[string]any{"sessionId": sid}, nil) }()
			time.Sleep(400 * time.Millisecond)
			openAfterIdle <- isOpen(e.srv, sid)
		}
		return b.applyEdits(params)
	})
	sid = e.newSession()
	if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit"})); ans.Outcome != "completed" {
		t.Fatalf("answer %+v\n%s", ans, e.dump())
	}
	var rw rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": entryIDs(t, e, sid)[0], "files": true}, &rw)
	if !rw.Applied || len(rw.Changes) != 1 {
		t.Fatalf("rewind: %+v", rw)
	}
	if !<-openAfterIdle {
		t.Error("the session was released for being idle during its rewind")
	}
	if err := <-deleted; codeOf(err) != CodeSessionBusy || !strings.Contains(err.Error(), "is being rewound") {
		t.Errorf("delete during the rewind: %v, want busy (being rewound)", err)
	}
	if text, _ := b.get(); text != "hello world\ntyped 😀 here\nthird\n" {
		t.Errorf("buffer after the rewind %q", text)
	}
}

// TestSessionRewindPaths: a files rewind limited to paths restores only
// those (an editor's per-file revert); the others keep octet's changes,
// and a later rewind of the rest still restores them.
func TestSessionRewindPaths(t *testing.T) {
	st := newStack(t, tools.UnsafeHost)
	a := filepath.Join(st.Workspace, "a.txt")
	b := filepath.Join(st.Workspace, "b.txt")
	writeMode(t, a, "one\n", 0o644)
	writeMode(t, b, "bee\n", 0o644)
	st.Provider.Enqueue(
		pt.Reply(
			pt.FunctionCall("e1", "edit", `{"path":"a.txt","old_text":"one","new_text":"1"}`),
			pt.FunctionCall("e2", "edit", `{"path":"b.txt","old_text":"bee","new_text":"B"}`),
		),
		pt.Text("done"),
	)
	e, sid := st.ranGo(t, nil)
	start := entryIDs(t, e, sid)[0]
	var one rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": start, "files": true, "paths": []string{"b.txt"}}, &one)
	if !one.Applied || len(one.Changes) != 1 || one.Changes[0].Path != "b.txt" {
		t.Fatalf("rewind of b.txt: %+v", one)
	}
	wantFile(t, "after reverting b.txt", a, []byte("1\n"), 0o644)
	wantFile(t, "after reverting b.txt", b, []byte("bee\n"), 0o644)
	rest := e.rewindFiles(sid, start)
	if !rest.Applied || len(rest.Changes) != 1 || rest.Changes[0].Path != "a.txt" {
		t.Fatalf("rewind of the rest: %+v", rest)
	}
	wantFile(t, "after reverting the rest", a, []byte("one\n"), 0o644)
}

// TestSessionRewindUnknownPath: a rewind limited to a path octet did not
// change after the entry (here spelled as the changes do not name it) is
// refused with -32602 saying so, rather than answered as done with
// nothing to restore; the file is left as it is.
func TestSessionRewindUnknownPath(t *testing.T) {
	st := newStack(t, tools.UnsafeHost)
	a := filepath.Join(st.Workspace, "a.txt")
	writeMode(t, a, "one\n", 0o644)
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("e1", "edit", `{"path":"a.txt","old_text":"one","new_text":"1"}`)),
		pt.Text("done"),
	)
	e, sid := st.ranGo(t, nil)
	start := entryIDs(t, e, sid)[0]
	var res rewindAnswer
	err := e.call("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": start, "files": true, "paths": []string{"./a.txt"}}, &res)
	var rpcErr *jsonrpc2.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc2.InvalidParams || !strings.Contains(rpcErr.Message, `did not change "./a.txt"`) {
		t.Errorf("rewind of ./a.txt: %+v, %v (want -32602 naming the path)", res, err)
	}
	wantFile(t, "after the refused rewind", a, []byte("1\n"), 0o644)
}

// TestSessionRewindReportsExpired: once the change store's cap expired an
// earlier call's checkpoint (its images are gone), octet/session/rewind
// past it names that call's entry in expired and reports its path as a
// conflict that says why (the file is left alone), while a later call's
// checkpoint still rewinds.
func TestSessionRewindReportsExpired(t *testing.T) {
	st := newStack(t, tools.UnsafeHost)
	st.StoreMax = 3000 // each write's images are ~2 KB: the second expires the first
	a, b := filepath.Join(st.Workspace, "a.txt"), filepath.Join(st.Workspace, "b.txt")
	writeMode(t, a, strings.Repeat("a", 1000), 0o644)
	writeMode(t, b, strings.Repeat("b", 1000), 0o644)
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("w1", "write", fmt.Sprintf(`{"path":"a.txt","content":%q}`, strings.Repeat("A", 1000)))),
		pt.Text("first done"),
		pt.Reply(pt.FunctionCall("w2", "write", fmt.Sprintf(`{"path":"b.txt","content":%q}`, strings.Repeat("B", 1000)))),
		pt.Text("second done"),
	)
	e := st.editor(t, Options{}, nil)
	sid := e.newSession()
	for _, text := range []string{"first", "second"} {
		if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": text})); ans.Outcome != "completed" {
			t.Fatalf("run %s: %+v", text, ans)
		}
	}
	var page host.TranscriptPage
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": sid}, &page)
	var w1, w2 string
	for _, en := range page.Entries {
		raw, _ := json.Marshal(en)
		switch {
		case strings.Contains(string(raw), `"w1"`) && strings.Contains(string(raw), "tool_result"):
			w1 = en.ID
		case strings.Contains(string(raw), `"w2"`) && strings.Contains(string(raw), "tool_result"):
			w2 = en.ID
		}
	}
	ids := entryIDs(t, e, sid)
	var dry rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": ids[0], "files": true, "dryRun": true}, &dry)
	if len(dry.Expired) != 1 || dry.Expired[0] != w1 || w1 == "" {
		t.Fatalf("expired %v, want [%s] (the first write's result; w2 is %s)", dry.Expired, w1, w2)
	}
	if _, _, c := dry.byPath("a.txt"); !strings.Contains(c, "cannot be rewound") || !strings.Contains(c, "expired") {
		t.Errorf("the expired write's path: conflict %q, want it to say it cannot be rewound and why", c)
	}
	if kind, _, c := dry.byPath("b.txt"); kind != "modify" || c != "" {
		t.Errorf("the later write's path: %q (conflict %q), want modify", kind, c)
	}
	var rw rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": ids[0], "files": true}, &rw)
	if !rw.Applied || len(rw.Expired) != 1 {
		t.Fatalf("rewind: %+v", rw)
	}
	wantFile(t, "after the rewind", a, []byte(strings.Repeat("A", 1000)), 0o644)
	wantFile(t, "after the rewind", b, []byte(strings.Repeat("b", 1000)), 0o644)
}

// resultEntry returns the id of the entry holding call's tool result.
func resultEntry(t *testing.T, e *fakeEditor, sid, call string) string {
	t.Helper()
	var page host.TranscriptPage
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": sid}, &page)
	for _, en := range page.Entries {
		if en.Result != nil && en.Result.CallID == call {
			return en.ID
		}
	}
	t.Fatalf("no result of %s in the transcript", call)
	return ""
}

// TestSessionRewindRecreatesParents: a (forced) rewind that restores a
// file into directories removed since (not by octet) creates them and
// records them, parents first, before the file, so a rewind past that
// rewind removes them again with the file.
func TestSessionRewindRecreatesParents(t *testing.T) {
	st := newStack(t, tools.UnsafeHost)
	a := filepath.Join(st.Workspace, "lib", "deep", "a.txt")
	if err := os.MkdirAll(filepath.Dir(a), 0o755); err != nil {
		t.Fatal(err)
	}
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("w1", "write", `{"path":"lib/deep/a.txt","content":"v1\n"}`)),
		pt.Reply(pt.FunctionCall("e1", "edit", `{"path":"lib/deep/a.txt","old_text":"v1","new_text":"v2"}`)),
		pt.Text("done"),
	)
	e, sid := st.ranGo(t, nil)
	start := entryIDs(t, e, sid)[0]
	written := resultEntry(t, e, sid, "w1")
	if err := os.RemoveAll(filepath.Join(st.Workspace, "lib")); err != nil { // the user, not octet
		t.Fatal(err)
	}
	var rw rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": written, "files": true, "force": []string{"lib/deep/a.txt"}}, &rw)
	if !rw.Applied || len(rw.Changes) != 3 {
		t.Fatalf("forced rewind: %+v", rw)
	}
	for i, d := range []string{"lib", "lib/deep"} {
		if c := rw.Changes[i]; c.Path != d || c.Kind != "add" || c.Diff != "directory "+d+" created (mode 0755)" || c.Conflict != "" {
			t.Errorf("forced rewind, change %d = %+v, want directory %s created", i, c, d)
		}
	}
	wantFile(t, "after the forced rewind", a, []byte("v1\n"), 0o644)
	if fi, err := os.Stat(filepath.Dir(a)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the directory the rewind created: %v, %v", fi, err)
	}

	// Before the write: the file and the directories the rewind made go.
	back := e.rewindFiles(sid, start)
	if !back.Applied || len(back.Changes) != 3 {
		t.Fatalf("rewind to the start: %+v", back)
	}
	if _, err := os.Lstat(filepath.Join(st.Workspace, "lib")); !os.IsNotExist(err) {
		t.Errorf("after the rewind to the start, lib: %v", err)
	}
}

// TestSessionRewindKeepsDirItRestoresInto: a directory a rewind's plan
// would remove while it restores a file in it (the state octet knew of
// the directory at the entry is older than the file's: the user removed
// the directory between two of octet's changes) is kept, without a
// conflict — the plan needs it.
func TestSessionRewindKeepsDirItRestoresInto(t *testing.T) {
	st := newStack(t, tools.UnsafeHost)
	a := filepath.Join(st.Workspace, "lib", "deep", "a.txt")
	writeMode(t, a, "one\n", 0o644)
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("e1", "edit", `{"path":"lib/deep/a.txt","old_text":"one","new_text":"1"}`)),
		pt.Text("done"),
	)
	e, sid := st.ranGo(t, nil)
	ids := entryIDs(t, e, sid)
	start, end := ids[0], ids[len(ids)-1]
	if err := os.RemoveAll(filepath.Join(st.Workspace, "lib")); err != nil {
		t.Fatal(err)
	}
	var rw rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": start, "files": true, "force": []string{"lib/deep/a.txt"}}, &rw)
	if !rw.Applied || len(rw.Changes) != 3 {
		t.Fatalf("forced rewind: %+v", rw)
	}
	wantFile(t, "after the forced rewind", a, []byte("one\n"), 0o644)

	// Back to the end: the file as octet's edit left it; the directories,
	// absent just before the rewind made them, stay for it.
	back := e.rewindFiles(sid, end)
	if !back.Applied || len(back.Changes) != 1 || back.Changes[0].Path != "lib/deep/a.txt" || back.Changes[0].Conflict != "" {
		t.Fatalf("rewind to the end: %+v", back)
	}
	wantFile(t, "after the rewind to the end", a, []byte("1\n"), 0o644)
}
