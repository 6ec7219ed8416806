package team

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// occupy starts another run on the child's agent, so that a prompt the
// team appends fails (agent.ErrBusy) until the returned release is called.
// It returns once that run's request reached srv (the child's provider),
// so the turn it takes (a stall) is never left to the next run.
func occupy(t *testing.T, tm *Team, id string, srv *providertest.Server) (release func()) {
	t.Helper()
	tm.mu.Lock()
	child := tm.nodes[id].agent
	tm.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	sent := len(srv.Requests())
	r, err := child.Prompt(ctx, "OCCUPY", agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); len(srv.Requests()) == sent; {
		if time.Now().After(deadline) {
			t.Fatal("the occupying run sent no request")
		}
		time.Sleep(time.Millisecond)
	}
	go func() {
		for range r.Events() {
		}
	}()
	t.Cleanup(cancel)
	return func() { cancel(); r.Wait() }
}

// pendingOf is the child's pending-message count and bytes.
func pendingOf(tm *Team, id string) (int, int) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return pendingLocked(tm.nodes[id])
}

// steeringTexts are the steering entries of the child's session.
func steeringTexts(tm *Team, id string) []string {
	tm.mu.Lock()
	sess := tm.nodes[id].sess
	tm.mu.Unlock()
	var out []string
	for _, e := range sess.Branch() {
		if e.Type == session.EntrySteering {
			out = append(out, e.Text)
		}
	}
	return out
}

// TestFollowupRetriedOnItsOwn: a follow-up whose delivery fails is
// retried by the child's worker without another follow-up: while it waits
// the child is pending with the failed attempt in its error (recorded
// first), and once the prompt can be appended the task runs and the
// error clears.
func TestFollowupRetriedOnItsOwn(t *testing.T) {
	f := newFixture(t, fixtureOpt{native: true})
	f.childSrv.Enqueue(providertest.Text("first"), providertest.Stall(), providertest.Text("answer B"))
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "FIRST"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusIdle)
	release := occupy(t, tm, s.ID, f.childSrv)
	if _, err := tm.Followup("root", s.ID, "TASK-B"); err != nil {
		t.Fatal(err)
	}
	got := waitFor(t, tm, s.ID, func(s Snapshot) bool {
		return s.Status == StatusPending && strings.HasPrefix(s.Error, "delivery attempt 1 of 4 failed")
	})
	if got.Queued != 1 {
		t.Fatalf("retrying with %d queued, want 1", got.Queued)
	}
	retried := false
	for _, r := range provenance(t, tm) {
		retried = retried || r.Kind == KindAgentStatus && r.Status == string(StatusPending) && strings.HasPrefix(r.Text, "delivery attempt 1 of 4 failed")
	}
	if !retried {
		t.Fatal("the retry was shown before it was recorded")
	}
	release()
	got = waitFor(t, tm, s.ID, func(s Snapshot) bool { return s.Status == StatusIdle && s.Final == "answer B" })
	if got.Error != "" || got.Queued != 0 {
		t.Fatalf("after the retry: error %q, %d queued", got.Error, got.Queued)
	}
	if users := userTexts(tm, s.ID); strings.Join(users, ",") != "FIRST,OCCUPY,TASK-B" {
		t.Fatalf("the child's prompts %v", users)
	}
}

// TestFailedChildKeepsBacklog: a generic team's child whose run fails
// keeps its context and its queued follow-ups (idle, the failure in its
// error, the parent told "failed"); none runs until the next follow-up,
// which runs behind them, oldest first.
func TestFailedChildKeepsBacklog(t *testing.T) {
	hold := make(chan struct{})
	f := newFixture(t, fixtureOpt{native: true, onEvent: func(s Snapshot, _ agent.Event) {
		if s.Task == "FIRST" {
			<-hold
		}
	}})
	f.childSrv.Enqueue(providertest.Status(400, "invalid_request_error", "bad", "scripted failure"),
		providertest.Text("answer B"), providertest.Text("answer C"))
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "FIRST"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusRunning)
	if _, err := tm.Followup("root", s.ID, "TASK-B"); err != nil {
		t.Fatal(err)
	}
	close(hold)
	got := waitFor(t, tm, s.ID, func(s Snapshot) bool { return s.Status == StatusIdle })
	if got.Queued != 1 || got.Error == "" {
		t.Fatalf("after the failure: %d queued, error %q; want 1 and the failure", got.Queued, got.Error)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(f.childSrv.Requests()); n != 1 {
		t.Fatalf("%d child requests, want 1: the backlog waits for the next follow-up", n)
	}
	if _, err := tm.Followup("root", s.ID, "TASK-C"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tm, s.ID, func(s Snapshot) bool { return s.Status == StatusIdle && s.Final == "answer C" && s.Queued == 0 })
	if users := userTexts(tm, s.ID); strings.Join(users, ",") != "FIRST,TASK-B,TASK-C" {
		t.Fatalf("the child's prompts %v", users)
	}
	page, resolve := tm.Lease("root", MaxPageBytes)
	defer resolve(false)
	if len(page) == 0 || !strings.HasPrefix(page[0].Text, "failed") || !page[0].Automatic {
		t.Fatalf("the parent's first notice %+v, want the failure", page)
	}
}

