package server

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
	"go.lsp.dev/jsonrpc2"
)

// docCaps are client capabilities of an editor that applies edits.
func docCaps(encodings ...string) map[string]any {
	c := map[string]any{
		"window":    map[string]any{"workDoneProgress": true},
		"workspace": map[string]any{"applyEdit": true, "workspaceEdit": map[string]any{"documentChanges": true}},
		"experimental": map[string]any{"octet": map[string]any{
			"confirmEffect": true, "events": true,
		}},
	}
	if len(encodings) > 0 {
		c["general"] = map[string]any{"positionEncodings": encodings}
	}
	return c
}

// initializeWith performs the handshake with the given capabilities.
func (e *fakeEditor) initializeWith(root string, caps map[string]any) map[string]any {
	e.t.Helper()
	var res map[string]any
	e.mustCall("initialize", map[string]any{"processId": nil, "rootUri": "file://" + root, "capabilities": caps}, &res)
	e.notify("initialized", map[string]any{})
	return res
}

// buffer is the fake editor's model of one open document: its text and
// version, changed by "typing" (incremental didChange) and by applying
// workspace/applyEdit, with an undo stack.
type buffer struct {
	e    *fakeEditor
	uri  string
	mu   sync.Mutex
	text string
	ver  int32
	undo []string
	// edits records the applyEdit requests received.
	edits []applyEditParams
}

func (e *fakeEditor) openBuffer(path, text string) *buffer {
	b := &buffer{e: e, uri: "file://" + path, text: text, ver: 1}
	e.notify("textDocument/didOpen", map[string]any{"textDocument": map[string]any{
		"uri": b.uri, "languageId": "plaintext", "version": 1, "text": text,
	}})
	return b
}

// typeAt inserts s at (line, utf-16 character), as an incremental change.
func (b *buffer) typeAt(line, char int, s string) {
	b.mu.Lock()
	pos := lspPosition{Line: line, Character: char}
	off := offsetOf([]byte(b.text), pos, encUTF16)
	b.undo = append(b.undo, b.text)
	b.text = b.text[:off] + s + b.text[off:]
	b.ver++
	ver := b.ver
	b.mu.Unlock()
	b.e.notify("textDocument/didChange", map[string]any{
		"textDocument":   map[string]any{"uri": b.uri, "version": ver},
		"contentChanges": []any{map[string]any{"range": lspRange{Start: pos, End: pos}, "text": s}},
	})
}

// setText replaces the whole text (full-sync change), e.g. undo.
func (b *buffer) setText(s string) {
	b.mu.Lock()
	b.text = s
	b.ver++
	ver := b.ver
	b.mu.Unlock()
	b.e.notify("textDocument/didChange", map[string]any{
		"textDocument":   map[string]any{"uri": b.uri, "version": ver},
		"contentChanges": []any{map[string]any{"text": s}},
	})
}

// undoLast reverts the last change, as an editor's undo.
func (b *buffer) undoLast() {
	b.mu.Lock()
	prev := b.undo[len(b.undo)-1]
	b.undo = b.undo[:len(b.undo)-1]
	b.mu.Unlock()
	b.setText(prev)
}

func (b *buffer) get() (string, int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.text, b.ver
}

// applyEdits is a workspace/applyEdit responder that applies the edit
// when its version matches (as VS Code does) and sends the didChange.
func (b *buffer) applyEdits(params json.RawMessage) (any, error) {
	var p applyEditParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.edits = append(b.edits, p)
	dc := p.Edit.DocumentChanges
	if len(dc) != 1 || dc[0].TextDocument.URI != b.uri || dc[0].TextDocument.Version != b.ver {
		b.mu.Unlock()
		return map[string]any{"applied": false, "failureReason": "version mismatch"}, nil
	}
	text := []byte(b.text)
	edits := slices.Clone(dc[0].Edits)
	slices.SortFunc(edits, func(x, y textEdit) int {
		return offsetOf(text, y.Range.Start, encUTF16) - offsetOf(text, x.Range.Start, encUTF16)
	})
	out := b.text
	for _, ed := range edits {
		s, en := offsetOf(text, ed.Range.Start, encUTF16), offsetOf(text, ed.Range.End, encUTF16)
		out = out[:s] + ed.NewText + out[en:]
	}
	b.undo = append(b.undo, b.text)
	b.mu.Unlock()
	b.setText(out)
	return map[string]any{"applied": true}, nil
}

