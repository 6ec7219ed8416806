package team

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestTeamDirectoryAndJournal: an owner-only random directory holding the
// child sessions and provenance.jsonl, with every record durable in order.
func TestTeamDirectoryAndJournal(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.childSrv.Enqueue(providertest.Text("child answer"))
	tm := f.team()
	st, err := os.Lstat(tm.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("team directory mode %s, want drwx------", st.Mode())
	}
	js, err := os.Lstat(filepath.Join(tm.Dir(), JournalName))
	if err != nil || js.Mode().Perm() != 0o600 {
		t.Fatalf("journal: %v %v", js, err)
	}
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "say hi", Tools: []string{"read", "search"}})
	if err != nil {
		t.Fatal(err)
	}
	done := waitStatus(t, tm, s.ID, StatusCompleted)
	if done.Final != "child answer" {
		t.Fatalf("final answer %q", done.Final)
	}
	if _, err := os.Stat(filepath.Join(tm.Dir(), s.SessionID+".jsonl")); err != nil {
		t.Fatalf("child session not in the team directory: %v", err)
	}
	var kinds []string
	recs := provenance(t, tm)
	for _, r := range recs {
		kinds = append(kinds, r.Kind+":"+r.Status)
	}
	want := []string{"team_started:", "agent_spawned:", "agent_status:running", "agent_status:completed"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("provenance %v, want %v", kinds, want)
	}
	sp := recs[1]
	if sp.Provenance == nil || sp.Provenance.ToolScope != ChildOverride || sp.Provenance.Sandbox != ParentInherited || sp.Policy == nil {
		t.Fatalf("spawn record authority: %+v %+v", sp.Provenance, sp.Policy)
	}
	if !slices.Equal(sp.Tools, []string{"read", "search"}) || sp.Task != "say hi" {
		t.Fatalf("spawn record %+v", sp)
	}
	// orchestration_provenance holds only the two origin words.
	raw, _ := json.Marshal(sp.Provenance)
	var m map[string]string
	_ = json.Unmarshal(raw, &m)
	for k, v := range m {
		if v != ParentInherited && v != ChildOverride {
			t.Fatalf("orchestration_provenance.%s = %q", k, v)
		}
	}
	// The child got exactly its narrowed tools and the root's prompt.
	req := f.childSrv.Requests()[0]
	var names []string
	for _, tl := range req.Body["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	if !slices.Equal(names, []string{"read", "search", ToolMessageParent}) {
		t.Fatalf("child tools %v", names)
	}
	if req.Body["instructions"] != "You are the root." {
		t.Fatalf("child instructions %v", req.Body["instructions"])
	}
}

// TestActivationFailure: a team directory parent that cannot be created
// fails activation with the path named and leaves nothing behind.
func TestActivationFailure(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := f.cfg
	cfg.Root, cfg.Dir = f.root, filepath.Join(file, "teams")
	if _, err := Start(cfg); err == nil {
		t.Fatal("activation under a file succeeded")
	}
	// A journal whose first append fails: the journal and the empty
	// directory made for it are removed again, and the error says so.
	dir := filepath.Join(t.TempDir(), "teams")
	journalOpened = func(f *os.File) { f.Close() }
	defer func() { journalOpened = nil }()
	cfg.Dir = dir
	if _, err := Start(cfg); err == nil || !strings.Contains(err.Error(), "activate team directory") {
		t.Fatalf("activation with a failing journal: %v", err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("failed activation left %v (%v)", ents, err)
	}
}

// TestProvenanceFailureStopsTeam: when the journal cannot be appended, the
// team reports a diagnostic, rejects new work and cancels every worker.
func TestProvenanceFailureStopsTeam(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.stalls(1)
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "long"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusRunning)
	tm.dir.j.f.Close() // the file system stops accepting appends
	f.stalls(1)
	_, err = tm.Spawn(SpawnRequest{Parent: "root", Task: "refused"})
	if _, ok := errors.AsType[*PersistenceError](err); !ok {
		t.Fatalf("spawn on a failed journal: %v, want a PersistenceError", err)
	}
	if tm.Err() == nil {
		t.Fatal("no persistence diagnostic")
	}
	snaps, err := tm.Wait(context.Background(), "root", nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 1 || snaps[0].Status != StatusCancelled {
		t.Fatalf("running worker after the failure: %+v", snaps)
	}
	if _, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "still refused"}); err == nil {
		t.Fatal("new work accepted after the failure")
	}
	if got := len(tm.List("root")); got != 1 {
		t.Fatalf("the refused spawn became visible: %d agents", got)
	}
}

