package agent

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

const (
	envDispatchChild = "OCTET_AGENT_DISPATCH_CHILD"
	envDispatchURL   = "OCTET_AGENT_DISPATCH_URL"
)

// ceilingGate is NoRetry with a hard token ceiling.
type ceilingGate struct {
	NoRetry
	budget *Budget
}

func (g ceilingGate) BeforeRequest(_ string, m provider.Model, _ *provider.Request, t session.Totals) error {
	return g.budget.Check(m.Name, t)
}

// TestDispatchCrashChild is the child half of
// TestCrashAfterDispatchIsUncertain: one completed prompt, then a second
// whose response stalls until the parent kills this process.
func TestDispatchCrashChild(t *testing.T) {
	if os.Getenv(envDispatchChild) == "" {
		t.Skip("child process of TestCrashAfterDispatchIsUncertain")
	}
	sess, err := session.Create(os.Getenv(envDispatchChild), session.Header{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{
		Session: sess, Transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: os.Getenv(envDispatchURL)}),
		Model: provider.Model{Name: "scripted"}, Host: tools.NewHost(),
		Broker: tools.NewBroker(tools.BrokerConfig{Policy: tools.UnsafeHost}),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"first", "second"} {
		r, err := a.Prompt(context.Background(), p, PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for range r.Events() {
		}
	}
	t.Fatal("the child was supposed to be killed during the second request")
}

// TestCrashAfterDispatchIsUncertain SIGKILLs a real agent process while
// the provider holds its second request: the dispatch was durable before
// the request was sent, so the reopened session knows the request may
// have been billed — its usage is uncertain (durably, with the cause),
// and under a hard ceiling the next prompt is refused without a request,
// saying why and what to do. The completed first request stays settled.
func TestCrashAfterDispatchIsUncertain(t *testing.T) {
	if os.Getenv(envDispatchChild) != "" {
		t.Skip("parent only")
	}
	srv := pt.New(t)
	srv.Enqueue(pt.Text("one").WithUsage(provider.Usage{InputTokens: 10, OutputTokens: 2}), pt.Stall())
	sessDir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDispatchCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envDispatchChild+"="+sessDir, envDispatchURL+"="+srv.URL())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	waitFor(t, func() bool { return len(srv.Requests()) == 2 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	matches, _ := filepath.Glob(filepath.Join(sessDir, "*.jsonl"))
	if len(matches) != 1 {
		t.Fatalf("session files %v", matches)
	}
	path := matches[0]
	ro, err := session.Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	tot := ro.Totals()
	ro.Close()
	if !tot.Uncertain || tot.UnsettledDispatches != 1 || tot.Requests != 1 || tot.Cause.Reason != session.ReasonUnsettledDispatch {
		t.Fatalf("after the crash, Inspect totals = %+v; want the second request unsettled, usage uncertain", tot)
	}

	sess, err := session.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if tot := sess.Totals(); !tot.Uncertain || tot.UncertainMarkers != 1 || tot.UnsettledDispatches != 0 {
		t.Fatalf("reopened totals = %+v; want the unsettled dispatch recorded as a marker", tot)
	}
	a, err := New(Config{
		Session: sess, Transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL()}),
		Model: provider.Model{Name: "scripted"}, Host: tools.NewHost(), Broker: tools.NewBroker(tools.BrokerConfig{}),
		Retry: ceilingGate{budget: &Budget{Ceilings: Ceilings{MaxTokens: 1_000_000}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(pt.Text("never sent"))
	r, err := a.Prompt(context.Background(), "third", PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs := drain(t, r)
	res := r.Wait()
	if res.Outcome != OutcomeFailed || res.Err == nil || len(srv.Requests()) != 2 {
		t.Fatalf("under a hard ceiling: outcome %s, err %v, %d requests; want a refusal without a request", res.Outcome, res.Err, len(srv.Requests()))
	}
	for _, want := range []string{"in flight when octet stopped", "start a new session", "remove the hard ceiling"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("refusal %q does not say %q", res.Err, want)
		}
	}
	uncertain := false
	for _, e := range evs {
		_, ok := e.(*ProviderUsageUncertain)
		uncertain = uncertain || ok
	}
	if !uncertain {
		t.Error("the run on the uncertain session did not say so")
	}
}

// TestRecoveredOutputIsDurable: the partial text of a replaced attempt is
// a durable recovered_output record, outside the conversation (not on the
// branch, not sent again) and outside usage; a reopened session returns it
// as the RecoveredOutput event carried it.
func TestRecoveredOutputIsDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{})
		full := pt.Text("The answer is forty two and nothing else")
		g.srv.Enqueue(full.DropAfter(full.FrameCount()/2), full)
		res, evs := g.run(context.Background(), "question")
		if res.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
		}
		rec := eventsOf[*RecoveredOutput](evs)
		if len(rec) != 1 || rec[0].Text == "" {
			t.Fatalf("recovered output events %+v", rec)
		}
		ro, err := session.Inspect(g.sess.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		got := ro.RecoveredOutputs()
		if len(got) != 1 || got[0].Text != rec[0].Text || got[0].Channel != ChannelText || got[0].RunID != res.RunID {
			t.Fatalf("durable recovered output %+v, want the event's %+v", got, rec[0])
		}
		if tot := ro.Totals(); tot.Requests != 1 || tot.UnsettledDispatches != 0 {
			t.Fatalf("totals %+v: recovered output must not count as usage, every dispatch settled", tot)
		}
		if recs := readFile(t, g.sess.Path()); count(recs, "dispatch") != 2 || count(recs, "dispatch_settled") != 2 {
			t.Fatalf("%d dispatch and %d dispatch_settled records for two requests", count(recs, "dispatch"), count(recs, "dispatch_settled"))
		}
		for _, e := range ro.Branch() {
			for _, it := range e.Items {
				if it.Text == got[0].Text {
					t.Fatalf("recovered output is on the branch: %+v", e)
				}
			}
		}
	})
}

