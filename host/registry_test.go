package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/tools"
)

// These tests drive the open-session registry, the event stream and the
// pending approvals through the host's API only: no JSON-RPC, a fake
// event sink and fake activities.

// fakeRun is an activity: Cancel records the cancel, and the run ends
// (Done) only when the test says so.
type fakeRun struct {
	cancelled chan struct{}
	once      sync.Once
	done      chan struct{}
}

func newFakeRun() *fakeRun {
	return &fakeRun{cancelled: make(chan struct{}), done: make(chan struct{})}
}

func (r *fakeRun) Cancel(string)         { r.once.Do(func() { close(r.cancelled) }) }
func (r *fakeRun) Done() <-chan struct{} { return r.done }

// openIn creates a session and holds it open in reg.
func openIn(t *testing.T, th *testHost, reg *host.Registry[*host.OpenSession]) *host.OpenSession {
	t.Helper()
	o := host.NewOpenSession(th.create(t, host.Spec{}), 0, 0)
	got, err := reg.Add(o)
	if err != nil || got != o {
		t.Fatalf("add %s: %v, %v", o.ID(), got, err)
	}
	return o
}

func newRegistry(max int) *host.Registry[*host.OpenSession] {
	return host.NewRegistry[*host.OpenSession](host.RegistryOptions{MaxOpen: max, Settle: 5 * time.Second})
}