// TestCancellationDownTwoLevels: interrupting a child cancels its own
// child; the interrupt is durable before it takes effect.
func TestCancellationDownTwoLevels(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.stalls(3)
	tm := f.team()
	c1, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "child"})
	c2, err := tm.Spawn(SpawnRequest{Parent: c1.ID, Task: "grandchild"})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "sibling"})
	waitStatus(t, tm, c2.ID, StatusRunning)
	if _, err := tm.Interrupt(c2.ID, c1.ID); err == nil {
		t.Fatal("a grandchild interrupted its parent")
	}
	if _, err := tm.Interrupt("root", c1.ID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, c1.ID, StatusCancelled)
	waitStatus(t, tm, c2.ID, StatusCancelled)
	if s := waitStatus(t, tm, other.ID, StatusRunning); s.Status != StatusRunning {
		t.Fatal("sibling stopped")
	}
	recs := provenance(t, tm)
	i := slices.IndexFunc(recs, func(r Record) bool { return r.Kind == KindInterruptRequested })
	j := slices.IndexFunc(recs, func(r Record) bool { return r.Kind == KindAgentStatus && r.Agent == c1.ID && r.Status == "cancelled" })
	if i < 0 || j < i {
		t.Fatalf("interrupt_requested at %d, cancelled status at %d", i, j)
	}
	// Shutdown cancels the rest.
	recsOut := tm.Shutdown(context.Background(), "run_x", SettleTimeout)
	if len(recsOut) != 3 {
		t.Fatalf("%d delegated records, want 3", len(recsOut))
	}
	waitStatus(t, tm, other.ID, StatusCancelled)
	if _, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "late"}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("spawn after shutdown: %v", err)
	}
	if k := provenance(t, tm); k[len(k)-1].Kind != KindTeamShutdown {
		t.Fatalf("last record %s", k[len(k)-1].Kind)
	}
}

// TestSettleTimeout: a child that does not settle within 2 s after
// shutdown is mirrored with its known subtotal, marked uncertain, and
// the shutdown does not wait longer.
func TestSettleTimeout(t *testing.T) {
	release := make(chan struct{})
	var blocked bool
	f := newFixture(t, fixtureOpt{onEvent: func(s Snapshot, ev agent.Event) {
		if _, fin := ev.(*agent.RunFinished); fin && s.Task == "slow" && !blocked {
			blocked = true
			<-release // the child's event consumer hangs: it cannot settle
		}
	}})
	f.childSrv.Enqueue(providertest.Stall())
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusRunning)
	t0 := time.Now()
	recs := tm.Shutdown(context.Background(), "run_x", SettleTimeout)
	el := time.Since(t0)
	close(release)
	if el < SettleTimeout || el > SettleTimeout+time.Second {
		t.Fatalf("shutdown took %v, want about %v", el, SettleTimeout)
	}
	if len(recs) != 1 || !recs[0].Delegated.Uncertain {
		t.Fatalf("unsettled child mirrored as %+v", recs[0].Delegated)
	}
	// In the root ledger the uncertainty precedes the known subtotal.
	if err := f.root.Session().Append(recs...); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(f.root.Session().Path())
	line := splitLines(data)[len(splitLines(data))-1]
	if u, k := strings.Index(line, `"uncertain":true`), strings.Index(line, `"usage":`); u < 0 || k < 0 || u > k {
		t.Fatalf("mirrored record %s", line)
	}
	if tot := f.root.Session().Totals(); !tot.Uncertain || tot.Cause.Reason != "delegated_uncertain" {
		t.Fatalf("root totals after an uncertain child: %+v", tot)
	}
	waitStatus(t, tm, s.ID, StatusCancelled)
}