// awaitOverlay waits until the server's overlay holds want for path.
func awaitOverlay(t *testing.T, e *fakeEditor, ws, path, want string) {
	t.Helper()
	deadline := time.Now().Add(editorTimeout)
	for {
		ov := e.srv.docs.forWorkspace(ws)
		if ov != nil {
			if d, ok := ov.Document(path); ok && string(d.Text) == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("overlay never held %q for %s", want, path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDocumentSyncCapabilities: initialize advertises incremental sync
// with open/close and save, utf-16 positions unless the client offers
// utf-8, and the v1.1 feature names.
func TestDocumentSyncCapabilities(t *testing.T) {
	for _, tc := range []struct {
		offer []string
		want  string
	}{{nil, "utf-16"}, {[]string{"utf-16"}, "utf-16"}, {[]string{"utf-32", "utf-8", "utf-16"}, "utf-8"}} {
		st := newStack(t, tools.Controlled)
		e := newEditor(t, Options{Runtime: st.Runtime})
		res := e.initializeWith(st.Workspace, docCaps(tc.offer...))
		caps := res["capabilities"].(map[string]any)
		sync, _ := json.Marshal(caps["textDocumentSync"])
		if string(sync) != `{"change":2,"openClose":true,"save":true}` {
			t.Errorf("textDocumentSync %s", sync)
		}
		if caps["positionEncoding"] != tc.want {
			t.Errorf("offered %v: positionEncoding %v, want %s", tc.offer, caps["positionEncoding"], tc.want)
		}
		feats := fmt.Sprint(caps["experimental"].(map[string]any)["octet"].(map[string]any)["features"])
		for _, f := range []string{"textDocument/didChange", "workspace/applyEdit", "octet/prompt.context"} {
			if !strings.Contains(feats, f) {
				t.Errorf("features %s lack %s", feats, f)
			}
		}
	}
}

// TestDocumentOverlayIncremental: didOpen/didChange (incremental UTF-16
// ranges across a surrogate pair, and full text)/didClose keep the
// overlay; URIs outside the workspace or not file:// are ignored.
func TestDocumentOverlayIncremental(t *testing.T) {
	for _, enc := range []string{"utf-16", "utf-8"} {
		t.Run(enc, func(t *testing.T) {
			st := newStack(t, tools.Controlled)
			e := newEditor(t, Options{Runtime: st.Runtime})
			e.initializeWith(st.Workspace, docCaps(enc))
			path := filepath.Join(st.Workspace, "a.go")
			e.notify("textDocument/didOpen", map[string]any{"textDocument": map[string]any{
				"uri": "file://" + path, "languageId": "go", "version": 1, "text": "x😀y\nsecond\n",
			}})
			char := 3 // after the emoji in UTF-16 code units
			if enc == "utf-8" {
				char = 5
			}
			e.notify("textDocument/didChange", map[string]any{
				"textDocument": map[string]any{"uri": "file://" + path, "version": 2},
				"contentChanges": []any{
					map[string]any{"range": lspRange{Start: lspPosition{0, char}, End: lspPosition{0, char + 1}}, "text": "Z"},
					map[string]any{"range": lspRange{Start: lspPosition{1, 0}, End: lspPosition{1, 6}}, "text": "2nd"},
				},
			})
			awaitOverlay(t, e, st.Workspace, path, "x😀Z\n2nd\n")
			e.notify("textDocument/didOpen", map[string]any{"textDocument": map[string]any{
				"uri": "file:///etc/passwd", "version": 1, "text": "outside",
			}})
			e.notify("textDocument/didOpen", map[string]any{"textDocument": map[string]any{
				"uri": "untitled:Untitled-1", "version": 1, "text": "scratch",
			}})
			e.notify("textDocument/didChange", map[string]any{
				"textDocument":   map[string]any{"uri": "file://" + path, "version": 3},
				"contentChanges": []any{map[string]any{"text": "full\n"}},
			})
			awaitOverlay(t, e, st.Workspace, path, "full\n")
			if n, _ := e.srv.docs.stats(); n != 1 {
				t.Errorf("%d documents overlaid, want 1 (outside and untitled ignored)", n)
			}
			e.notify("textDocument/didSave", map[string]any{"textDocument": map[string]any{"uri": "file://" + path}})
			e.notify("textDocument/didClose", map[string]any{"textDocument": map[string]any{"uri": "file://" + path}})
			e.mustCall("octet/session/list", map[string]any{}, nil) // the notifications before it are handled
			if n, b := e.srv.docs.stats(); n != 0 || b != 0 {
				t.Errorf("after didClose: %d documents, %d bytes", n, b)
			}
		})
	}
}

// TestDocumentOverlayBounds: a document over the 32 MiB limit is not
// overlaid, nor one beyond MaxOpenDocuments; both are known as open but
// untracked until closed.
func TestDocumentOverlayBounds(t *testing.T) {
	st := newStack(t, tools.Controlled)
	e := newEditor(t, Options{Runtime: st.Runtime})
	e.initializeWith(st.Workspace, docCaps())
	e.notify("textDocument/didOpen", map[string]any{"textDocument": map[string]any{
		"uri": "file://" + filepath.Join(st.Workspace, "big"), "version": 1, "text": strings.Repeat("x", MaxDocumentBytes+1),
	}})
	for i := range MaxOpenDocuments + 5 {
		e.notify("textDocument/didOpen", map[string]any{"textDocument": map[string]any{
			"uri": fmt.Sprintf("file://%s/f%d", st.Workspace, i), "version": 1, "text": "x",
		}})
	}
	e.mustCall("octet/session/list", map[string]any{}, nil)
	if n, b := e.srv.docs.stats(); n != MaxOpenDocuments || b != int64(MaxOpenDocuments) {
		t.Errorf("%d documents (%d bytes) overlaid, want %d", n, b, MaxOpenDocuments)
	}
	ov := e.srv.docs.forWorkspace(st.Workspace)
	big := filepath.Join(st.Workspace, "big")
	last := filepath.Join(st.Workspace, fmt.Sprintf("f%d", MaxOpenDocuments+4))
	for _, p := range []string{big, last} {
		if d, ok := ov.Document(p); !ok || !d.Untracked || d.Text != nil {
			t.Errorf("%s: %+v %v, want open and untracked", p, d.Version, ok)
		}
	}
	e.notify("textDocument/didClose", map[string]any{"textDocument": map[string]any{"uri": "file://" + big}})
	e.mustCall("octet/session/list", map[string]any{}, nil)
	if _, ok := ov.Document(big); ok {
		t.Error("a closed untracked document is still known")
	}
}

// lastToolOutputs returns the function_call_output texts the provider was
// sent in its last request.
func lastToolOutputs(st *stack) []string {
	reqs := st.Provider.Requests()
	var out []string
	for _, it := range reqs[len(reqs)-1].Input() {
		m, _ := it.(map[string]any)
		if m["type"] == "function_call_output" {
			out = append(out, fmt.Sprint(m["output"]))
		}
	}
	return out
}

// TestReadAndSearchSeeUnsavedText: read and search of an open document
// see the editor's unsaved text, and say source "editor".
func TestReadAndSearchSeeUnsavedText(t *testing.T) {
	st := newStack(t, tools.Controlled)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\n")
	st.Provider.Enqueue(
		providertest.Reply(
			providertest.FunctionCall("call_r", "read", `{"path":"a.txt"}`),
			providertest.FunctionCall("call_s", "search", `{"pattern":"unsaved"}`),
		),
		providertest.Text("done"),
	)
	e := newEditor(t, Options{Runtime: st.Runtime})
	e.initializeWith(st.Workspace, docCaps())
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	b := e.openBuffer(file, "hello world\n")
	b.typeAt(1, 0, "an unsaved line\n")
	awaitOverlay(t, e, st.Workspace, file, "hello world\nan unsaved line\n")
	sid := e.newSession()
	if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "look"})); ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	res := lastToolOutputs(st)
	if len(res) != 2 || !strings.Contains(res[0], "an unsaved line") || !strings.Contains(res[1], "a.txt:2:an unsaved line") {
		t.Fatalf("tool results %q", res)
	}
	var tr struct{ Transcript []host.TranscriptEntry }
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, &tr)
	sources := 0
	for _, en := range tr.Transcript {
		if en.Result != nil && en.Result.Details["source"] == "editor" {
			sources++
		}
	}
	if sources != 2 {
		t.Errorf("%d results say source editor, want 2: %+v", sources, tr.Transcript)
	}
	if got := readFile(t, file); got != "hello world\n" {
		t.Errorf("disk changed: %q", got)
	}
}