// TestRegistryBound: opening one session more than MaxOpen releases the
// least recently used idle session (a later Use says ErrReleased, so a
// front door opens it again); a busy session (a run, a pending approval)
// is never released, and with every session busy the new one is refused
// with a *host.LimitError.
func TestRegistryBound(t *testing.T) {
	th := newTestHost(t, hosttest.Options{})
	reg := newRegistry(2)
	a := openIn(t, th, reg)
	b := openIn(t, th, reg)
	time.Sleep(time.Millisecond)
	if _, err := reg.Use(a.ID()); err != nil { // a is now the most recent
		t.Fatal(err)
	}
	c := openIn(t, th, reg)
	if _, err := reg.Use(b.ID()); !errors.Is(err, host.ErrReleased) {
		t.Fatalf("use of the least recently used session after the bound: %v, want ErrReleased", err)
	}
	if _, ok := reg.Lookup(a.ID()); !ok {
		t.Fatal("the more recently used session was released")
	}

	run := newFakeRun()
	if err := a.Begin(run); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddPending(t.Context(), host.ApprovalView{RunID: "r", CallID: "c", Digest: "d"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	d := host.NewOpenSession(th.create(t, host.Spec{}), 0, 0)
	_, err := reg.Add(d)
	if limit, ok := errors.AsType[*host.LimitError](err); !ok || limit.Open != 2 {
		t.Fatalf("add with every session busy: %v, want *host.LimitError{Open: 2}", err)
	}
	if reg.Len() != 2 {
		t.Errorf("%d sessions open, want 2 (none released)", reg.Len())
	}
	a.End(run)
	if got, err := reg.Add(d); err != nil || got != d {
		t.Fatalf("add once a run ended: %v", err)
	}
	if _, err := reg.Use(a.ID()); !errors.Is(err, host.ErrReleased) {
		t.Errorf("the session whose run ended: %v, want ErrReleased", err)
	}
	if _, ok := reg.Lookup(c.ID()); !ok {
		t.Error("the session waiting for an approval was released")
	}
}

// TestRegistryNeverReleasesAStartingRun: a run that starts while the
// registry releases idle sessions either starts in a session that stays
// open, or sees the session closing; a session is never released under
// a run that just started. The run's start is held inside Start while
// the release runs.
func TestRegistryNeverReleasesAStartingRun(t *testing.T) {
	th := newTestHost(t, hosttest.Options{})
	reg := newRegistry(4)
	o := openIn(t, th, reg)
	starting, release := make(chan struct{}), make(chan struct{})
	run := newFakeRun()
	started := make(chan error, 1)
	go func() {
		_, err := o.Start(func() (host.Activity, error) {
			close(starting)
			<-release
			return run, nil
		})
		started <- err
	}()
	<-starting
	released := make(chan struct{})
	go func() { reg.ReleaseIdle(0); close(released) }()
	select {
	case <-released:
		t.Fatal("the idle release did not wait for the run starting in the session")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	<-released
	if _, ok := reg.Lookup(o.ID()); !ok {
		t.Fatal("the session was released with its run just started")
	}
	select {
	case <-run.cancelled:
		t.Fatal("the starting run was cancelled by the idle release")
	default:
	}
	o.End(run)
	close(run.done)
	reg.ReleaseIdle(0)
	if _, err := reg.Use(o.ID()); !errors.Is(err, host.ErrReleased) {
		t.Errorf("after the run: %v, want ErrReleased", err)
	}
}

// TestRegistryClose: a client's close cancels the session's run and
// the approvals it waits for, waits for the run to end, and makes later
// uses ErrClosed while it is under way; a second close waits for the
// first; a run cannot start in a closing session; once closed, the
// session is not open (ErrNotOpen, not ErrReleased).
func TestRegistryClose(t *testing.T) {
	th := newTestHost(t, hosttest.Options{})
	reg := newRegistry(4)
	o := openIn(t, th, reg)
	run := newFakeRun()
	if err := o.Begin(run); err != nil {
		t.Fatal(err)
	}
	pa, err := o.AddPending(t.Context(), host.ApprovalView{RunID: "r", CallID: "c", Digest: "d"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	first, second := make(chan struct{}), make(chan struct{})
	go func() { reg.Close(o, "test"); close(first) }()
	<-run.cancelled
	<-pa.Context().Done()
	if !errors.Is(context.Cause(pa.Context()), host.ErrClosed) {
		t.Errorf("pending approval ended with %v, want ErrClosed", context.Cause(pa.Context()))
	}
	go func() { reg.Close(o, "again"); close(second) }()
	if _, err := reg.Use(o.ID()); !errors.Is(err, host.ErrClosed) {
		t.Errorf("use while closing: %v, want ErrClosed", err)
	}
	if err := o.Begin(newFakeRun()); !errors.Is(err, host.ErrClosed) {
		t.Errorf("a run in a closing session: %v, want ErrClosed", err)
	}
	select {
	case <-first:
		t.Fatal("close returned before the run ended")
	case <-second:
		t.Fatal("a second close returned before the first")
	case <-time.After(50 * time.Millisecond):
	}
	o.End(run)
	close(run.done)
	<-first
	<-second
	if _, err := reg.Use(o.ID()); !errors.Is(err, host.ErrNotOpen) {
		t.Errorf("use after the close: %v, want ErrNotOpen", err)
	}
}

// TestRegistryCloseIdleAndHold: a rewind (a Hold) keeps a session busy:
// no run starts under it, CloseIdle (delete) leaves it, and the idle
// release does not take it; once released, CloseIdle closes it.
func TestRegistryCloseIdleAndHold(t *testing.T) {
	th := newTestHost(t, hosttest.Options{})
	reg := newRegistry(4)
	o := openIn(t, th, reg)
	h, err := o.Hold()
	if err != nil {
		t.Fatal(err)
	}
	err = o.Begin(newFakeRun())
	if busy, ok := errors.AsType[*host.BusyError](err); !ok || busy.Holder != h {
		t.Errorf("a run during a hold: %v, want *host.BusyError holding the hold", err)
	}
	if reg.CloseIdle(o, "delete") {
		t.Error("CloseIdle closed a session under a hold")
	}
	reg.ReleaseIdle(0)
	if _, ok := reg.Lookup(o.ID()); !ok {
		t.Fatal("released under a hold")
	}
	o.Release(h)
	if !reg.CloseIdle(o, "delete") {
		t.Error("CloseIdle left an idle session open")
	}
}

// TestReleaseIdleUntil: a session unused for the idle timeout is
// released by the release loop; using it again is ErrReleased.
func TestReleaseIdleUntil(t *testing.T) {
	th := newTestHost(t, hosttest.Options{})
	reg := newRegistry(4)
	o := openIn(t, th, reg)
	go reg.ReleaseIdleUntil(t.Context(), 100*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := reg.Lookup(o.ID()); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an idle session was never released")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := reg.Use(o.ID()); !errors.Is(err, host.ErrReleased) {
		t.Errorf("use after an idle release: %v, want ErrReleased", err)
	}
}

// sink is a fake client: it records the params Send hands it.
type sink struct {
	mu   sync.Mutex
	seqs []int64
}

// event is one Emission to the sink.
type event struct {
	k     *sink
	ready bool
}

func (e event) Params(seq int64) json.RawMessage { return json.RawMessage(strconv.FormatInt(seq, 10)) }

func (e event) Send(params json.RawMessage) {
	seq, _ := strconv.ParseInt(string(params), 10, 64)
	e.k.mu.Lock()
	e.k.seqs = append(e.k.seqs, seq)
	e.k.mu.Unlock()
}

func (e event) Ready() bool { return e.ready }

// TestEmitOrderAndReattach: concurrent emitters of one session reach
// the client in seq order; a reattaching client gets the kept events
// after its cursor, and its snapshot event takes the next seq without
// being kept.
func TestEmitOrderAndReattach(t *testing.T) {
	th := newTestHost(t, hosttest.Options{})
	o := host.NewOpenSession(th.create(t, host.Spec{}), 0, 0)
	k := &sink{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				o.Emit("e", event{k: k})
			}
		})
	}
	wg.Wait()
	if len(k.seqs) != 400 {
		t.Fatalf("%d events sent, want 400", len(k.seqs))
	}
	for i, seq := range k.seqs {
		if seq != int64(i+1) {
			t.Fatalf("event %d sent with seq %d: seq order is not send order", i, seq)
		}
	}
	if o.TryEmit("e", event{k: k, ready: false}) {
		t.Error("TryEmit emitted though not ready")
	}
	after := int64(398)
	var snapSeq int64
	r := o.Reattach(o.Epoch(), &after, func(r host.Reattachment, seq int64) { snapSeq = seq })
	if len(r.Events) != 2 || r.Events[0].Seq != 399 || r.Truncated || r.LastSeq != 400 || r.Epoch != o.Epoch() {
		t.Errorf("reattach after 398: %+v", r)
	}
	if snapSeq != 401 {
		t.Errorf("snapshot seq %d, want 401", snapSeq)
	}
	if !o.TryEmit("e", event{k: k, ready: true}) || k.seqs[len(k.seqs)-1] != 402 {
		t.Errorf("the event after the snapshot: seqs end %v, want 402", k.seqs[len(k.seqs)-3:])
	}
	r = o.Reattach("another-epoch", &after, func(host.Reattachment, int64) {})
	if !r.Truncated || len(r.Events) != 401 {
		t.Errorf("reattach from another epoch: %d events, truncated %v; want every kept one, truncated", len(r.Events), r.Truncated)
	}
}

// TestPendingApprovals: an approval's one deadline is the sooner of the
// front door's timeout and the broker's expiry; the first answer wins
// and is bound to the digest; a refusal is Wait's error; a reattach
// resends an approval once, and again only once no request for it is
// outstanding; Decide answers by digest (any case) or call id and
// refuses an ambiguous approve.
func TestPendingApprovals(t *testing.T) {
	th := newTestHost(t, hosttest.Options{})
	reg := newRegistry(4)
	o := openIn(t, th, reg)
	ctx := t.Context()
	view := func(call string) host.ApprovalView {
		return host.ApprovalView{SessionID: o.ID(), RunID: "r", CallID: call, Digest: "ABC" + call}
	}

	if _, err := o.AddPending(ctx, host.ApprovalView{CallID: "old", ExpiresAt: time.Now().Add(-time.Second)}, time.Minute); !errors.Is(err, tools.ErrApprovalExpired) {
		t.Errorf("an approval past the broker's expiry: %v, want ErrApprovalExpired", err)
	}
	soon := time.Now().Add(30 * time.Millisecond)
	v := view("x")
	v.ExpiresAt = soon
	late, err := o.AddPending(ctx, v, time.Hour)
	if err != nil || !late.View.ExpiresAt.Equal(soon) {
		t.Fatalf("deadline %v (%v), want the broker's %v", late.View.ExpiresAt, err, soon)
	}
	if _, err := late.Wait(nil); !errors.Is(err, tools.ErrApprovalExpired) {
		t.Errorf("wait past the deadline: %v, want ErrApprovalExpired", err)
	}
	o.RemovePending(late)

	a, _ := o.AddPending(ctx, view("1"), time.Minute)
	b, _ := o.AddPending(ctx, view("2"), time.Minute)
	o.Asking(a)
	if got := o.Pending(); len(got) != 2 || got[0].CallID != "1" || got[1].CallID != "2" {
		t.Errorf("pending %+v, want calls 1 then 2", got)
	}
	if n, err := reg.Decide(tools.Approval{Approved: true}, "", ""); n != 0 || !isInputError(err) {
		t.Errorf("approve with two pending: %d, %v; want an input error", n, err)
	}
	resent := func() int { return len(o.Reattach("", nil, func(host.Reattachment, int64) {}).Resend) }
	if n := resent(); n != 2 {
		t.Errorf("first reattach resent %d, want both", n)
	}
	if n := resent(); n != 0 {
		t.Errorf("second reattach resent %d with requests outstanding, want none", n)
	}
	o.AskEnded(b)
	if n := resent(); n != 1 {
		t.Errorf("reattach once b's requests ended resent %d, want b alone", n)
	}

	if n, err := reg.Decide(tools.Approval{Approved: true, ForSession: true}, "", "abc1"); n != 1 || err != nil {
		t.Fatalf("approve by lower-case digest: %d, %v", n, err)
	}
	a.Resolve(tools.Approval{}) // too late: the first answer wins
	if ans, err := a.Wait(nil); err != nil || !ans.Approved || !ans.ForSession || ans.Digest != "ABC1" {
		t.Errorf("a's answer %+v, %v; want approved for the session, bound to ABC1", ans, err)
	}
	refused := errors.New("too large to show")
	b.Refuse(refused)
	if _, err := b.Wait(nil); !errors.Is(err, refused) {
		t.Errorf("b's answer: %v, want the refusal", err)
	}
	cancelled := make(chan struct{})
	close(cancelled)
	c, _ := o.AddPending(ctx, view("3"), time.Minute)
	if _, err := c.Wait(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("wait in a cancelled run: %v, want context.Canceled", err)
	}
	for _, p := range []*host.PendingApproval{a, b, c} {
		o.RemovePending(p)
	}
	if n, err := reg.Decide(tools.Approval{}, "nothing", ""); n != 0 || err != nil {
		t.Errorf("deny with nothing pending: %d, %v; want 0, nil", n, err)
	}
	if n, err := reg.Decide(tools.Approval{Approved: true}, "nothing", ""); n != 0 || !isInputError(err) {
		t.Errorf("approve with nothing pending: %d, %v; want an input error", n, err)
	}
}

// TestViewOf: a pending approval's view carries the broker's request
// and the absolute file its call changes.
func TestViewOf(t *testing.T) {
	th := newTestHost(t, hosttest.Options{})
	o := host.NewOpenSession(th.create(t, host.Spec{}), 0, 0)
	req := tools.ConfirmRequest{
		Intent: tools.EffectIntent{RunID: "r", CallID: "c", Tool: "edit", Effect: tools.WorkspaceMutation, Arguments: json.RawMessage(`{"path":"a/b.txt"}`)},
		Digest: "d", Title: "edit a/b.txt", Diff: "-x\n+y\n",
	}
	v := o.ViewOf(req)
	want := fmt.Sprintf("%s/a/b.txt", th.Workspace)
	if v.SessionID != o.ID() || v.RunID != "r" || v.CallID != "c" || v.Tool != "edit" || v.Effect != tools.WorkspaceMutation.String() || v.Path != want || v.Diff != req.Diff {
		t.Errorf("view %+v", v)
	}
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if _, ok := m["Path"]; ok {
		t.Errorf("the path is encoded: %s", b)
	}
}
