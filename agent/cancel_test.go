//go:build unix

package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// silentServer is a real loopback TCP server that reads requests and never
// answers: a provider stuck before its response headers.
type silentServer struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted chan struct{}
	wg       sync.WaitGroup
}

func newSilentServer(t *testing.T) *silentServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentServer{ln: ln, accepted: make(chan struct{}, 16)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				buf := make([]byte, 4096)
				if n, _ := c.Read(buf); n > 0 {
					s.accepted <- struct{}{}
				}
				io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// blockingApprover blocks every confirmation until its context ends.
type blockingApprover struct{ entered chan struct{} }

func (a *blockingApprover) Confirm(ctx context.Context, _ tools.ConfirmRequest) (tools.Approval, error) {
	a.entered <- struct{}{}
	<-ctx.Done()
	return tools.Approval{}, ctx.Err()
}

// waitEvent reads events until one of kind arrives, returning those read.
func waitEvent(t *testing.T, r *Run, kind string) []Event {
	t.Helper()
	var evs []Event
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-r.Events():
			if !ok {
				t.Fatalf("run ended before %s: %v", kind, kindsOf(evs))
			}
			evs = append(evs, e)
			if e.Kind() == kind {
				return evs
			}
		case <-timeout:
			t.Fatalf("no %s event", kind)
		}
	}
}