// docEditStack is a stack whose model edits a.txt ("hello" → "goodbye")
// while the editor has it open with an unsaved line.
func docEditStack(t *testing.T, opts Options, caps map[string]any) (*stack, *fakeEditor, *buffer, string) {
	st := newStack(t, tools.Controlled)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\nthird\n")
	editScript(st)
	opts.Runtime = st.Runtime
	e := newEditor(t, opts)
	e.initializeWith(st.Workspace, caps)
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("octet/confirmEffect", confirmAnswer("approve", ""))
	b := e.openBuffer(file, "hello world\nthird\n")
	b.typeAt(1, 0, "typed 😀 here\n")
	awaitOverlay(t, e, st.Workspace, file, "hello world\ntyped 😀 here\nthird\n")
	return st, e, b, file
}

// TestEditOpenDocumentAppliesInEditor: an edit of an open document goes
// to the editor as workspace/applyEdit with the version it was computed
// against; the approval states the version; the unsaved line survives,
// the disk is untouched, and the editor's undo reverts only the edit.
func TestEditOpenDocumentAppliesInEditor(t *testing.T) {
	st, e, b, file := docEditStack(t, Options{}, docCaps())
	e.respond("workspace/applyEdit", b.applyEdits)
	sid := e.newSession()
	if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit"})); ans.Outcome != "completed" {
		t.Fatalf("answer %+v\n%s", ans, e.dump())
	}
	if res := lastToolOutputs(st); len(res) != 1 || !strings.HasPrefix(res[0], "Edited a.txt") {
		t.Fatalf("tool result %q", res)
	}
	text, _ := b.get()
	if text != "goodbye world\ntyped 😀 here\nthird\n" {
		t.Errorf("buffer %q", text)
	}
	if got := readFile(t, file); got != "hello world\nthird\n" {
		t.Errorf("the edit was written behind the buffer: disk %q", got)
	}
	if len(b.edits) != 1 || b.edits[0].Edit.DocumentChanges[0].TextDocument.Version != 2 {
		t.Errorf("applyEdit requests %+v", b.edits)
	}
	var p confirmParams
	_ = json.Unmarshal(e.awaitRequest("octet/confirmEffect"), &p)
	if !strings.Contains(p.Detail, "version 2") {
		t.Errorf("approval detail %q does not state the version", p.Detail)
	}
	// The change is diffed against the buffer the edit went to, unsaved
	// line included.
	var d diffAnswer
	e.mustCall("octet/session/diff", map[string]any{"sessionId": sid}, &d)
	if len(d.Changes) != 1 || d.Changes[0].Path != "a.txt" || d.Changes[0].Kind != "modify" ||
		!strings.Contains(d.Changes[0].Diff, "-hello world\n+goodbye world\n typed 😀 here\n") {
		t.Errorf("session diff of the editor edit: %+v", d)
	}
	b.undoLast()
	awaitOverlay(t, e, st.Workspace, file, "hello world\ntyped 😀 here\nthird\n")
}