// TestRootRunMirrorsUsage drives a real root run through the subagents
// service: the root spawns two children, waits and answers; the run's end
// mirrors one delegated-usage record per child, exact to the picodollar,
// in the checkpoint's batch. The children's usage counts in the root's
// known total but never in a root request.
func TestRootRunMirrorsUsage(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	childA := provider.Usage{InputTokens: 1_001, CachedTokens: 333, OutputTokens: 77}
	childB := provider.Usage{InputTokens: 2_003, OutputTokens: 5}
	f.childSrv.Enqueue(
		providertest.Text("answer one").WithUsage(childA),
		providertest.Text("answer two").WithUsage(childB),
	)
	rootUse := provider.Usage{InputTokens: 10, OutputTokens: 3}
	f.rootSrv.Enqueue(
		providertest.Reply(
			providertest.FunctionCall("c1", ToolSpawn, `{"task":"first"}`),
			providertest.FunctionCall("c2", ToolSpawn, `{"task":"second"}`),
		).WithUsage(rootUse),
		providertest.Reply(providertest.FunctionCall("c3", ToolWait, `{"timeout_seconds":30}`)).WithUsage(rootUse),
		providertest.Text("combined").WithUsage(rootUse),
	)
	r, err := f.root.Prompt(context.Background(), "do two things", agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	res := r.Wait()
	if res.Outcome != agent.OutcomeCompleted {
		t.Fatalf("root run: %s %v", res.Outcome, res.Err)
	}
	// The wait result carried both answers to the root model.
	reqs := f.rootSrv.Requests()
	last, _ := json.Marshal(reqs[len(reqs)-1].Input())
	for _, want := range []string{"answer one", "answer two"} {
		if !json.Valid(last) || !contains(string(last), want) {
			t.Fatalf("final root request lacks %q", want)
		}
	}
	insp, err := session.Inspect(f.root.Session().Path())
	if err != nil {
		t.Fatal(err)
	}
	defer insp.Close()
	tot := insp.Totals()
	cost := func(u provider.Usage) int64 {
		c, err := agent.PriceTable{"scripted": price}.Cost("scripted", agent.TokenUsage{Input: u.InputTokens, CachedInput: u.CachedTokens, Output: u.OutputTokens})
		if err != nil {
			t.Fatal(err)
		}
		return int64(c)
	}
	if tot.DelegatedRecords != 2 || tot.Uncertain {
		t.Fatalf("delegated records %d uncertain %v", tot.DelegatedRecords, tot.Uncertain)
	}
	wantDelegated := cost(childA) + cost(childB)
	if tot.Delegated.CostPicodollars != wantDelegated || tot.Delegated.Input != 3_004 || tot.Delegated.Output != 82 {
		t.Fatalf("delegated %+v, want cost %d input 3004 output 82", tot.Delegated, wantDelegated)
	}
	if tot.Known.CostPicodollars != tot.Own.CostPicodollars+wantDelegated || tot.Own.CostPicodollars != 3*cost(rootUse) {
		t.Fatalf("known %d own %d delegated %d", tot.Known.CostPicodollars, tot.Own.CostPicodollars, wantDelegated)
	}
	if res.Usage.CostPicodollars != tot.Known.CostPicodollars || res.Usage.Input != tot.Known.Input || res.Usage.Requests != 3 {
		t.Fatalf("run usage %+v, want the known total %+v with 3 own requests", res.Usage, tot.Known)
	}
	// The delegated records precede the checkpoint in one batch.
	data, _ := os.ReadFile(f.root.Session().Path())
	lines := splitLines(data)
	if !contains(lines[len(lines)-1], `"checkpoint"`) || !contains(lines[len(lines)-2], `"delegated_usage"`) || !contains(lines[len(lines)-3], `"delegated_usage"`) {
		t.Fatalf("tail of the root session:\n%s\n%s\n%s", lines[len(lines)-3], lines[len(lines)-2], lines[len(lines)-1])
	}
	// No root request carried the children's usage figures.
	for _, q := range reqs {
		if contains(string(q.Raw), "1001") || contains(string(q.Raw), "2003") {
			t.Fatal("a child's usage entered a root request")
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func splitLines(b []byte) []string { return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") }

// TestSendDelivered: a message reaches a running child at its next step,
// durable in its session after its provenance record.
func TestSendDelivered(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.childSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"missing.txt"}`)).Pace(100*time.Millisecond),
		providertest.Text("got it"),
	)
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "look"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusRunning)
	for deadline := time.Now().Add(10 * time.Second); len(f.childSrv.Requests()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no child request")
		}
	}
	if err := tm.Send("root", s.ID, "use other.txt instead"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusCompleted)
	reqs := f.childSrv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Raw), "[message from root] use other.txt instead") {
		t.Fatalf("the child's next request lacks the message (%d requests)", len(reqs))
	}
	recs := provenance(t, tm)
	if i := slices.IndexFunc(recs, func(r Record) bool { return r.Kind == KindMessage && r.Text == "use other.txt instead" }); i < 0 {
		t.Fatal("no message record")
	}
	if err := tm.Send("root", s.ID, "too late"); err == nil {
		t.Fatal("a finished child took a message")
	}
}

// TestSendLimits: per child at most 96 pending messages and 4,325,376
// pending bytes (33 messages of 128 KiB); overflow is rejected before
// provenance, under concurrent sends.
func TestSendLimits(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.stalls(2) // the children never reach a step: nothing is delivered
	tm := f.team()
	a, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "a"})
	b, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "b"})
	for _, s := range []Snapshot{a, b} {
		waitStatus(t, tm, s.ID, StatusRunning)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		tm.mu.Lock()
		started := tm.nodes[a.ID].run != nil && tm.nodes[b.ID].run != nil
		tm.mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("runs not started")
		}
	}
	sendAll := func(id string, n int, text string) (int, []string) { return sendConcurrently(tm, id, n, text) }
	if ok, lim := sendAll(a.ID, MaxPendingMessages+1, "small"); ok != MaxPendingMessages || len(lim) != 1 || lim[0] != "pending_messages" {
		t.Fatalf("97 small messages: %d accepted, rejections %v", ok, lim)
	}
	big := strings.Repeat("x", MaxTextBytes)
	if ok, lim := sendAll(b.ID, 34, big); ok != 33 || len(lim) != 1 || lim[0] != "pending_bytes" {
		t.Fatalf("34 messages of 128 KiB: %d accepted, rejections %v", ok, lim)
	}
	if err := tm.Send("root", b.ID, big+"x"); limitOf(err) != "text" {
		t.Fatalf("128 KiB + 1: %v", err)
	}
	if n := countKind(provenance(t, tm), KindMessage); n != MaxPendingMessages+33 {
		t.Fatalf("%d message records, want %d (a rejected message writes nothing)", n, MaxPendingMessages+33)
	}
}

// TestEndedChildStopsDescendants: a child whose run ends (here it
// completes) cancels its own children.
func TestEndedChildStopsDescendants(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.childSrv.Enqueue(providertest.Stall().ForRequestContaining("GRANDCHILD"), providertest.Text("done").Pace(50*time.Millisecond).ForRequestContaining("CHILD-TASK"))
	tm := f.team()
	c1, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "CHILD-TASK"})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := tm.Spawn(SpawnRequest{Parent: c1.ID, Task: "GRANDCHILD"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, c1.ID, StatusCompleted)
	waitStatus(t, tm, c2.ID, StatusCancelled)
}

// TestMessageParentLeasedOnce: a child's message reaches its parent's next
// wait, which consumes it only once its result is durable: a later wait
// does not get it again. The message is in provenance first.
func TestMessageParentLeasedOnce(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.childSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("m1", ToolMessageParent, `{"message":"which file, QUESTION-1?"}`)),
		providertest.Text("child done"),
	)
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("s1", ToolSpawn, `{"task":"ask"}`)),
		providertest.Reply(providertest.FunctionCall("w1", ToolWait, `{"timeout_seconds":30}`)),
		providertest.Reply(providertest.FunctionCall("w2", ToolWait, `{"timeout_seconds":30}`)),
		providertest.Text("root done"),
	)
	f.completeRoot(t, "go")
	results := map[string]string{}
	for _, e := range f.root.Session().Branch() {
		if e.Result != nil {
			results[e.Result.CallID] = e.Result.Text
		}
	}
	if !strings.Contains(results["w1"], "QUESTION-1") || !strings.Contains(results["w1"], `"from":"root/worker1"`) {
		t.Fatalf("first wait lacks the message: %s", results["w1"])
	}
	if strings.Contains(results["w2"], "QUESTION-1") {
		t.Fatalf("a committed message came again: %s", results["w2"])
	}
	if !strings.Contains(results["w1"]+results["w2"], `"automatic":true,"text":"completed"`) {
		t.Fatalf("no automatic completion notice: %s | %s", results["w1"], results["w2"])
	}
	teams, _ := filepath.Glob(filepath.Join(f.sessions, "teams", "team-*"))
	recs, err := ReadProvenance(filepath.Join(teams[0], JournalName))
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(recs, func(r Record) bool { return r.Kind == KindMessage && r.From == "root/worker1" && r.Path == "root" }); i < 0 {
		t.Fatal("no message record")
	}
}

// TestWaitEndsOnMessage: a wait returns as soon as a child's message is
// in the mailbox, the child still running; a full mailbox refuses a
// direct message before provenance.
func TestWaitEndsOnMessage(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.childSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("m1", ToolMessageParent, `{"message":"progress"}`)),
		providertest.Stall(),
	)
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "work"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	snaps, err := tm.Wait(context.Background(), "root", nil, 30*time.Second)
	if err != nil || time.Since(t0) > 20*time.Second || snaps[0].Status != StatusRunning {
		t.Fatalf("wait returned %v after %v: %+v", err, time.Since(t0), snaps)
	}
	page, resolve := tm.Lease("root", MaxPageBytes)
	if len(page) != 1 || page[0].Text != "progress" || page[0].From != s.Path {
		t.Fatalf("page %+v", page)
	}
	resolve(true)
	before := countKind(provenance(t, tm), KindMessage)
	for i := range MaxMailboxMessages {
		if err := tm.Post(s.ID, "note"); err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
	}
	if err := tm.Post(s.ID, "one too many"); limitOf(err) != "mailbox" {
		t.Fatalf("65th message: %v, want the mailbox limit", err)
	}
	if n := countKind(provenance(t, tm), KindMessage) - before; n != MaxMailboxMessages {
		t.Fatalf("%d message records, want %d", n, MaxMailboxMessages)
	}
}

// TestWaitPagesEscapedMessage: a child's message of control characters,
// which JSON escapes to six bytes each, reaches the root whole, in wait
// results the broker never cuts. The page was bounded by the message's
// raw bytes: its escaped text passed the result limit, the broker cut
// every wait result and restored the page, and the root never got it.
func TestWaitPagesEscapedMessage(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	msg := strings.Repeat("\x01", 12000)
	f.childSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("m1", ToolMessageParent, `{"message":"`+strings.Repeat(`\u0001`, len(msg))+`"}`)),
		providertest.Text("child done"),
	)
	f.rootSrv.Enqueue(providertest.Reply(providertest.FunctionCall("s1", ToolSpawn, `{"task":"ask"}`)))
	for i := range 7 {
		f.rootSrv.Enqueue(providertest.Reply(providertest.FunctionCall("w"+strconv.Itoa(i), ToolWait, `{"timeout_seconds":30}`)))
	}
	f.rootSrv.Enqueue(providertest.Text("root done"))
	f.completeRoot(t, "go")
	var got strings.Builder
	for _, e := range f.root.Session().Branch() {
		if e.Result == nil || !strings.HasPrefix(e.Result.CallID, "w") {
			continue
		}
		var res struct{ Messages []Message }
		if err := json.Unmarshal([]byte(e.Result.Text), &res); err != nil {
			t.Fatalf("wait %s result is not whole (%d bytes): %v", e.Result.CallID, len(e.Result.Text), err)
		}
		for _, m := range res.Messages {
			if !m.Automatic {
				got.WriteString(m.Text)
			}
		}
	}
	if got.String() != msg {
		t.Fatalf("the root got %d of the message's %d bytes", got.Len(), len(msg))
	}
}

// TestChildErrorBounded: a child whose provider failed with a very long
// message is reported to the root with its error clipped, so agents_wait
// and agents_list results stay whole (the broker never cuts them).
func TestChildErrorBounded(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.childSrv.Enqueue(providertest.Status(400, "invalid_request_error", "bad", strings.Repeat("why ", 15_000)))
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("s1", ToolSpawn, `{"task":"fail"}`)),
		providertest.Reply(providertest.FunctionCall("w1", ToolWait, `{"timeout_seconds":30}`)),
		providertest.Reply(providertest.FunctionCall("l1", ToolList, `{}`)),
		providertest.Text("root done"),
	)
	f.completeRoot(t, "go")
	for _, e := range f.root.Session().Branch() {
		if e.Result == nil || e.Result.CallID == "s1" {
			continue
		}
		var res struct{ Agents []view }
		if err := json.Unmarshal([]byte(e.Result.Text), &res); err != nil || len(res.Agents) != 1 {
			t.Fatalf("%s result is not whole (%d bytes): %v", e.Result.CallID, len(e.Result.Text), err)
		}
		if a := res.Agents[0]; a.Status != StatusFailed || !strings.Contains(a.Error, "why why") || len(a.Error) > maxErrorBytes+len("…") {
			t.Fatalf("%s shows the child as %s with a %d-byte error", e.Result.CallID, a.Status, len(a.Error))
		}
	}
}

// TestChildWriteMakesParentReadStale: each agent's file reads are its own.
// The root read a file, a child replaced it, and the root's write from
// what it had read is refused as stale instead of silently undoing the
// child's work (the agents shared one tracker of what was read, which
// the child's write refreshed for everyone).
func TestChildWriteMakesParentReadStale(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	if err := os.WriteFile(filepath.Join(f.workspace, "f.txt"), []byte("v0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.childSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("c1", "write", `{"path":"f.txt","content":"child\n"}`)),
		providertest.Text("child wrote"),
	)
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"f.txt"}`)),
		providertest.Reply(providertest.FunctionCall("s1", ToolSpawn, `{"task":"rewrite f.txt"}`)),
		providertest.Reply(providertest.FunctionCall("w1", ToolWait, `{"timeout_seconds":30}`)),
		providertest.Reply(providertest.FunctionCall("r2", "write", `{"path":"f.txt","content":"root\n"}`)),
		providertest.Text("root done"),
	)
	f.completeRoot(t, "go")
	if got, _ := os.ReadFile(filepath.Join(f.workspace, "f.txt")); string(got) != "child\n" {
		t.Fatalf("f.txt = %q: the root's stale write replaced the child's", got)
	}
	for _, e := range f.root.Session().Branch() {
		if e.Result != nil && e.Result.CallID == "r2" && (!e.Result.IsError || !strings.Contains(e.Result.Text, "read it again")) {
			t.Fatalf("the root's stale write: %q", e.Result.Text)
		}
	}
}

// TestSpawnEmptyToolsRefused: a spawn naming no tools ("tools": []) is
// refused with what to do, rather than read as "all of them": a model
// asking for a child without tools got one with bash.
func TestSpawnEmptyToolsRefused(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.childSrv.Enqueue(providertest.Text("child done"))
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("s1", ToolSpawn, `{"task":"think only","tools":[]}`)),
		providertest.Text("root done"),
	)
	f.completeRoot(t, "go")
	for _, e := range f.root.Session().Branch() {
		if e.Result != nil && e.Result.CallID == "s1" && (!e.Result.IsError || !strings.Contains(e.Result.Text, "omit")) {
			t.Fatalf("spawn with an empty tool list: %q", e.Result.Text)
		}
	}
}

