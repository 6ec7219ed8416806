package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/changes"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

type diffAnswer struct {
	RunID   string           `json:"runId"`
	Changes []changes.Change `json:"changes"`
}

// TestSessionDiffAcrossRestart drives real edits and writes through the
// fake editor: each tool_finished carries its change; octet/session/diff
// folds several edits of one file into one cumulative diff per path, for
// the last run by default or a named one, and gives the same answer from a
// new server process that resumed the session.
func TestSessionDiffAcrossRestart(t *testing.T) {
	st := newStack(t, tools.UnsafeHost)
	if err := os.WriteFile(filepath.Join(st.Workspace, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Every line of big.txt changes: a diff of 640 KB, over the bound.
	if err := os.WriteFile(filepath.Join(st.Workspace, "big.txt"), []byte(strings.Repeat("0123456789abcde\n", 20_000)), 0o644); err != nil {
		t.Fatal(err)
	}
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("e1", "edit", `{"path":"a.txt","old_text":"one","new_text":"1"}`)),
		pt.Reply(
			pt.FunctionCall("e2", "edit", `{"path":"a.txt","old_text":"three","new_text":"3"}`),
			pt.FunctionCall("w1", "write", `{"path":"dir/b.txt","content":"bee\n"}`),
			pt.FunctionCall("e3", "edit", `{"path":"a.txt","old_text":"absent","new_text":"x"}`),
		),
		pt.Text("first done"),
		pt.Reply(
			pt.FunctionCall("w2", "write", `{"path":"c.txt","content":"sea\n"}`),
			pt.FunctionCall("w3", "edit", `{"path":"big.txt","old_text":"abc","new_text":"ABC","replace_all":true}`),
		),
		pt.Text("second done"),
	)
	e1 := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e1.newSession()
	first := waitAnswer(t, e1.promptAsync(map[string]any{"sessionId": sid, "text": "edit"}))
	if first.Outcome != "completed" {
		t.Fatalf("first run: %+v", first)
	}
	finished := map[string]map[string]any{}
	for _, ev := range e1.eventsOf(first.RunID) {
		if ev.Event["kind"] == "tool_finished" {
			finished[ev.Event["callId"].(string)] = ev.Event
		}
	}
	for id, kind := range map[string]string{"e1": "modify", "e2": "modify", "w1": "add"} {
		chs, _ := finished[id]["changes"].([]any)
		n := 1
		if id == "w1" {
			n = 2 // w1 creates the directory dir first
		}
		if len(chs) != n || chs[n-1].(map[string]any)["kind"] != kind {
			t.Errorf("tool_finished %s: %v", id, finished[id])
		}
	}
	if _, ok := finished["e3"]["changes"]; ok || finished["e3"]["isError"] != true {
		t.Errorf("failed edit's tool_finished: %v", finished["e3"])
	}

	var d diffAnswer
	d = diffAnswer{}
	e1.mustCall("octet/session/diff", map[string]any{"sessionId": sid}, &d)
	want := []changes.Change{
		{Path: "a.txt", Kind: changes.Modify, Diff: "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n-one\n+1\n two\n-three\n+3\n"},
		{Path: "dir", Kind: changes.Add, Diff: "directory dir created (mode 0755)", DiffOmitted: true},
		{Path: "dir/b.txt", Kind: changes.Add, Diff: "--- /dev/null\n+++ b/dir/b.txt\n@@ -0,0 +1 @@\n+bee\n"},
	}
	checkDiff(t, "first run", d, first.RunID, want)

	second := waitAnswer(t, e1.promptAsync(map[string]any{"sessionId": sid, "text": "more"}))
	// A diff over the bound is a summary line, in the event and the diff.
	var bigSummary string
	for _, ev := range e1.eventsOf(second.RunID) {
		if ev.Event["kind"] == "tool_finished" && ev.Event["callId"] == "w3" {
			c := ev.Event["changes"].([]any)[0].(map[string]any)
			bigSummary, _ = c["diff"].(string)
			if !strings.HasPrefix(bigSummary, "diff of big.txt omitted: ") || c["diffOmitted"] != true ||
				!strings.HasSuffix(bigSummary, "bytes, over the 262144-byte bound (+20000 -20000 lines; 320000 bytes → 320000 bytes)") {
				t.Errorf("tool_finished of a large edit: %v", c)
			}
		}
	}
	d = diffAnswer{}
	e1.mustCall("octet/session/diff", map[string]any{"sessionId": sid}, &d)
	checkDiff(t, "last run", d, second.RunID, []changes.Change{
		{Path: "big.txt", Kind: changes.Modify, Diff: bigSummary, DiffOmitted: true},
		{Path: "c.txt", Kind: changes.Add, Diff: "--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+sea\n"},
	})
	d = diffAnswer{}
	e1.mustCall("octet/session/diff", map[string]any{"sessionId": sid, "runId": first.RunID}, &d)
	checkDiff(t, "named run", d, first.RunID, want)
	err := e1.call("octet/session/diff", map[string]any{"sessionId": sid, "runId": "run-nope"}, &d)
	if err == nil || !strings.Contains(err.Error(), `no run "run-nope"`) {
		t.Errorf("unknown run: %v", err)
	}
	stopEditor(t, e1)

	// A new server process: the images come from the store on disk.
	e2 := st.editor(t, Options{}, map[string]any{"events": true})
	var r resumeResult
	e2.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, &r)
	d = diffAnswer{}
	e2.mustCall("octet/session/diff", map[string]any{"sessionId": sid, "runId": first.RunID}, &d)
	checkDiff(t, "after restart", d, first.RunID, want)
}

func checkDiff(t *testing.T, what string, got diffAnswer, run string, want []changes.Change) {
	t.Helper()
	if got.RunID != run || len(got.Changes) != len(want) {
		t.Fatalf("%s: diff %+v, want run %s with %d changes", what, got, run, len(want))
	}
	for i := range want {
		if got.Changes[i] != want[i] {
			t.Errorf("%s: change %d\n got %+v\nwant %+v", what, i, got.Changes[i], want[i])
		}
	}
}

// TestSessionDiffEmpty: a session without runs has no changes.
func TestSessionDiffEmpty(t *testing.T) {
	st := newStack(t, tools.UnsafeHost)
	e := st.editor(t, Options{}, nil)
	sid := e.newSession()
	var d diffAnswer
	e.mustCall("octet/session/diff", map[string]any{"sessionId": sid}, &d)
	if d.RunID != "" || d.Changes == nil || len(d.Changes) != 0 {
		t.Errorf("diff of an empty session = %+v", d)
	}
	if err := e.call("octet/session/diff", map[string]any{"sessionId": "nope"}, &d); codeOf(err) != CodeNoSession {
		t.Errorf("unknown session: %v", err)
	}
}