// TestEditOpenDocumentFailures: a refused edit, a version that moved
// since the approval, and an editor that never answers are tool errors
// the model sees; nothing is written to disk.
func TestEditOpenDocumentFailures(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		respond    func(b *buffer) func(json.RawMessage) (any, error)
		opts       Options
	}{
		{"refused", "the editor refused it (read-only buffer)", func(b *buffer) func(json.RawMessage) (any, error) {
			return func(json.RawMessage) (any, error) {
				return map[string]any{"applied": false, "failureReason": "read-only buffer"}, nil
			}
		}, Options{}},
		{"timeout", "the editor did not confirm it", func(b *buffer) func(json.RawMessage) (any, error) {
			return func(json.RawMessage) (any, error) {
				time.Sleep(2 * time.Second)
				return map[string]any{"applied": true}, nil
			}
		}, Options{RequestTimeout: 300 * time.Millisecond}},
		{"error answer", "the editor did not confirm it", func(b *buffer) func(json.RawMessage) (any, error) {
			return func(json.RawMessage) (any, error) { return nil, jsonrpc2.NewError(-32000, "boom") }
		}, Options{}},
		{"applied but unchanged", "sent no didChange", func(b *buffer) func(json.RawMessage) (any, error) {
			return func(json.RawMessage) (any, error) { return map[string]any{"applied": true}, nil }
		}, Options{RequestTimeout: 300 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, e, b, file := docEditStack(t, tc.opts, docCaps())
			e.respond("workspace/applyEdit", tc.respond(b))
			sid := e.newSession()
			waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit"}))
			res := lastToolOutputs(st)
			if len(res) != 1 || !strings.Contains(res[0], tc.want) || !strings.Contains(res[0], "open in the editor") {
				t.Errorf("tool result %q, want %q", res, tc.want)
			}
			if got := readFile(t, file); got != "hello world\nthird\n" {
				t.Errorf("disk %q", got)
			}
		})
	}
	t.Run("version moved after approval", func(t *testing.T) {
		st, e, b, file := docEditStack(t, Options{}, docCaps())
		e.respond("workspace/applyEdit", b.applyEdits)
		e.respond("octet/confirmEffect", func(params json.RawMessage) (any, error) {
			b.typeAt(0, 0, "//")
			text, _ := b.get()
			awaitOverlay(t, e, st.Workspace, file, text)
			return confirmAnswer("approve", "")(params)
		})
		sid := e.newSession()
		waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit"}))
		if res := lastToolOutputs(st); len(res) != 1 || !strings.Contains(res[0], "changed after the change was shown") {
			t.Errorf("tool result %q", res)
		}
		if len(b.edits) != 0 || readFile(t, file) != "hello world\nthird\n" {
			t.Errorf("applyEdit sent %d times; disk %q", len(b.edits), readFile(t, file))
		}
	})
}

