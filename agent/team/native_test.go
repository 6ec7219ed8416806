package team

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider"
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
	f.completeRoot(t, "go")
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

// TestFollowup: in a generic team a completed child is idle and keeps
// its context for follow-up tasks; of concurrent follow-ups exactly one
// reserves it (pending) and starts a run, the others queue and run after
// it, one at a time; the shutdown ends it completed and mirrors every run.
func TestFollowup(t *testing.T) {
	hold := make(chan struct{}) // the follow-ups' runs wait until all are accepted
	f := newFixture(t, fixtureOpt{native: true, onEvent: func(s Snapshot, _ agent.Event) {
		if s.Task == "SECOND-TASK" {
			<-hold
		}
	}})
	f.childSrv.Enqueue(providertest.Text("first answer").WithUsage(provider.Usage{InputTokens: 100, OutputTokens: 1}))
	for range 5 {
		f.childSrv.Enqueue(providertest.Text("next answer").WithUsage(provider.Usage{InputTokens: 200, OutputTokens: 2}))
	}
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "FIRST-TASK"})
	if err != nil {
		t.Fatal(err)
	}
	if got := waitStatus(t, tm, s.ID, StatusIdle); got.Final != "first answer" {
		t.Fatalf("idle child answer %q", got.Final)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := tm.Followup("root", s.ID, "SECOND-TASK")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a follow-up was refused: %v", err)
		}
	}
	recs := provenance(t, tm)
	started, queued := 0, 0
	for _, r := range recs {
		started += b2i(r.Kind == KindAgentStatus && r.Status == string(StatusPending) && r.Task == "SECOND-TASK")
		queued += b2i(r.Kind == KindMessage && r.Followup)
	}
	if started != 1 || queued != 4 {
		t.Fatalf("%d follow-ups started at once and %d queued, want 1 and 4", started, queued)
	}
	close(hold)
	got := waitFor(t, tm, s.ID, func(s Snapshot) bool {
		return s.Status == StatusIdle && s.Queued == 0 && len(f.childSrv.Requests()) == 6
	})
	if got.Final != "next answer" || got.Error != "" {
		t.Fatalf("after the follow-ups: %+v", got)
	}
	reqs := f.childSrv.Requests()
	if !strings.Contains(string(reqs[1].Raw), "FIRST-TASK") || !strings.Contains(string(reqs[1].Raw), "first answer") {
		t.Fatal("the follow-up did not run in the child's own context")
	}
	if n := strings.Count(string(reqs[5].Raw), "SECOND-TASK"); n != 5 {
		t.Fatalf("the last run saw %d follow-up tasks, want 5 (one run each, none overlapping)", n)
	}
	recsOut := tm.Shutdown(context.Background(), "run_x", SettleTimeout)
	if len(recsOut) != 1 || recsOut[0].Delegated.Usage.Input != 1100 || recsOut[0].Delegated.Uncertain {
		t.Fatalf("mirrored %+v", recsOut[0].Delegated)
	}
	if got := tm.List("root")[0].Status; got != StatusCompleted {
		t.Fatalf("after shutdown the idle child is %s", got)
	}
	if _, err := tm.Followup("root", s.ID, "late"); err == nil {
		t.Fatal("a follow-up after shutdown was accepted")
	}
}

// TestInterruptIdleChild: an idle child that is interrupted ends
// cancelled and takes no follow-up.
func TestInterruptIdleChild(t *testing.T) {
	f := newFixture(t, fixtureOpt{native: true})
	f.childSrv.Enqueue(providertest.Text("done"))
	tm := f.team()
	s, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "x"})
	waitStatus(t, tm, s.ID, StatusIdle)
	if _, err := tm.Interrupt("root", s.ID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusCancelled)
	if _, err := tm.Followup("root", s.ID, "again"); err == nil {
		t.Fatal("a cancelled child took a follow-up")
	}
}