// TestCancelAtEveryAwaitPoint cancels a run while it waits on each await
// point and checks the common contract: one run_finished{cancelled}, one
// durable cancelled checkpoint, a readable session, no leaked goroutine
// (goleak) and no process left behind.
func TestCancelAtEveryAwaitPoint(t *testing.T) {
	t.Run("opening", func(t *testing.T) {
		checkLeaks(t)
		silent := newSilentServer(t)
		tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: "http://" + silent.ln.Addr().String() + "/v1"})
		h := newHarness(t, harnessOpt{transport: tr})
		r := h.prompt("hi", PromptOptions{})
		<-silent.accepted
		r.Cancel()
		evs := append([]Event(nil), drain(t, r)...)
		checkRunEvents(t, evs, OutcomeCancelled)
		recs := checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
		// The request bytes were written: usage is unknown, not zero.
		if count(recs, "usage_uncertain") != 1 || count(recs, "usage") != 0 {
			t.Fatalf("records %v", recs)
		}
	})

	t.Run("mid-body", func(t *testing.T) {
		checkLeaks(t)
		h := newHarness(t, harnessOpt{})
		h.srv.Enqueue(pt.Text("first words and then a long silence").StallAfter(6))
		r := h.prompt("hi", PromptOptions{})
		evs := waitEvent(t, r, KindOutputDelta)
		r.Cancel()
		evs = append(evs, drain(t, r)...)
		checkRunEvents(t, evs, OutcomeCancelled)
		recs := checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
		if n := len(entries(recs)); n != 1 { // only the prompt
			t.Fatalf("entries %v", entries(recs))
		}
	})

	t.Run("tool", func(t *testing.T) {
		checkLeaks(t)
		h := newHarness(t, harnessOpt{policy: tools.UnsafeHost})
		pidFile := filepath.Join(h.root, "pid")
		h.srv.Enqueue(pt.Reply(
			pt.FunctionCall("sleep", "bash", `{"command":"echo $$ > pid.tmp && mv pid.tmp pid && sleep 30"}`),
			pt.FunctionCall("later", "read", `{"path":"pid"}`),
		))
		r := h.prompt("hi", PromptOptions{})
		waitFor(t, func() bool { _, err := os.Stat(pidFile); return err == nil })
		r.Cancel()
		checkRunEvents(t, drain(t, r), OutcomeCancelled)
		recs := checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
		b, _ := os.ReadFile(pidFile)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("pid file %q", b)
		}
		waitFor(t, func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) })
		if res := resultFor(recs, "sleep"); res == nil || res.result()["is_error"] != true {
			t.Fatalf("bash result %v", res)
		}
		if res := resultFor(recs, "later"); res == nil || res.result().str("text") != settleText(OutcomeCancelled) {
			t.Fatalf("unstarted call %v", res)
		}
	})

	t.Run("compaction", func(t *testing.T) {
		checkLeaks(t)
		h := newHarness(t, harnessOpt{model: provider.Model{Name: "small", ContextWindow: 20_000, MaxOutputTokens: 8000}})
		h.srv.Enqueue(pt.Stall())
		r := h.prompt(strings.Repeat("long history ", 2000), PromptOptions{})
		evs := waitEvent(t, r, KindCompactionStarted)
		waitFor(t, func() bool { return len(h.srv.Requests()) == 1 })
		r.Cancel()
		evs = append(evs, drain(t, r)...)
		checkRunEvents(t, evs, OutcomeCancelled)
		recs := checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
		for _, e := range entries(recs) {
			if e.str("type") == "compaction" {
				t.Fatal("cancelled compaction persisted a summary")
			}
		}
		if count(recs, "usage") != 0 || count(recs, "usage_uncertain") != 0 {
			t.Fatal("cancelled compaction persisted usage (or its uncertainty); it persists neither usage nor summary")
		}
		if h.srv.Requests()[0].Body["instructions"] != compactionInstructions {
			t.Fatal("the stalled request was not the summary request")
		}
	})

	t.Run("approval", func(t *testing.T) {
		checkLeaks(t)
		ap := &blockingApprover{entered: make(chan struct{}, 1)}
		h := newHarness(t, harnessOpt{policy: tools.Controlled, approver: ap})
		h.srv.Enqueue(pt.Reply(pt.FunctionCall("w", "write", `{"path":"x.txt","content":"x"}`)))
		r := h.prompt("hi", PromptOptions{})
		<-ap.entered
		r.Cancel()
		evs := drain(t, r)
		checkRunEvents(t, evs, OutcomeCancelled)
		recs := checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
		if _, err := os.Stat(filepath.Join(h.root, "x.txt")); !os.IsNotExist(err) {
			t.Fatal("the unapproved write happened")
		}
		if res := resultFor(recs, "w"); res == nil || res.result()["is_error"] != true {
			t.Fatalf("write result %v", res)
		}
		var reason string
		for _, e := range evs {
			if d, ok := e.(*ToolPolicyDecision); ok {
				reason = d.Reason
			}
		}
		if reason != tools.ReasonCancelled {
			t.Fatalf("decision reason %q", reason)
		}
	})

	t.Run("retry-wait", func(t *testing.T) {
		checkLeaks(t)
		h := newHarness(t, harnessOpt{retry: &scriptedRetry{delay: time.Hour, max: 3}})
		h.srv.Enqueue(pt.Text("partial answer here").DropAfter(6))
		r := h.prompt("hi", PromptOptions{})
		evs := waitEvent(t, r, KindProviderRetry)
		r.Cancel()
		evs = append(evs, drain(t, r)...)
		checkRunEvents(t, evs, OutcomeCancelled)
		checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
	})
}

// scriptedRetry is a test RetryPolicy: it retries up to max times with a
// fixed delay and records what it was asked.
type scriptedRetry struct {
	mu        sync.Mutex
	delay     time.Duration
	max       int
	n         int
	failures  []Failure
	completed int
}

func (s *scriptedRetry) Decide(f Failure) RetryDecision {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f)
	if s.n >= s.max {
		return RetryDecision{UsageUnknown: f.Dispatched, Reason: "exhausted"}
	}
	s.n++
	m := s.max
	return RetryDecision{Retry: true, Kind: RetryInterruptedInference, Attempt: s.n, MaxAttempts: &m, Delay: s.delay, UsageUnknown: f.Dispatched, Reason: "stream interrupted"}
}