// TestEditWithoutApplyEditWritesDisk: a client without workspace.applyEdit
// gets today's behaviour, the descriptor-relative disk write.
func TestEditWithoutApplyEditWritesDisk(t *testing.T) {
	caps := docCaps()
	delete(caps, "workspace")
	st := newStack(t, tools.Controlled)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\n")
	editScript(st)
	e := newEditor(t, Options{Runtime: st.Runtime})
	e.initializeWith(st.Workspace, caps)
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("octet/confirmEffect", confirmAnswer("approve", ""))
	e.openBuffer(file, "hello world\n")
	awaitOverlay(t, e, st.Workspace, file, "hello world\n")
	sid := e.newSession()
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit"}))
	if got := readFile(t, file); got != "goodbye world\n" {
		t.Errorf("disk %q, want the edit written", got)
	}
}

// TestWriteOpenDocumentAppliesInEditor: write of an open document goes
// through the editor too.
func TestWriteOpenDocumentAppliesInEditor(t *testing.T) {
	st := newStack(t, tools.Controlled)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello\n")
	st.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_w", "write", `{"path":"a.txt","content":"new content\n"}`)),
		providertest.Text("done"),
	)
	e := newEditor(t, Options{Runtime: st.Runtime})
	e.initializeWith(st.Workspace, docCaps())
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("octet/confirmEffect", confirmAnswer("approve", ""))
	b := e.openBuffer(file, "hello\n")
	e.respond("workspace/applyEdit", b.applyEdits)
	awaitOverlay(t, e, st.Workspace, file, "hello\n")
	sid := e.newSession()
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "write"}))
	if text, _ := b.get(); text != "new content\n" || readFile(t, file) != "hello\n" {
		t.Errorf("buffer %q, disk %q", text, readFile(t, file))
	}
}

