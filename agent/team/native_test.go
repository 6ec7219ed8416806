package team

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider/providertest"
)

// toolNames are the tool names a request advertised.
func toolNames(r providertest.Request) []string {
	var names []string
	tl, _ := r.Body["tools"].([]any)
	for _, x := range tl {
		names = append(names, x.(map[string]any)["name"].(string))
	}
	return names
}

// TestNativeSurfaceTwoLevels: with the generic surface a child spawns its
// own child within the depth limit (the grandchild, at the limit, can
// only message its parent), waits for it, and messages the root.
func TestNativeSurfaceTwoLevels(t *testing.T) {
	f := newFixture(t, fixtureOpt{native: true})
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("s1", NativeSpawn, `{"task":"CHILD-A"}`)),
		providertest.Reply(providertest.FunctionCall("w1", NativeWait, `{"timeout_seconds":30}`)),
		providertest.Reply(providertest.FunctionCall("w2", NativeWait, `{"timeout_seconds":30}`)),
		providertest.Text("root done"),
	)
	f.childSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("a1", NativeSpawn, `{"task":"GRAND-B"}`)).ForRequestContaining("CHILD-A"),
		providertest.Reply(providertest.FunctionCall("a2", NativeWait, `{"timeout_seconds":30}`)).ForRequestContaining("CHILD-A"),
		providertest.Reply(providertest.FunctionCall("a3", NativeSend, `{"agent_id":"parent","message":"NOTE-X"}`)).ForRequestContaining("CHILD-A"),
		providertest.Text("child a done").ForRequestContaining("CHILD-A"),
		providertest.Text("grand done").ForRequestContaining("GRAND-B"),
	)
	r, err := f.root.Prompt(context.Background(), "go", agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	if res := r.Wait(); res.Outcome != agent.OutcomeCompleted {
		t.Fatalf("root %s %v", res.Outcome, res.Err)
	}
	var childTools, grandTools []string
	for _, q := range f.childSrv.Requests() {
		raw := string(q.Raw)
		switch {
		case strings.Contains(raw, "CHILD-A") && childTools == nil:
			childTools = toolNames(q)
		case !strings.Contains(raw, "CHILD-A") && strings.Contains(raw, "GRAND-B"):
			grandTools = toolNames(q)
		}
	}
	if !slices.Contains(childTools, NativeSpawn) || !slices.Contains(childTools, NativeWait) {
		t.Fatalf("child tools %v", childTools)
	}
	if slices.Contains(grandTools, NativeSpawn) || !slices.Contains(grandTools, NativeSend) {
		t.Fatalf("grandchild (at the depth limit) tools %v", grandTools)
	}
	results := ""
	for _, e := range f.root.Session().Branch() {
		if e.Result != nil {
			results += e.Result.Text
		}
	}
	for _, want := range []string{"NOTE-X", "child a done", `"agent_path":"root/worker1"`} {
		if !strings.Contains(results, want) {
			t.Fatalf("root results lack %q: %s", want, results)
		}
	}
	// The child's wait got its own child's answer.
	found := false
	for _, q := range f.childSrv.Requests() {
		if strings.Contains(string(q.Raw), "grand done") && strings.Contains(string(q.Raw), "CHILD-A") {
			found = true
		}
	}
	if !found {
		t.Fatal("the child never saw its child's answer")
	}
	if tot := f.root.Session().Totals(); tot.DelegatedRecords != 2 {
		t.Fatalf("%d delegated records, want 2 (child and grandchild)", tot.DelegatedRecords)
	}
}
