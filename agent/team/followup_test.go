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

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitFor waits until agent id of tm satisfies ok.
func waitFor(t *testing.T, tm *Team, id string, ok func(Snapshot) bool) Snapshot {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, s := range tm.List("root") {
			if s.ID == id && ok(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s never reached the state: %+v", id, tm.List("root"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// userTexts are the user entries of the child's session, in order.
func userTexts(tm *Team, id string) []string {
	tm.mu.Lock()
	sess := tm.nodes[id].sess
	tm.mu.Unlock()
	var out []string
	for _, e := range sess.Branch() {
		if e.Type == session.EntryUser {
			out = append(out, e.Text)
		}
	}
	return out
}

// TestAdmitBacklog: the backlog takes 32 follow-ups and 4,325,376 bytes;
// one more of either is refused.
func TestAdmitBacklog(t *testing.T) {
	for _, c := range []struct {
		count, bytes, size int
		want               string
	}{
		{MaxBacklogMessages - 1, 0, 1, ""},
		{MaxBacklogMessages, 0, 1, "followup_backlog_messages"},
		{MaxBacklogMessages - 1, MaxBacklogBytes - 10, 10, ""},
		{MaxBacklogMessages - 1, MaxBacklogBytes - 10, 11, "followup_backlog_bytes"},
	} {
		if got := limitOf(admitBacklog(c.count, c.bytes, c.size)); got != c.want {
			t.Errorf("admitBacklog(%d, %d, %d) = %q, want %q", c.count, c.bytes, c.size, got, c.want)
		}
	}
}

// TestFollowupBacklogBound: a running child accepts 32 concurrent
// follow-ups into its backlog and refuses the 33rd before provenance;
// once its run completes it runs them one at a time in the order they
// were accepted, each charged until its prompt is in the child's session.
func TestFollowupBacklogBound(t *testing.T) {
	release := make(chan struct{})
	f := newFixture(t, fixtureOpt{native: true, onEvent: func(s Snapshot, ev agent.Event) {
		if s.Task == "FIRST" {
			<-release
		}
	}})
	f.childSrv.Enqueue(providertest.Text("first"))
	for i := range MaxBacklogMessages {
		f.childSrv.Enqueue(providertest.Text(fmt.Sprintf("answer %d", i)))
	}
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "FIRST"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusRunning)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var limits []string
	for i := range MaxBacklogMessages + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := tm.Followup("root", s.ID, fmt.Sprintf("FOLLOWUP-%02d", i))
			if err != nil {
				mu.Lock()
				limits = append(limits, limitOf(err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(limits) != 1 || limits[0] != "followup_backlog_messages" {
		t.Fatalf("33 follow-ups to a running child: rejections %v, want one followup_backlog_messages", limits)
	}
	if got := tm.List("root")[0]; got.Status != StatusRunning || got.Queued != MaxBacklogMessages {
		t.Fatalf("while running: %s with %d queued, want running with 32", got.Status, got.Queued)
	}
	var accepted []string
	for _, r := range provenance(t, tm) {
		if r.Kind == KindMessage && r.Followup {
			accepted = append(accepted, r.Text)
		}
	}
	if len(accepted) != MaxBacklogMessages {
		t.Fatalf("%d follow-up records, want 32 (the refused one writes nothing)", len(accepted))
	}
	close(release)
	got := waitFor(t, tm, s.ID, func(s Snapshot) bool { return s.Status == StatusIdle && s.Queued == 0 })
	if want := fmt.Sprintf("answer %d", MaxBacklogMessages-1); got.Final != want || got.Error != "" {
		t.Fatalf("after the backlog: final %q error %q, want %q", got.Final, got.Error, want)
	}
	if users := userTexts(tm, s.ID); strings.Join(users, ",") != "FIRST,"+strings.Join(accepted, ",") {
		t.Fatalf("the child's prompts %v, want FIRST then the accepted order %v", users, accepted)
	}
	var delivered []string
	for _, r := range provenance(t, tm) {
		if r.Kind == KindAgentStatus && r.Status == string(StatusPending) && r.Task != "" {
			delivered = append(delivered, r.Task)
		}
	}
	if strings.Join(delivered, ",") != strings.Join(accepted, ",") {
		t.Fatalf("deliveries %v, want the accepted order", delivered)
	}
}

// TestFollowupRequeueOnFailedDelivery: a follow-up whose prompt cannot be
// appended (the child's agent is busy with another run) is not lost: it is
// retried MaxDeliveryAttempts times (each retry recorded), then the child
// is idle with it at the front of its backlog, a later follow-up queues
// behind it, and once delivery works they run in FIFO order.
func TestFollowupRequeueOnFailedDelivery(t *testing.T) {
	f := newFixture(t, fixtureOpt{native: true})
	f.childSrv.Enqueue(providertest.Text("first"), providertest.Stall(), providertest.Text("answer B"), providertest.Text("answer C"), providertest.Text("answer D"))
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "FIRST"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusIdle)
	tm.mu.Lock()
	child := tm.nodes[s.ID].agent
	tm.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	occupy, err := child.Prompt(ctx, "OCCUPY", agent.PromptOptions{}) // another run holds the child's agent
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range occupy.Events() {
		}
	}()
	for i, task := range []string{"TASK-B", "TASK-C"} {
		if _, err := tm.Followup("root", s.ID, task); err != nil {
			t.Fatalf("follow-up %s: %v", task, err)
		}
		got := waitFor(t, tm, s.ID, func(s Snapshot) bool { return s.Status == StatusIdle && s.Queued == i+1 && s.Error != "" })
		if !strings.Contains(got.Error, "could not be delivered") {
			t.Fatalf("failed delivery reported as %q", got.Error)
		}
	}
	attempts := 0
	for _, r := range provenance(t, tm) {
		attempts += b2i(r.Kind == KindAgentStatus && strings.HasPrefix(r.Text, "delivery attempt "))
	}
	if attempts != 2*(MaxDeliveryAttempts-1) {
		t.Fatalf("%d recorded retries, want %d for the two deliveries", attempts, 2*(MaxDeliveryAttempts-1))
	}
	cancel()
	occupy.Wait()
	if _, err := tm.Followup("root", s.ID, "TASK-D"); err != nil {
		t.Fatal(err)
	}
	got := waitFor(t, tm, s.ID, func(s Snapshot) bool { return s.Status == StatusIdle && s.Queued == 0 && s.Final == "answer D" })
	if got.Error != "" {
		t.Fatalf("error after delivery: %q", got.Error)
	}
	if users := userTexts(tm, s.ID); strings.Join(users, ",") != "FIRST,OCCUPY,TASK-B,TASK-C,TASK-D" {
		t.Fatalf("the child's prompts %v, want FIRST,OCCUPY,TASK-B,TASK-C,TASK-D", users)
	}
	reqs := f.childSrv.Requests()
	if len(reqs) != 5 || !strings.Contains(string(reqs[2].Raw), "TASK-B") || strings.Contains(string(reqs[2].Raw), "TASK-C") || strings.Contains(string(reqs[3].Raw), "TASK-D") {
		t.Fatalf("%d child requests, or not one run per follow-up in order", len(reqs))
	}
}

// TestInterruptKeepsBacklog: interrupting a running child with queued
// follow-ups stops its run only: it is idle (interrupted), its follow-ups
// are kept, counted and none runs; the next follow-up queues behind them
// and they all run, oldest first, each delivery recorded.
func TestInterruptKeepsBacklog(t *testing.T) {
	f := newFixture(t, fixtureOpt{native: true})
	f.stalls(1)
	f.childSrv.Enqueue(providertest.Text("answer B"), providertest.Text("answer C"), providertest.Text("answer D"))
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "FIRST"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusRunning)
	for _, task := range []string{"TASK-B", "TASK-C"} {
		if _, err := tm.Followup("root", s.ID, task); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); len(f.childSrv.Requests()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // the stall must be taken by FIRST, not by a follow-up
			t.Fatal("the first run sent no request")
		}
	}
	if _, err := tm.Interrupt("root", s.ID); err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, tm, s.ID, StatusIdle)
	if got.Queued != 2 || got.Error != "interrupted" {
		t.Fatalf("after the interrupt: %d follow-ups kept, error %q; want 2, interrupted", got.Queued, got.Error)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(f.childSrv.Requests()); n != 1 {
		t.Fatalf("%d child requests after the interrupt, want 1 (no follow-up ran)", n)
	}
	if _, err := tm.Followup("root", s.ID, "TASK-D"); err != nil {
		t.Fatal(err)
	}
	got = waitFor(t, tm, s.ID, func(s Snapshot) bool { return s.Status == StatusIdle && s.Queued == 0 && s.Final == "answer D" })
	if got.Error != "" {
		t.Fatalf("error after the backlog ran: %q", got.Error)
	}
	if users := userTexts(tm, s.ID); strings.Join(users, ",") != "FIRST,TASK-B,TASK-C,TASK-D" {
		t.Fatalf("the child's prompts %v, want FIRST,TASK-B,TASK-C,TASK-D", users)
	}
	var delivered []string
	for _, r := range provenance(t, tm) {
		if r.Kind == KindAgentStatus && r.Status == string(StatusPending) && r.Task != "" {
			delivered = append(delivered, r.Task)
		}
	}
	if strings.Join(delivered, ",") != "TASK-B,TASK-C,TASK-D" {
		t.Fatalf("recorded deliveries %v", delivered)
	}
}