// TestPromptContextAttachments: octet/prompt context attachments (a range
// of an open document, a file on disk, labelled text) reach the model in
// the user's message; bad ones are refused.
func TestPromptContextAttachments(t *testing.T) {
	st := newStack(t, tools.Controlled)
	writeFile(t, filepath.Join(st.Workspace, "disk.txt"), "on disk\n")
	open := filepath.Join(st.Workspace, "open.txt")
	writeFile(t, open, "saved\n")
	st.Provider.Enqueue(providertest.Text("ok"))
	e := newEditor(t, Options{Runtime: st.Runtime})
	e.initializeWith(st.Workspace, docCaps())
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	b := e.openBuffer(open, "line one\nline two\n")
	b.typeAt(1, 5, "unsaved ")
	awaitOverlay(t, e, st.Workspace, open, "line one\nline unsaved two\n")
	sid := e.newSession()
	ctx := []any{
		map[string]any{"uri": "file://" + open, "range": lspRange{Start: lspPosition{1, 0}, End: lspPosition{2, 0}}},
		map[string]any{"uri": "file://" + filepath.Join(st.Workspace, "disk.txt")},
		map[string]any{"label": "selection", "text": "some text"},
	}
	if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "explain", "context": ctx})); ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	body := string(st.Provider.Requests()[0].Raw)
	for _, want := range []string{
		"attachment 1: open.txt lines 2-3 (editor buffer, unsaved changes included) ---\\nline unsaved two\\n",
		"attachment 2: disk.txt ---\\non disk\\n",
		"attachment 3: \\\"selection\\\" ---\\nsome text\\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("request lacks %s:\n%s", want, body)
		}
	}
	for name, bad := range map[string][]any{
		"outside":  {map[string]any{"uri": "file:///etc/hostname"}},
		"scheme":   {map[string]any{"uri": "https://example.com/x"}},
		"too many": slices.Repeat([]any{map[string]any{"label": "x", "text": "y"}}, host.MaxAttachments+1),
		"missing":  {map[string]any{"uri": "file://" + filepath.Join(st.Workspace, "nope")}},
	} {
		err := e.call("octet/prompt", map[string]any{"sessionId": sid, "text": "x", "context": bad}, nil)
		if codeOf(err) != jsonrpc2.InvalidParams {
			t.Errorf("%s: err %v, want InvalidParams", name, err)
		}
	}
}

// TestAttachmentBounds: one attachment is cut at host.MaxAttachmentBytes with a
// note; all together stay within host.MaxAttachmentsBytes.
func TestAttachmentBounds(t *testing.T) {
	s := New(Options{Runtime: &host.Runtime{}})
	big := strings.Repeat("é", host.MaxAttachmentBytes) // 2 bytes each
	items := slices.Repeat([]attachment{{Label: "big", Text: &big}}, host.MaxAttachments)
	out, _, err := s.withAttachments(t.TempDir(), "hi", items)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > host.MaxAttachmentsBytes+host.MaxAttachments*200 || !strings.Contains(out, "[attachment cut:") {
		t.Errorf("%d bytes for %d attachments", len(out), len(items))
	}
}

// TestDocumentURIMapping: percent-encoded file URIs map to their paths;
// a URI whose path climbs out of the workspace is ignored; a document in
// a second workspace folder belongs to that folder's overlay.
func TestDocumentURIMapping(t *testing.T) {
	st := newStack(t, tools.Controlled)
	other := t.TempDir()
	e := newEditor(t, Options{Runtime: st.Runtime})
	var res map[string]any
	e.mustCall("initialize", map[string]any{"processId": nil, "capabilities": docCaps(),
		"workspaceFolders": []any{
			map[string]any{"uri": "file://" + st.Workspace, "name": "a"},
			map[string]any{"uri": "file://" + other, "name": "b"},
		}}, &res)
	e.notify("initialized", map[string]any{})
	for _, uri := range []string{
		"file://" + st.Workspace + "/a%20b.txt",
		"file://" + st.Workspace + "/../escape.txt",
		"file://" + other + "/c.txt",
	} {
		e.notify("textDocument/didOpen", map[string]any{"textDocument": map[string]any{"uri": uri, "version": 1, "text": uri}})
	}
	e.mustCall("octet/session/list", map[string]any{}, nil)
	if n, _ := e.srv.docs.stats(); n != 2 {
		t.Errorf("%d documents overlaid, want 2", n)
	}
	if _, ok := e.srv.docs.forWorkspace(st.Workspace).Document(filepath.Join(st.Workspace, "a b.txt")); !ok {
		t.Error("a%20b.txt is not overlaid as \"a b.txt\"")
	}
	if _, ok := e.srv.docs.forWorkspace(st.Workspace).Document(filepath.Join(other, "c.txt")); ok {
		t.Error("the first folder's overlay holds the second folder's document")
	}
	if _, ok := e.srv.docs.forWorkspace(filepath.Join(other, "sub")).Document(filepath.Join(other, "c.txt")); !ok {
		t.Error("a session in the second folder does not see its document")
	}
}