// TestNewChildHasNoEarlierReads: a child of a later run, though it has
// the same agent path (root/worker1) as one of an earlier run, has read
// nothing: its write is not refused as stale because of what the
// earlier child read.
func TestNewChildHasNoEarlierReads(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	file := filepath.Join(f.workspace, "f.txt")
	if err := os.WriteFile(file, []byte("v0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.childSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("c1", "read", `{"path":"f.txt"}`)).ForRequestContaining("READER"),
		providertest.Text("read it").ForRequestContaining("READER"),
		providertest.Reply(providertest.FunctionCall("c2", "write", `{"path":"f.txt","content":"new\n"}`)).ForRequestContaining("WRITER"),
		providertest.Text("wrote it").ForRequestContaining("WRITER"),
	)
	one := f.team()
	a, err := one.Spawn(SpawnRequest{Parent: "root", Task: "READER"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, one, a.ID, StatusCompleted)
	one.Shutdown(context.Background(), "run_one", SettleTimeout)
	if err := os.WriteFile(file, []byte("v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	two := f.team()
	b, err := two.Spawn(SpawnRequest{Parent: "root", Task: "WRITER"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Path != a.Path {
		t.Fatalf("paths %s and %s: the test needs the same one", a.Path, b.Path)
	}
	waitStatus(t, two, b.ID, StatusCompleted)
	if got, _ := os.ReadFile(file); string(got) != "new\n" {
		t.Fatalf("f.txt = %q: the new child's write was refused", got)
	}
}
