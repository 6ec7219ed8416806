package team

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestServiceChildIdleFollowupBound: a product (service) child whose run
// completed is idle, not completed; a follow-up to it is refused at the
// service's 8-active-per-parent bound and, one below it, concurrent
// follow-ups and a spawn racing for the last slot start exactly one run.
func TestServiceChildIdleFollowupBound(t *testing.T) {
	f := newFixture(t, fixtureOpt{service: &ProductService})
	f.childSrv.Enqueue(providertest.Text("first answer").ForRequestContaining("FIRST-TASK"))
	tm := f.team()
	a, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "FIRST-TASK"})
	if err != nil {
		t.Fatal(err)
	}
	if got := waitStatus(t, tm, a.ID, StatusIdle); got.Final != "first answer" {
		t.Fatalf("idle child answer %q", got.Final)
	}
	// The idle child frees its active slot: 8 more children may run.
	f.stalls(8)
	var stallers []Snapshot
	for range 8 {
		s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "stall"})
		if err != nil {
			t.Fatalf("spawn next to an idle child: %v", err)
		}
		stallers = append(stallers, s)
	}
	for _, s := range stallers {
		waitStatus(t, tm, s.ID, StatusRunning)
	}
	f.waitScriptTaken(t) // else a late staller could take the follow-up's answer below
	before := len(provenance(t, tm))
	if _, err := tm.Followup("root", a.ID, "SECOND-TASK"); limitOf(err) != "active_per_parent" {
		t.Fatalf("follow-up of an idle child with 8 active siblings: %v, want the active_per_parent limit", err)
	}
	if got := len(provenance(t, tm)); got != before {
		t.Fatalf("a refused follow-up wrote %d provenance records", got-before)
	}
	if s, _ := tm.child("root", a.ID); s.Status != StatusIdle {
		t.Fatalf("after the refused follow-up the child is %s", s.Status)
	}
	// One slot frees; four follow-ups and a spawn race for it.
	if _, err := tm.Interrupt("root", stallers[0].ID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, stallers[0].ID, StatusCancelled)
	f.childSrv.Enqueue(providertest.Text("second answer").ForRequestContaining("SECOND-TASK"), providertest.Stall())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wins []string
	var errs []error
	start := make(chan struct{})
	try := func(name string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := fn()
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins = append(wins, name)
			} else {
				errs = append(errs, err)
			}
		}()
	}
	for range 4 {
		try("followup", func() error { _, err := tm.Followup("root", a.ID, "SECOND-TASK"); return err })
	}
	try("spawn", func() error { _, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "racer"}); return err })
	close(start)
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d of the racing follow-ups and spawn started (%v), want exactly 1; errors %v", len(wins), wins, errs)
	}
	for _, err := range errs {
		if limitOf(err) != "active_per_parent" && !strings.Contains(err.Error(), "busy") {
			t.Fatalf("a racer was refused for another reason: %v", err)
		}
	}
	active := 0
	for _, s := range tm.List("root") {
		active += b2i(s.Status.Active())
	}
	if active > ProductService.ActivePerParent {
		t.Fatalf("%d children active, above %d", active, ProductService.ActivePerParent)
	}
	if wins[0] == "followup" {
		got := waitFor(t, tm, a.ID, func(s Snapshot) bool { return s.Status == StatusIdle && s.Final == "second answer" })
		if got.Error != "" {
			t.Fatalf("after the follow-up: %+v", got)
		}
	}
	recs := tm.Shutdown(context.Background(), "run_x", SettleTimeout)
	if want := 9 + b2i(wins[0] == "spawn"); len(recs) != want {
		t.Fatalf("%d delegated records, want one per child (%d)", len(recs), want)
	}
	if s, _ := tm.child("root", a.ID); s.Status != StatusCompleted {
		t.Fatalf("at the team's end the idle child is %s, want completed", s.Status)
	}
}