// TestSendQueuedForIdleChild: a message to an idle child is accepted,
// recorded and queued (no run starts for it); the child's next follow-up
// prompt carries the queued messages, in order, before the task, and they
// stop counting as pending only once that prompt is durable.
func TestSendQueuedForIdleChild(t *testing.T) {
	f := newFixture(t, fixtureOpt{native: true})
	f.childSrv.Enqueue(providertest.Text("first"), providertest.Text("second"))
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "FIRST"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusIdle)
	for _, m := range []string{"NOTE-1", "NOTE-2"} {
		if err := tm.Send("root", s.ID, m); err != nil {
			t.Fatalf("message to an idle child: %v", err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(f.childSrv.Requests()); n != 1 {
		t.Fatalf("%d child requests: a queued message started a run", n)
	}
	if c, b := pendingOf(tm, s.ID); c != 2 || b != 12 {
		t.Fatalf("pending %d messages, %d bytes; want 2, 12", c, b)
	}
	if _, err := tm.Followup("root", s.ID, "TASK-B"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tm, s.ID, func(s Snapshot) bool { return s.Status == StatusIdle && s.Final == "second" })
	users := userTexts(tm, s.ID)
	if want := "[message from root] NOTE-1\n\n[message from root] NOTE-2\n\nTASK-B"; len(users) != 2 || users[1] != want {
		t.Fatalf("the follow-up prompt %q, want %q", users[len(users)-1], want)
	}
	if c, _ := pendingOf(tm, s.ID); c != 0 {
		t.Fatalf("%d messages still pending after the prompt", c)
	}
	if n := countKind(provenance(t, tm), KindMessage); n != 2 {
		t.Fatalf("%d message records, want 2", n)
	}
}

// TestSendQueuedBounds: an idle child takes at most 96 queued messages and
// 4,325,376 bytes (33 of 128 KiB); one more of either, sent concurrently,
// is rejected before provenance. A service child that ended takes none.
func TestSendQueuedBounds(t *testing.T) {
	f := newFixture(t, fixtureOpt{native: true})
	f.childSrv.Enqueue(providertest.Text("a"), providertest.Text("b"))
	tm := f.team()
	a, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "a"})
	b, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "b"})
	for _, s := range []Snapshot{a, b} {
		waitStatus(t, tm, s.ID, StatusIdle)
	}
	sendAll := func(id string, n int, text string) (int, []string) { return sendConcurrently(tm, id, n, text) }
	if ok, lim := sendAll(a.ID, MaxPendingMessages+1, "small"); ok != MaxPendingMessages || len(lim) != 1 || lim[0] != "pending_messages" {
		t.Fatalf("97 messages to an idle child: %d accepted, rejections %v", ok, lim)
	}
	big := strings.Repeat("x", MaxTextBytes)
	if ok, lim := sendAll(b.ID, 34, big); ok != 33 || len(lim) != 1 || lim[0] != "pending_bytes" {
		t.Fatalf("34 messages of 128 KiB: %d accepted, rejections %v", ok, lim)
	}
	if n := countKind(provenance(t, tm), KindMessage); n != MaxPendingMessages+33 {
		t.Fatalf("%d message records, want %d", n, MaxPendingMessages+33)
	}
}

