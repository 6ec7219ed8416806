package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
)

// cancelAtCompleted wraps the real HTTP transport: the moment a stream
// yields response.completed, before Next returns it, the run's parent
// context is cancelled — the same-poll race of a cancellation and a
// completed response, made deterministic.
type cancelAtCompleted struct {
	inner  provider.Transport
	cancel context.CancelFunc
}

func (c *cancelAtCompleted) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	s, err := c.inner.Open(ctx, req)
	if err != nil {
		return nil, err
	}
	return &cancelStream{Stream: s, cancel: c.cancel}, nil
}

type cancelStream struct {
	provider.Stream
	cancel context.CancelFunc
}

func (s *cancelStream) Next(ctx context.Context) (provider.Event, error) {
	ev, err := s.Stream.Next(ctx)
	if err == nil && ev.Type == provider.EventCompleted {
		s.cancel()
	}
	return ev, err
}

// TestCancelWinsSamePollOverCompleted: a cancellation that lands in the
// same poll as response.completed wins: the answer is not committed, the
// dispatched request's usage is unknown, and the run is cancelled.
func TestCancelWinsSamePollOverCompleted(t *testing.T) {
	checkLeaks(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &cancelAtCompleted{cancel: cancel}
	h := newHarness(t, harnessOpt{transport: tr})
	tr.inner = provider.NewHTTP(provider.HTTPConfig{BaseURL: h.srv.URL()})
	h.srv.Enqueue(pt.Text("an answer that arrives with the cancellation"))
	r, err := h.agent.Prompt(ctx, "hi", PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkRunEvents(t, drain(t, r), OutcomeCancelled)
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
	for _, e := range entries(recs) {
		if e.str("type") == "assistant" {
			t.Fatal("a response completed in the same poll as the cancellation was committed")
		}
	}
	if count(recs, "usage_uncertain") != 1 || count(recs, "usage") != 0 {
		t.Fatalf("records %v, want one usage_uncertain and no usage", recs)
	}
}

// cancelAfterSummary cancels the run when the summary request finishes,
// after its response completed and before the compaction is persisted.
type cancelAfterSummary struct {
	nopObserver
	cancel context.CancelFunc
}

func (o *cancelAfterSummary) RequestFinished(info RequestInfo) {
	if info.Operation == OperationCompaction && info.OK {
		o.cancel()
	}
}

// TestCancelBeforeSummaryAppend: a cancellation that arrives after the
// summary response completed but before its records are appended wins: no
// summary and no usage are persisted.
func TestCancelBeforeSummaryAppend(t *testing.T) {
	checkLeaks(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, harnessOpt{
		model:    provider.Model{Name: "small", ContextWindow: 20_000, MaxOutputTokens: 8000},
		observer: &cancelAfterSummary{cancel: cancel},
	})
	h.srv.Enqueue(pt.Text("SUMMARY of the long history"), pt.Text("never requested"))
	r, err := h.agent.Prompt(ctx, strings.Repeat("long history ", 2000), PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkRunEvents(t, drain(t, r), OutcomeCancelled)
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
	for _, e := range entries(recs) {
		if e.str("type") == "compaction" {
			t.Fatal("a summary whose run was cancelled before the append was persisted")
		}
	}
	if count(recs, "usage") != 0 {
		t.Fatal("a cancelled compaction persisted usage")
	}
	if n := len(h.srv.Requests()); n != 1 {
		t.Fatalf("%d requests, want only the summary request", n)
	}
}