// TestDocumentNestedRoots: with a workspace folder inside another, a
// session of the outer folder sees a document of the inner one.
func TestDocumentNestedRoots(t *testing.T) {
	st := newStack(t, tools.Controlled)
	inner := filepath.Join(st.Workspace, "inner")
	e := newEditor(t, Options{Runtime: st.Runtime})
	e.mustCall("initialize", map[string]any{"processId": nil, "capabilities": docCaps(),
		"workspaceFolders": []any{
			map[string]any{"uri": "file://" + st.Workspace, "name": "outer"},
			map[string]any{"uri": "file://" + inner, "name": "inner"},
		}}, nil)
	e.notify("initialized", map[string]any{})
	path := filepath.Join(inner, "x.go")
	e.openBuffer(path, "package x\n")
	awaitOverlay(t, e, inner, path, "package x\n")
	if _, ok := e.srv.docs.forWorkspace(st.Workspace).Document(path); !ok {
		t.Error("the outer folder's sessions do not see the inner folder's open document")
	}
}

// FuzzApplyChange: applying any range change to any text never panics,
// and positionOf/offsetOf round-trip at every rune boundary.
func FuzzApplyChange(f *testing.F) {
	f.Add("x😀y\r\nsecond\n", 0, 3, 1, 2, "Z", true)
	f.Add("", 5, 5, -1, 9, "new\n", false)
	f.Fuzz(func(t *testing.T, text string, l1, c1, l2, c2 int, repl string, utf16 bool) {
		enc := encUTF8
		if utf16 {
			enc = encUTF16
		}
		b := []byte(text)
		out := applyChange(b, contentChange{Range: &lspRange{Start: lspPosition{l1, c1}, End: lspPosition{l2, c2}}, Text: repl}, enc)
		if string(b) != text {
			t.Fatal("applyChange modified its input")
		}
		if len(out) > len(b)+len(repl) {
			t.Fatalf("grew by more than the replacement: %q", out)
		}
		for off := range text {
			if text[off] == '\n' && off > 0 && text[off-1] == '\r' {
				continue // the \r before \n is the line end
			}
			if got := offsetOf(b, positionOf(b, off, enc), enc); got != off {
				t.Fatalf("offset %d → %+v → %d in %q", off, positionOf(b, off, enc), got, text)
			}
		}
	})
}

// TestApprovedEditOfBufferClosedMeanwhile: VS Code's "View diff" replaced
// a preview tab, which closed its document while the approval was open;
// approving then answered "file changed after the change was shown",
// although the file held exactly the text the diff was shown for. What
// was approved is that change of those bytes: it is made where the file
// is now (on disk, the buffer being closed). A buffer whose text changed
// is still refused.
func TestApprovedEditOfBufferClosedMeanwhile(t *testing.T) {
	st := newStack(t, tools.Controlled)
	file := filepath.Join(st.Workspace, "a.txt")
	writeFile(t, file, "hello world\n")
	editScript(st)
	e := newEditor(t, Options{Runtime: st.Runtime})
	e.initializeWith(st.Workspace, docCaps())
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	b := e.openBuffer(file, "hello world\n")
	e.respond("workspace/applyEdit", b.applyEdits)
	awaitOverlay(t, e, st.Workspace, file, "hello world\n")
	e.respond("octet/confirmEffect", func(params json.RawMessage) (any, error) {
		e.notify("textDocument/didClose", map[string]any{"textDocument": map[string]any{"uri": b.uri}})
		awaitClosed := func() bool { _, ok := e.srv.docs.forWorkspace(st.Workspace).Document(file); return !ok }
		for !awaitClosed() {
			time.Sleep(5 * time.Millisecond)
		}
		return confirmAnswer("approve", "")(params)
	})
	sid := e.newSession()
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit"}))
	if res := lastToolOutputs(st); len(res) != 1 || !strings.HasPrefix(res[0], "Edited a.txt") {
		t.Errorf("tool result %q", res)
	}
	if got := readFile(t, file); got != "goodbye world\n" {
		t.Errorf("a.txt = %q after the approved edit of a buffer closed meanwhile", got)
	}
}