// closingTransport closes the session when a request is opened, so the
// dispatch record cannot be written; it reports the before-send hook like
// the transport it wraps.
type closingTransport struct {
	provider.Transport
	sess *session.Session
}

func (c closingTransport) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	c.sess.Close()
	return c.Transport.Open(ctx, req)
}

func (c closingTransport) NotifiesBeforeSend() bool { return true }

// TestDispatchRecordFailureSendsNothing: when the dispatch record cannot
// be written the request is not sent and the run fails saying so.
func TestDispatchRecordFailureSendsNothing(t *testing.T) {
	srv := pt.New(t)
	srv.Enqueue(pt.Text("never"))
	sess, err := session.Create(t.TempDir(), session.Header{Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{
		Session: sess, Transport: closingTransport{provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL()}), sess},
		Model: provider.Model{Name: "scripted"}, Host: tools.NewHost(), Broker: tools.NewBroker(tools.BrokerConfig{}),
		Retry: NewCodexRecovery(RecoveryConfig{Profile: ProfileCodex, Wire: provider.WireResponses, Model: provider.Model{Name: "scripted"}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Prompt(context.Background(), "go", PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, r)
	res := r.Wait()
	if res.Outcome != OutcomeFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "record the provider request before sending it (nothing was sent)") {
		t.Fatalf("outcome %s, err %v; want a failed run saying nothing was sent", res.Outcome, res.Err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests reached the provider without a dispatch record", n)
	}
}

// TestDispatchSettledOnEveryPath: a refused connection writes no dispatch
// record, and a request cancelled mid-stream is settled by its marker, so
// nothing is left for a reopen to find.
func TestDispatchSettledOnEveryPath(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + l.Addr().String() + "/v1"
		l.Close()
		h := newHarness(t, harnessOpt{transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: url})})
		r := h.prompt("go", PromptOptions{})
		drain(t, r)
		res := r.Wait()
		if res.Outcome != OutcomeFailed {
			t.Fatalf("outcome %s", res.Outcome)
		}
		if !strings.Contains(res.Err.Error(), "connection refused") {
			t.Skipf("the closed port was taken by another process meanwhile: %v", res.Err)
		}
		if n := count(readFile(t, h.sess.Path()), "dispatch"); n != 0 {
			t.Fatalf("%d dispatch records for a request that was never sent", n)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		h := newHarness(t, harnessOpt{})
		h.srv.Enqueue(pt.Stall())
		r := h.prompt("go", PromptOptions{})
		waitFor(t, func() bool { return len(h.srv.Requests()) == 1 })
		r.Cancel()
		drain(t, r)
		recs := readFile(t, h.sess.Path())
		if count(recs, "dispatch") != 1 || count(recs, "dispatch_settled") != 1 || count(recs, "usage_uncertain") != 1 {
			t.Fatalf("dispatch %d, settled %d, markers %d; want 1 each", count(recs, "dispatch"), count(recs, "dispatch_settled"), count(recs, "usage_uncertain"))
		}
		ro, err := session.Inspect(h.sess.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		if tot := ro.Totals(); tot.UnsettledDispatches != 0 || tot.Cause.Reason != "cancelled_after_dispatch" {
			t.Fatalf("totals %+v", tot)
		}
	})
}

// TestUncommittedResponseIsUncertain: a completed response the loop cannot
// commit (an output item octet cannot replay) was billed: the usage it
// reported is recorded once, settling its dispatch, and nothing is left
// uncertain (a response that reported none is uncertain only under a hard
// ceiling, TestUncommittedResponseMarkerIsDispatched).
func TestUncommittedResponseIsUncertain(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	h.srv.Enqueue(pt.Reply(pt.CustomToolCall("c1", "apply_patch", "*** Begin Patch")))
	r := h.prompt("go", PromptOptions{})
	drain(t, r)
	if res := r.Wait(); res.Outcome != OutcomeFailed {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	ro, err := session.Inspect(h.sess.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if tot := ro.Totals(); tot.UnsettledDispatches != 0 || tot.Uncertain || tot.Requests != 1 || tot.Own.Input != 100 {
		t.Fatalf("totals %+v; want the uncommitted response's reported usage recorded once", tot)
	}
}
