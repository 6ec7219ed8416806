package team

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// costOf is u's exact cost at the scripted price.
func costOf(t *testing.T, u provider.Usage) int64 {
	t.Helper()
	c, err := agent.PriceTable{"scripted": price}.Cost("scripted", agent.TokenUsage{Input: u.InputTokens, CachedInput: u.CachedTokens, Output: u.OutputTokens})
	if err != nil {
		t.Fatal(err)
	}
	return int64(c)
}

// TestLiveCostCeilingAcrossChildren: the root's session cost ceiling
// counts each child's settled usage as it happens. The second child's
// response crosses it mid-run: that child's next request and the root's
// next request are refused before sending, with the cost ceiling's
// refusal saying which ceiling and what to do; the mirrored records at
// the run's end are not counted twice.
func TestLiveCostCeilingAcrossChildren(t *testing.T) {
	const ceiling = 200_000_000_000 // $0.20
	f := newFixture(t, fixtureOpt{service: &ProductService, maxCost: ceiling})
	if err := os.WriteFile(filepath.Join(f.workspace, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rootUse := provider.Usage{InputTokens: 10, OutputTokens: 3}
	childUse := provider.Usage{InputTokens: 100_000} // $0.125 each
	// Child B's response, which crosses the ceiling, comes once the root
	// has sent its fourth request (the wait): were it first, that request
	// would be the one refused.
	rootWaits := make(chan struct{})
	go func() {
		defer close(rootWaits)
		for len(f.rootSrv.Requests()) < 4 && t.Context().Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}()
	f.childSrv.Enqueue(
		providertest.Text("a done").WithUsage(childUse).ForRequestContaining("CHILD-A"),
		providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"notes.txt"}`)).WithUsage(childUse).ForRequestContaining("CHILD-B").HoldUntil(rootWaits),
	)
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("c1", ToolSpawn, `{"task":"CHILD-A"}`)).WithUsage(rootUse),
		providertest.Reply(providertest.FunctionCall("c2", ToolWait, `{"timeout_seconds":30}`)).WithUsage(rootUse),
		providertest.Reply(providertest.FunctionCall("c3", ToolSpawn, `{"task":"CHILD-B"}`)).WithUsage(rootUse),
		providertest.Reply(providertest.FunctionCall("c4", ToolWait, `{"timeout_seconds":30}`)).WithUsage(rootUse),
		providertest.Text("must not be sent").WithUsage(rootUse),
	)
	r, err := f.root.Prompt(context.Background(), "two children", agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	res := r.Wait()
	if res.Outcome != agent.OutcomeFailed {
		t.Fatalf("root run %s (%v), want failed at the cost ceiling", res.Outcome, res.Err)
	}
	var ce *agent.CeilingError
	if !errors.As(res.Err, &ce) || ce.Limit != "cost" {
		t.Fatalf("root refusal %v, want the cost ceiling", res.Err)
	}
	msg := res.Err.Error()
	for _, want := range []string{"hard cost ceiling reached", "of $0.2", "max_session_cost_usd counting its delegated child agents", "start a new session, or raise or remove the ceiling"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("root refusal %q lacks %q", msg, want)
		}
	}
	if n := len(f.rootSrv.Requests()); n != 4 {
		t.Fatalf("%d root requests sent, want 4 (the fifth refused before sending)", n)
	}
	if n := len(f.childSrv.Requests()); n != 2 {
		t.Fatalf("%d child requests sent, want 2 (child B's second refused before sending)", n)
	}
	// Child B failed with the same refusal.
	var bStatus, bErr string
	for _, rec := range readTeamJournal(t, f) {
		if rec.Kind == KindAgentStatus && rec.Path == "root/worker2" && rec.Status == string(StatusFailed) {
			bStatus, bErr = rec.Status, rec.Text
		}
	}
	if bStatus != string(StatusFailed) || !strings.Contains(bErr, "hard cost ceiling reached") || !strings.Contains(bErr, "max_session_cost_usd") {
		t.Fatalf("child B ended %q: %q, want failed at the cost ceiling", bStatus, bErr)
	}
	// Mirrored once: the root's known cost is its own plus each child's.
	insp, err := session.Inspect(f.root.Session().Path())
	if err != nil {
		t.Fatal(err)
	}
	defer insp.Close()
	tot := insp.Totals()
	want := 4*costOf(t, rootUse) + 2*costOf(t, childUse)
	if tot.DelegatedRecords != 2 || tot.Known.CostPicodollars != want || tot.Uncertain {
		t.Fatalf("root known cost %d with %d delegated records (uncertain %v), want %d and 2", tot.Known.CostPicodollars, tot.DelegatedRecords, tot.Uncertain, want)
	}
	if l, ok := f.owner.Ledger(); !ok || l.Known.CostPicodollars != want {
		t.Fatalf("ledger after the run %d, want %d (no child counted twice)", l.Known.CostPicodollars, want)
	}
	if err := f.root.CeilingRefusal(); err == nil {
		t.Fatal("the root's next prompt would not be refused")
	}
}

// TestLiveCostCeilingChildUncertain: a child whose usage became unknown
// (its stream dropped after the request was sent) refuses the root's
// next request under the cost ceiling, as the root's own uncertainty
// would, although the known cost is far below the ceiling.
func TestLiveCostCeilingChildUncertain(t *testing.T) {
	f := newFixture(t, fixtureOpt{service: &ProductService, maxCost: 1_000_000_000_000})
	f.childSrv.Enqueue(providertest.Text("partial answer that drops").DropAfter(2).ForRequestContaining("CHILD-A"))
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("c1", ToolSpawn, `{"task":"CHILD-A"}`)),
		providertest.Reply(providertest.FunctionCall("c2", ToolWait, `{"timeout_seconds":30}`)),
		providertest.Text("must not be sent"),
	)
	r, err := f.root.Prompt(context.Background(), "one child", agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	res := r.Wait()
	var ce *agent.CeilingError
	if res.Outcome != agent.OutcomeFailed || !errors.As(res.Err, &ce) || !ce.Uncertain {
		t.Fatalf("root run %s (%v), want failed for unknown usage", res.Outcome, res.Err)
	}
	if msg := res.Err.Error(); !strings.Contains(msg, "not completely known") || !strings.Contains(msg, "remove the hard ceiling") {
		t.Fatalf("refusal %q", msg)
	}
	if n := len(f.rootSrv.Requests()); n != 2 {
		t.Fatalf("%d root requests sent, want 2", n)
	}
}

// TestSpawnRefusedAtCostCeiling: once the root's cost ceiling is reached
// (by its first child's response), a spawn in the same response as the
// wait that saw it is refused before anything is written, with the
// ceiling's refusal, and no request of the would-be child is sent; so is
// a follow-up of the idle child.
func TestSpawnRefusedAtCostCeiling(t *testing.T) {
	const ceiling = 100_000_000_000 // $0.10
	f := newFixture(t, fixtureOpt{service: &ProductService, maxCost: ceiling})
	f.childSrv.Enqueue(providertest.Text("a done").WithUsage(provider.Usage{InputTokens: 100_000}).ForRequestContaining("CHILD-A"))
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("c1", ToolSpawn, `{"task":"CHILD-A"}`)),
		providertest.Reply(
			providertest.FunctionCall("c2", ToolWait, `{"timeout_seconds":30}`),
			providertest.FunctionCall("c3", ToolSpawn, `{"task":"CHILD-B"}`),
			providertest.FunctionCall("c4", ToolFollowup, `{"agent_id":"worker1","task":"CHILD-A again"}`),
		),
		providertest.Text("must not be sent"),
	)
	r, err := f.root.Prompt(context.Background(), "one child", agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	if res := r.Wait(); res.Outcome != agent.OutcomeFailed {
		t.Fatalf("root run %s (%v), want failed at the cost ceiling", res.Outcome, res.Err)
	}
	results := map[string]*session.ToolResult{}
	for _, e := range f.root.Session().Branch() {
		if e.Result != nil {
			results[e.Result.CallID] = e.Result
		}
	}
	for _, id := range []string{"c3", "c4"} {
		res := results[id]
		if res == nil || !res.IsError || !strings.Contains(res.Text, "hard cost ceiling reached") || !strings.Contains(res.Text, "no child agent is started") {
			t.Fatalf("%s result %+v, want refused at the cost ceiling", id, res)
		}
	}
	if n := len(f.childSrv.Requests()); n != 1 {
		t.Fatalf("%d child requests, want 1 (child A's only)", n)
	}
	for _, rec := range readTeamJournal(t, f) {
		if rec.Path == "root/worker2" || rec.Kind == KindMessage && rec.Followup {
			t.Fatalf("a refused spawn or follow-up was recorded: %+v", rec)
		}
	}
}