// TestQueuedMessagesRestoredOnFailedAppend: messages moved into a prompt
// stay reserved (counted) while it is appended; when the append fails they
// are back at the front, in order, a message sent meanwhile queues behind
// them, and the retried prompt carries all of them, oldest first.
func TestQueuedMessagesRestoredOnFailedAppend(t *testing.T) {
	f := newFixture(t, fixtureOpt{native: true})
	f.childSrv.Enqueue(providertest.Text("first"), providertest.Stall(), providertest.Text("second"))
	tm := f.team()
	s, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "FIRST"})
	waitStatus(t, tm, s.ID, StatusIdle)
	release := occupy(t, tm, s.ID, f.childSrv)
	for _, m := range []string{"M1", "M2"} {
		if err := tm.Send("root", s.ID, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tm.Followup("root", s.ID, "TASK"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tm, s.ID, func(s Snapshot) bool { return strings.HasPrefix(s.Error, "delivery attempt 1 ") })
	if c, _ := pendingOf(tm, s.ID); c != 2 {
		t.Fatalf("%d messages pending after the failed append, want 2", c)
	}
	if err := tm.Send("root", s.ID, "M3"); err != nil {
		t.Fatal(err)
	}
	release()
	waitFor(t, tm, s.ID, func(s Snapshot) bool { return s.Status == StatusIdle && s.Final == "second" })
	users := userTexts(tm, s.ID)
	want := "[message from root] M1\n\n[message from root] M2\n\n[message from root] M3\n\nTASK"
	if users[len(users)-1] != want {
		t.Fatalf("the delivered prompt %q, want %q", users[len(users)-1], want)
	}
	if c, _ := pendingOf(tm, s.ID); c != 0 {
		t.Fatalf("%d pending after delivery", c)
	}
}

// TestPeerMessages: an agent messages its peers (children of its parent)
// and its own descendants, never its parent's peers, its peers' children
// or itself.
func TestPeerMessages(t *testing.T) {
	f := newFixture(t, fixtureOpt{native: true})
	f.stalls(3)
	tm := f.team()
	w1, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "one"})
	w2, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "two"})
	w3, err := tm.Spawn(SpawnRequest{Parent: w1.ID, Task: "three"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{w1.ID, w2.ID, true},  // peer
		{w2.ID, w1.ID, true},  // peer
		{w1.ID, w3.ID, true},  // own child
		{"root", w3.ID, true}, // descendant
		{w3.ID, w2.ID, false}, // the parent's peer
		{w2.ID, w3.ID, false}, // a peer's child
		{w1.ID, w1.ID, false}, // itself
		{w3.ID, "root", false},
	} {
		err := tm.Send(c.from, c.to, "hello "+c.to)
		if (err == nil) != c.ok {
			t.Errorf("%s -> %s: %v, want ok=%v", c.from, c.to, err, c.ok)
		}
	}
	var froms []string
	for _, r := range provenance(t, tm) {
		if r.Kind == KindMessage {
			froms = append(froms, r.From+">"+r.Path)
		}
	}
	if want := "root/worker1>root/worker2,root/worker2>root/worker1,root/worker1>root/worker1/worker3,root>root/worker1/worker3"; strings.Join(froms, ",") != want {
		t.Fatalf("message records %v, want %s (a refused message writes nothing)", froms, want)
	}
}

// TestNativeSendToPeer: through the native send_message tool a child
// messages an idle peer; the message waits, queued, for the peer's next
// follow-up and arrives in its prompt from the sender's path.
func TestNativeSendToPeer(t *testing.T) {
	f := newFixture(t, fixtureOpt{native: true})
	f.childSrv.Enqueue(providertest.Text("two done").ForRequestContaining("TASK-TWO"))
	tm := f.team()
	w2, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "TASK-TWO"})
	waitStatus(t, tm, w2.ID, StatusIdle)
	f.childSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("p1", NativeSend, fmt.Sprintf(`{"agent_id":%q,"message":"PEER-NOTE"}`, w2.ID))).ForRequestContaining("TASK-ONE"),
		providertest.Text("one done").ForRequestContaining("TASK-ONE"),
	)
	w1, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "TASK-ONE"})
	waitStatus(t, tm, w1.ID, StatusIdle)
	if c, _ := pendingOf(tm, w2.ID); c != 1 {
		t.Fatalf("%d messages queued for the idle peer, want 1", c)
	}
	f.childSrv.Enqueue(providertest.Text("two again"))
	if _, err := tm.Followup("root", w2.ID, "TASK-AGAIN"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tm, w2.ID, func(s Snapshot) bool { return s.Status == StatusIdle && s.Final == "two again" })
	users := userTexts(tm, w2.ID)
	if want := "[message from root/worker2] PEER-NOTE\n\nTASK-AGAIN"; users[len(users)-1] != want {
		t.Fatalf("the peer's prompt %q, want %q", users[len(users)-1], want)
	}
}

