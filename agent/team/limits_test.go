package team

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

func TestLimitsValidate(t *testing.T) {
	cases := []struct {
		l  Limits
		ok bool
	}{
		{DefaultLimits, true},
		{Limits{Concurrent: 2, Depth: 1, Total: 2}, true},
		{Limits{Concurrent: 1, Depth: 1, Total: 2}, false},
		{Limits{Concurrent: 32, Depth: 8, Total: 256}, true},
		{Limits{Concurrent: 33, Depth: 8, Total: 256}, false},
		{Limits{Concurrent: 2, Depth: 0, Total: 2}, false},
		{Limits{Concurrent: 2, Depth: 9, Total: 2}, false},
		{Limits{Concurrent: 2, Depth: 1, Total: 257}, false},
		{Limits{Concurrent: 10, Depth: 2, Total: 10}, true},
		{Limits{Concurrent: 10, Depth: 2, Total: 9}, false},
	}
	for _, c := range cases {
		if err := c.l.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: Validate = %v, want ok=%v", c.l, err, c.ok)
		}
	}
	f := newFixture(t, fixtureOpt{limits: Limits{Concurrent: 10, Depth: 2, Total: 9}})
	cfg := f.cfg
	cfg.Root = f.root
	if _, err := Start(cfg); err == nil {
		t.Fatal("Start accepted total below concurrent")
	}
}

// TestConcurrentLimit: 10 agents at once including the root: 9 children
// spawned concurrently run, the 10th is rejected before provenance.
func TestConcurrentLimit(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.stalls(9)
	tm := f.team()
	ok, errs := spawnConcurrently(tm, "root", 10)
	if len(ok) != 9 || len(errs) != 1 || limitOf(errs[0]) != "concurrent" {
		t.Fatalf("10 concurrent spawns: %d ok, errors %v; want 9 ok and one concurrent limit", len(ok), errs)
	}
	if n := countKind(provenance(t, tm), KindAgentSpawned); n != 9 {
		t.Fatalf("agent_spawned records = %d, want 9 (a rejected spawn writes nothing)", n)
	}
	// A finished child frees its slot.
	if _, err := tm.Interrupt("root", ok[0].ID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, ok[0].ID, StatusCancelled)
	f.stalls(1)
	if _, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "again"}); err != nil {
		t.Fatalf("spawn after a slot was freed: %v", err)
	}
}

// TestTotalLimit: at most Total agents, the root included, per owning run,
// however many have finished.
func TestTotalLimit(t *testing.T) {
	f := newFixture(t, fixtureOpt{limits: Limits{Concurrent: 4, Depth: 2, Total: 4}})
	for range 3 {
		f.childSrv.Enqueue(providertest.Text("done"))
	}
	tm := f.team()
	ok, errs := spawnConcurrently(tm, "root", 3)
	if len(ok) != 3 {
		t.Fatalf("3 spawns under total 4: %v", errs)
	}
	for _, s := range ok {
		waitStatus(t, tm, s.ID, StatusCompleted)
	}
	_, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "one too many"})
	if limitOf(err) != "total" {
		t.Fatalf("4th child (5th agent): %v, want the total limit", err)
	}
}

// TestDepthLimit: the generic team allows depth 2; depth 3 is rejected.
// The product service allows exactly one level.
func TestDepthLimit(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.stalls(2)
	tm := f.team()
	c1, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "child"})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := tm.Spawn(SpawnRequest{Parent: c1.ID, Task: "grandchild"})
	if err != nil {
		t.Fatalf("depth 2: %v", err)
	}
	if c2.Depth != 2 || c2.Path != "root/"+c1.ID+"/"+c2.ID {
		t.Fatalf("grandchild depth %d path %q", c2.Depth, c2.Path)
	}
	if _, err := tm.Spawn(SpawnRequest{Parent: c2.ID, Task: "too deep"}); limitOf(err) != "depth" {
		t.Fatalf("depth 3: %v, want the depth limit", err)
	}

	p := newFixture(t, fixtureOpt{service: &ProductService})
	p.stalls(1)
	ptm := p.team()
	pc, err := ptm.Spawn(SpawnRequest{Parent: "root", Task: "child"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ptm.Spawn(SpawnRequest{Parent: pc.ID, Task: "grandchild"}); limitOf(err) != "depth" {
		t.Fatalf("product grandchild: %v, want the depth limit", err)
	}
}

// TestServiceActivePerParent: the product service runs at most 8 active
// children per parent, below the team's 9 free slots.
func TestServiceActivePerParent(t *testing.T) {
	f := newFixture(t, fixtureOpt{service: &ProductService})
	f.stalls(8)
	tm := f.team()
	ok, errs := spawnConcurrently(tm, "root", 9)
	if len(ok) != 8 || len(errs) != 1 || limitOf(errs[0]) != "active_per_parent" {
		t.Fatalf("9 concurrent spawns: %d ok, errors %v; want 8 and the per-parent limit", len(ok), errs)
	}
}

// TestServiceRetainedPerOwner: 32 child records per owner, even when the
// team's total would allow more.
func TestServiceRetainedPerOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 32 child agents")
	}
	f := newFixture(t, fixtureOpt{limits: Limits{Concurrent: 32, Depth: 1, Total: 64}, service: &ProductService})
	for range 32 {
		f.childSrv.Enqueue(providertest.Text("done"))
	}
	tm := f.team()
	for batch := range 4 {
		ok, errs := spawnConcurrently(tm, "root", 8)
		if len(ok) != 8 {
			t.Fatalf("batch %d: %v", batch, errs)
		}
		if _, err := tm.Wait(context.Background(), "root", nil, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "33rd"}); limitOf(err) != "retained_per_owner" {
		t.Fatalf("33rd record: %v, want the retention limit", err)
	}
}