func (s *scriptedRetry) TurnCompleted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completed++
	s.n = 0
}

// TestRetrySeamReplacesAttempt: the loop persists uncertainty before the
// replacement, emits provider_retry and the partial output as
// recovered_output, and the replacement's answer is committed.
func TestRetrySeamReplacesAttempt(t *testing.T) {
	checkLeaks(t)
	pol := &scriptedRetry{delay: time.Millisecond, max: 3}
	h := newHarness(t, harnessOpt{retry: pol})
	h.srv.Enqueue(pt.Text("RECOVERED partial output that breaks").DropAfter(7), pt.Text("final answer"))
	r := h.prompt("hi", PromptOptions{})
	evs := drain(t, r)
	checkRunEvents(t, evs, OutcomeCompleted)
	var retry *ProviderRetry
	var recovered string
	for _, e := range evs {
		switch e := e.(type) {
		case *ProviderRetry:
			retry = e
		case *RecoveredOutput:
			if e.Channel == ChannelText {
				recovered = e.Text
			}
		}
	}
	if retry == nil || retry.Attempt != 1 || retry.MaxAttempts == nil || *retry.MaxAttempts != 3 || retry.Operation != nil {
		t.Fatalf("retry event %+v", retry)
	}
	if !strings.HasPrefix(recovered, "RECOVERED") {
		t.Fatalf("recovered output %q", recovered)
	}
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeCompleted)
	// The marker precedes the replacement's assistant entry.
	iu, ia := -1, -1
	for i, rec := range recs {
		if rec.str("kind") == "usage_uncertain" {
			iu = i
		}
		if rec.str("type") == "assistant" {
			ia = i
		}
	}
	if iu < 0 || ia < iu {
		t.Fatalf("uncertainty %d assistant %d", iu, ia)
	}
	if len(pol.failures) != 1 || !pol.failures[0].Dispatched || pol.completed != 1 {
		t.Fatalf("policy saw %+v, completed %d", pol.failures, pol.completed)
	}
	if res := r.Wait(); res.Usage.Complete {
		t.Fatal("usage complete after an uncertain attempt")
	}
}

// cancelOnResponse cancels the run (optionally after queueing a follow-up)
// the moment its first response completes, before the loop reaches the
// final drain.
type cancelOnResponse struct {
	nopObserver
	runs   chan *Run
	follow bool
}

func (o *cancelOnResponse) RequestFinished(RequestInfo) {
	r := <-o.runs
	if o.follow {
		if _, err := r.FollowUp("QUEUED-FOLLOW-UP"); err != nil {
			panic(err)
		}
	}
	r.Cancel()
}

// TestCancelWinsOverFinalDrain: a cancellation that lands together with the
// final answer wins over the final drain: the answer is durable and the run
// is cancelled (not completed, not continued with a queued follow-up); an
// accepted follow-up is persisted rather than lost.
func TestCancelWinsOverFinalDrain(t *testing.T) {
	for _, follow := range []bool{false, true} {
		t.Run(fmt.Sprintf("follow-up=%v", follow), func(t *testing.T) {
			checkLeaks(t)
			obs := &cancelOnResponse{runs: make(chan *Run, 1), follow: follow}
			h := newHarness(t, harnessOpt{observer: obs})
			h.srv.Enqueue(pt.Text("the answer"), pt.Text("never requested"))
			r := h.prompt("go", PromptOptions{})
			obs.runs <- r
			checkRunEvents(t, drain(t, r), OutcomeCancelled)
			recs := checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
			var types []string
			for _, e := range entries(recs) {
				types = append(types, e.str("type"))
			}
			want := "user assistant"
			if follow {
				want += " follow_up"
			}
			if strings.Join(types, " ") != want {
				t.Fatalf("entries %v, want %s", types, want)
			}
			if n := len(h.srv.Requests()); n != 1 {
				t.Fatalf("%d requests after cancellation", n)
			}
		})
	}
}