// TestProductFollowupThroughTools: the root model gives an idle child a
// second task with agents_followup; the child runs it in its own context,
// the root waits for it again, and the owning run's end finishes the idle
// child (completed) and mirrors both runs' usage once.
func TestProductFollowupThroughTools(t *testing.T) {
	f := newFixture(t, fixtureOpt{service: &ProductService})
	u1 := provider.Usage{InputTokens: 100, OutputTokens: 7}
	u2 := provider.Usage{InputTokens: 300, OutputTokens: 11}
	f.childSrv.Enqueue(
		providertest.Text("found three files").WithUsage(u1).ForRequestContaining("FIRST-TASK"),
		providertest.Text("the second file is largest").WithUsage(u2).ForRequestContaining("SECOND-TASK"),
	)
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("c1", ToolSpawn, `{"task":"FIRST-TASK"}`)),
		providertest.Reply(providertest.FunctionCall("c2", ToolWait, `{"timeout_seconds":30}`)),
		providertest.Reply(providertest.FunctionCall("c3", ToolFollowup, `{"agent_id":"worker1","task":"SECOND-TASK"}`)),
		providertest.Reply(providertest.FunctionCall("c4", ToolWait, `{"timeout_seconds":30}`)),
		providertest.Text("done"),
	)
	r, err := f.root.Prompt(context.Background(), "look at files", agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	if res := r.Wait(); res.Outcome != agent.OutcomeCompleted {
		t.Fatalf("root run: %s %v", res.Outcome, res.Err)
	}
	reqs := f.rootSrv.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d root requests, want 5", len(reqs))
	}
	// The first wait showed the child idle with its answer; the
	// follow-up's result showed it pending; the second wait its new answer.
	results := map[string]string{}
	for _, raw := range reqs[4].Input() {
		if it, _ := raw.(map[string]any); it["type"] == "function_call_output" {
			id, _ := it["call_id"].(string)
			out, _ := it["output"].(string)
			results[id] = out
		}
	}
	var w1 struct {
		Agents []view `json:"agents"`
	}
	if err := json.Unmarshal([]byte(results["c2"]), &w1); err != nil || len(w1.Agents) != 1 || w1.Agents[0].Status != StatusIdle || w1.Agents[0].Final != "found three files" {
		t.Fatalf("first wait result %q (%v)", results["c2"], err)
	}
	if !strings.Contains(results["c3"], `"status":"pending"`) {
		t.Fatalf("follow-up result %q", results["c3"])
	}
	if !strings.Contains(results["c4"], "the second file is largest") {
		t.Fatalf("second wait result %q", results["c4"])
	}
	creqs := f.childSrv.Requests()
	if len(creqs) != 2 || !strings.Contains(string(creqs[1].Raw), "FIRST-TASK") || !strings.Contains(string(creqs[1].Raw), "found three files") {
		t.Fatal("the follow-up did not run in the child's own context")
	}
	insp, err := session.Inspect(f.root.Session().Path())
	if err != nil {
		t.Fatal(err)
	}
	defer insp.Close()
	tot := insp.Totals()
	if tot.DelegatedRecords != 1 || tot.Delegated.Input != 400 || tot.Delegated.Output != 18 || tot.Uncertain {
		t.Fatalf("mirrored %+v (%d records, uncertain %v), want one record of both runs", tot.Delegated, tot.DelegatedRecords, tot.Uncertain)
	}
	// The idle child was finished at the run's end.
	var last string
	for _, e := range readTeamJournal(t, f) {
		if e.Kind == KindAgentStatus && e.Agent == "worker1" {
			last = e.Status
		}
	}
	if last != string(StatusCompleted) {
		t.Fatalf("the child's last status is %q, want completed", last)
	}
}

// readTeamJournal reads the provenance of the fixture's only team.
func readTeamJournal(t *testing.T, f *fixture) []Record {
	t.Helper()
	dirs, err := teamDirs(f.cfg.Dir)
	if err != nil || len(dirs) != 1 {
		t.Fatalf("team dirs %v (%v)", dirs, err)
	}
	recs, err := ReadProvenance(dirs[0] + "/" + JournalName)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