// TestWorkerCommandBackpressure: a worker's command channel holds 32
// commands; while its worker is busy (its event consumer paces it) 32
// messages fit and the 33rd meets control backpressure: every send
// returns at once, nothing is dropped, and once the worker drains its
// channel all 33 reach the child in the order they were accepted.
func TestWorkerCommandBackpressure(t *testing.T) {
	for _, sends := range []int{MaxCommands, MaxCommands + 1} {
		t.Run(fmt.Sprint(sends), func(t *testing.T) {
			hold, held := make(chan struct{}), make(chan struct{})
			var once sync.Once
			f := newFixture(t, fixtureOpt{onEvent: func(s Snapshot, _ agent.Event) {
				once.Do(func() { close(held); <-hold })
			}})
			// The run's first response waits too, so the run is still
			// taking input when the worker gets to its commands.
			f.childSrv.Enqueue(
				providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"missing.txt"}`)).HoldUntil(hold),
				providertest.Text("done"),
			)
			tm := f.team()
			s, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "work"})
			<-held // the worker is inside its event consumer
			t0 := time.Now()
			var want []string
			for i := range sends {
				m := fmt.Sprintf("M%02d", i)
				if err := tm.Send("root", s.ID, m); err != nil {
					t.Fatal(err)
				}
				want = append(want, "[message from root] "+m)
			}
			if d := time.Since(t0); d > 10*time.Second {
				t.Fatalf("sends blocked for %v", d)
			}
			if got, wantBP := tm.backpressure.Load(), int64(sends-MaxCommands); got != wantBP {
				t.Fatalf("%d commands met backpressure, want %d", got, wantBP)
			}
			if c, _ := pendingOf(tm, s.ID); c != sends {
				t.Fatalf("%d pending, want %d", c, sends)
			}
			close(hold)
			waitStatus(t, tm, s.ID, StatusCompleted)
			if got := steeringTexts(tm, s.ID); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("steering %v, want %v", got, want)
			}
			if c, _ := pendingOf(tm, s.ID); c != 0 {
				t.Fatalf("%d pending after delivery", c)
			}
		})
	}
}

// TestInterruptDuringRetry: an interrupt while a follow-up's delivery
// waits for its retry stops the retries at once: the child is idle,
// interrupted, the follow-up kept first, and it runs with the next one.
func TestInterruptDuringRetry(t *testing.T) {
	f := newFixture(t, fixtureOpt{native: true})
	f.childSrv.Enqueue(providertest.Text("first"), providertest.Stall(), providertest.Text("answer B"), providertest.Text("answer C"))
	tm := f.team()
	s, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "FIRST"})
	waitStatus(t, tm, s.ID, StatusIdle)
	release := occupy(t, tm, s.ID, f.childSrv)
	if _, err := tm.Followup("root", s.ID, "TASK-B"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tm, s.ID, func(s Snapshot) bool { return strings.HasPrefix(s.Error, "delivery attempt 1 ") })
	if _, err := tm.Interrupt("root", s.ID); err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, tm, s.ID, StatusIdle)
	if got.Queued != 1 || got.Error != "interrupted" {
		t.Fatalf("after the interrupt: %d queued, error %q", got.Queued, got.Error)
	}
	release()
	time.Sleep(RetryBackoff * 4)
	if users := userTexts(tm, s.ID); strings.Join(users, ",") != "FIRST,OCCUPY" {
		t.Fatalf("a retry ran after the interrupt: %v", users)
	}
	if _, err := tm.Followup("root", s.ID, "TASK-C"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tm, s.ID, func(s Snapshot) bool { return s.Status == StatusIdle && s.Final == "answer C" })
	if users := userTexts(tm, s.ID); strings.Join(users, ",") != "FIRST,OCCUPY,TASK-B,TASK-C" {
		t.Fatalf("the child's prompts %v", users)
	}
}

// TestIdleChildEndsWithItsParentsRun: an idle child of a generic team
// whose parent's run ends is ended (cancelled) by its worker and takes no
// follow-up: it is not left idle with a cancelled context.
func TestIdleChildEndsWithItsParentsRun(t *testing.T) {
	hold := make(chan struct{})
	f := newFixture(t, fixtureOpt{native: true})
	f.childSrv.Enqueue(
		providertest.Text("grand done").ForRequestContaining("GRAND"),
		providertest.Text("parent done").HoldUntil(hold).ForRequestContaining("PARENT"),
	)
	tm := f.team()
	p, _ := tm.Spawn(SpawnRequest{Parent: "root", Task: "PARENT"})
	waitStatus(t, tm, p.ID, StatusRunning)
	g, err := tm.Spawn(SpawnRequest{Parent: p.ID, Task: "GRAND"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, g.ID, StatusIdle)
	close(hold)
	waitStatus(t, tm, p.ID, StatusIdle)
	waitStatus(t, tm, g.ID, StatusCancelled)
	if _, err := tm.Followup("root", g.ID, "again"); err == nil {
		t.Fatal("a child whose parent's run ended took a follow-up")
	}
}