// TestTextLimit: a 128 KiB task is accepted, one byte more is rejected
// before anything is written.
func TestTextLimit(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.stalls(1)
	tm := f.team()
	if _, err := tm.Spawn(SpawnRequest{Parent: "root", Task: strings.Repeat("x", MaxTextBytes+1)}); limitOf(err) != "text" {
		t.Fatalf("128 KiB + 1: %v", err)
	}
	if n := countKind(provenance(t, tm), KindAgentSpawned); n != 0 {
		t.Fatalf("a rejected task wrote %d spawn records", n)
	}
	if _, err := tm.Spawn(SpawnRequest{Parent: "root", Task: strings.Repeat("x", MaxTextBytes)}); err != nil {
		t.Fatalf("128 KiB: %v", err)
	}
	if _, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "  "}); err == nil {
		t.Fatal("blank task accepted")
	}
	if _, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "x", Tools: []string{"agents_spawn"}}); err == nil {
		t.Fatal("a child got a non-standard tool")
	}
}

// TestSpawnRacingShutdown: spawns concurrent with the shutdown either are
// refused or end cancelled and mirrored; none is left running.
func TestSpawnRacingShutdown(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.stalls(9)
	tm := f.team()
	done := make(chan []Snapshot)
	go func() {
		ok, _ := spawnConcurrently(tm, "root", 9)
		done <- ok
	}()
	recs := tm.Shutdown(context.Background(), "run_x", SettleTimeout)
	ok := <-done
	listed := tm.List("root")
	if len(recs) != len(listed) || len(ok) != len(listed) {
		t.Fatalf("%d spawned, %d listed, %d mirrored", len(ok), len(listed), len(recs))
	}
	for _, s := range listed {
		waitStatus(t, tm, s.ID, StatusCancelled)
	}
}

// TestConcurrentWaitLimit: concurrent waits are capped at the total-agent
// limit; a cancelled wait gives its slot back.
func TestConcurrentWaitLimit(t *testing.T) {
	f := newFixture(t, fixtureOpt{limits: Limits{Concurrent: 2, Depth: 1, Total: 2}})
	f.stalls(1)
	tm := f.team()
	if _, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "stall"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := tm.Wait(ctx, "root", nil, time.Minute)
			errs <- err
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(tm.waits) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("waits never started")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := tm.Wait(context.Background(), "root", nil, time.Minute); limitOf(err) != "waits" {
		t.Fatalf("third wait: %v, want the wait limit", err)
	}
	cancel()
	for range 2 {
		if err := <-errs; err == nil {
			t.Fatal("a cancelled wait returned no error")
		}
	}
	if _, err := tm.Wait(context.Background(), "root", nil, 10*time.Millisecond); err != nil {
		t.Fatalf("wait after the slots came back: %v", err)
	}
}

// TestSpawnBeforeParentRunStarted: a child spawns a grandchild before the
// child's owner goroutine has started its run. The spawn must succeed
// (never panic: the old code derived the grandchild's context from the
// child's run context, still nil, and panicked with "cannot create
// context from nil parent"), and the grandchild belongs to the child's
// first run: cancelling the child stops it.
func TestSpawnBeforeParentRunStarted(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.stalls(2)
	tm := f.team()
	release := make(chan struct{})
	tm.holdWork = func(id string) {
		if id == "worker1" {
			<-release
		}
	}
	c1, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "child"})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := tm.Spawn(SpawnRequest{Parent: c1.ID, Task: "grandchild"})
	if err != nil {
		t.Fatalf("spawn before the parent's run started: %v", err)
	}
	close(release)
	waitStatus(t, tm, c1.ID, StatusRunning)
	waitStatus(t, tm, c2.ID, StatusRunning)
	if _, err := tm.Interrupt("root", c1.ID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, c2.ID, StatusCancelled)
}

// TestLimitErrorsSayWhatToDo: every bound's refusal, which the model
// reads as a tool result, names the bound and what to do next (the
// message and follow-up bounds fell back to "delegation limit: mailbox").
func TestLimitErrorsSayWhatToDo(t *testing.T) {
	for _, limit := range []string{"concurrent", "depth", "total", "active_per_parent", "retained_per_owner", "text", "waits",
		"followup_backlog_messages", "followup_backlog_bytes", "pending_messages", "pending_bytes", "mailbox"} {
		msg := (&LimitError{Limit: limit, Max: 7}).Error()
		if msg == "delegation limit: "+limit || !strings.Contains(msg, "7") || !strings.Contains(msg, "; ") {
			t.Errorf("%s: %q does not say the bound and what to do", limit, msg)
		}
	}
}
