package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/changes"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// removeTool deletes a workspace file, staging the change like edit and
// write do (the built-ins have no delete; a delete kind comes from tools
// like this one).
type removeTool struct {
	root string
	rec  *changes.Recorder
}

func (r *removeTool) Name() string                     { return "remove" }
func (r *removeTool) Description() string              { return "remove a file" }
func (r *removeTool) Concurrency() tools.Concurrency   { return tools.Sequential }
func (r *removeTool) ReplaySafety() tools.ReplaySafety { return tools.ReplayUnsafe }
func (r *removeTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
}
func (r *removeTool) Classify(json.RawMessage) (tools.Effect, error) {
	return tools.WorkspaceMutation, nil
}

func (r *removeTool) Execute(_ context.Context, inv tools.Invocation) (tools.Result, error) {
	var a struct{ Path string }
	if err := json.Unmarshal(inv.Arguments, &a); err != nil {
		return tools.Result{}, err
	}
	p := filepath.Join(r.root, a.Path)
	data, err := os.ReadFile(p)
	if err != nil {
		return tools.Result{Text: err.Error(), IsError: true}, nil
	}
	rec, _, err := r.rec.Stage(a.Path, &changes.File{Data: data, Mode: 0o644}, nil)
	if err != nil {
		return tools.Result{Text: err.Error(), IsError: true}, nil
	}
	if err := os.Remove(p); err != nil {
		return tools.Result{Text: err.Error(), IsError: true}, nil
	}
	return tools.Result{Text: "removed", Changes: []changes.Record{rec}}, nil
}

// TestToolFinishedCarriesChanges runs edit, write and a deleting tool
// through the real agent, broker and tools on real files: each
// tool_finished carries its change, a failed edit none, and the ledger
// keeps the changes with the hashes of the images in the store.
func TestToolFinishedCarriesChanges(t *testing.T) {
	checkLeaks(t)
	store, err := changes.OpenWorkspace(t.TempDir(), "/ws", 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := &changes.Recorder{Store: store}
	rm := &removeTool{rec: rec}
	h := newHarness(t, harnessOpt{policy: tools.UnsafeHost, changes: rec, extra: []tools.Tool{rm}})
	rm.root = h.root
	h.writeFile("a.txt", "one\ntwo\n")
	h.writeFile("gone.txt", "bye\n")
	h.srv.Enqueue(
		pt.Reply(
			pt.FunctionCall("e1", "edit", `{"path":"a.txt","old_text":"two","new_text":"2"}`),
			pt.FunctionCall("w1", "write", `{"path":"new.txt","content":"fresh\n"}`),
			pt.FunctionCall("r1", "remove", `{"path":"gone.txt"}`),
			pt.FunctionCall("e2", "edit", `{"path":"a.txt","old_text":"absent","new_text":"x"}`),
		),
		pt.Text("done"),
	)
	evs := drain(t, h.prompt("go", PromptOptions{}))
	checkRunEvents(t, evs, OutcomeCompleted)
	finished := map[string]*ToolFinished{}
	for _, e := range evs {
		if f, ok := e.(*ToolFinished); ok {
			finished[f.CallID] = f
		}
	}
	want := map[string]changes.Kind{"e1": changes.Modify, "w1": changes.Add, "r1": changes.Delete}
	for id, kind := range want {
		f := finished[id]
		if f == nil || f.IsError || len(f.Changes) != 1 || f.Changes[0].Kind != kind || f.Changes[0].Diff == "" {
			t.Errorf("%s: tool_finished %+v", id, f)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if d := finished["e1"].Changes[0].Diff; d != "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n" {
		t.Errorf("edit diff %q", d)
	}
	if f := finished["e2"]; f == nil || !f.IsError || f.Changes != nil {
		t.Errorf("failed edit: %+v", f)
	}
	body, err := MarshalEvent(finished["w1"])
	if err != nil || !strings.Contains(string(body), `"changes":[{"path":"new.txt","kind":"add","diff":"--- /dev/null\n+++ b/new.txt`) ||
		strings.Contains(string(body), "sha256") {
		t.Errorf("tool_finished JSON %s (%v)", body, err)
	}
	if body, _ := MarshalEvent(finished["e2"]); strings.Contains(string(body), "changes") {
		t.Errorf("failed edit JSON %s", body)
	}

	// The ledger, read back from the file.
	reopened, err := session.Inspect(h.sess.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	got := map[string][]changes.Record{}
	for _, e := range reopened.Branch() {
		if e.Result == nil {
			continue
		}
		recs, err := changes.FromDetails(e.Result.Details)
		if err != nil {
			t.Fatal(err)
		}
		got[e.Result.CallID] = recs
	}
	e1 := got["e1"]
	if len(e1) != 1 || e1[0].Before == nil || e1[0].After == nil || got["e2"] != nil || len(got["r1"]) != 1 || got["r1"][0].After != nil {
		t.Fatalf("ledger changes %+v", got)
	}
	if b, err := store.Get(e1[0].Before.SHA256); err != nil || string(b) != "one\ntwo\n" {
		t.Errorf("pre-image %q, %v", b, err)
	}
	if d := reopened.Branch()[2].Result.Details; d["replacements"] == nil {
		t.Errorf("the tool's own details were lost: %v", d)
	}
}
