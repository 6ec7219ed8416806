package agent

import (
	"strings"
	"sync"
	"testing"
	"time"

	pt "github.com/octet-agent/octet/provider/providertest"
)

// merged is a consumer that takes events from both paths, as the server
// does: Deliver takes an event only when it is the next one (Seq one more
// than the last consumed), and refuses every third one that is, so both
// paths carry deltas.
type merged struct {
	mu     sync.Mutex
	evs    []Event
	offers int
	taken  map[int64]bool
	after  func(Event) // called with each offered event (under mu)
}

func (m *merged) deliver(e Event) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.offers++
	if m.after != nil {
		m.after(e)
	}
	last := int64(0)
	if len(m.evs) > 0 {
		last = m.evs[len(m.evs)-1].Seq()
	}
	if e.Seq() != last+1 || m.offers%3 == 0 {
		return false
	}
	m.evs = append(m.evs, e)
	m.taken[e.Seq()] = true
	return true
}

func (m *merged) queued(t *testing.T, e Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.taken[e.Seq()] {
		t.Fatalf("event %d (%s) was taken by Deliver and is on Events too", e.Seq(), e.Kind())
	}
	m.evs = append(m.evs, e)
}

// consume takes r's Events as they come, like the server's pump.
func (m *merged) consume(t *testing.T, r *Run) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case e, ok := <-r.Events():
			if !ok {
				return
			}
			m.queued(t, e)
		case <-timeout:
			t.Fatal("run did not finish")
		}
	}
}

// TestDeliverKeepsOneOrderedStream: events Deliver takes are not on
// Events, the others are, and together they are the run's one stream
// (Seq 1..n, run_started first, one run_finished last, every delta).
func TestDeliverKeepsOneOrderedStream(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	words := strings.TrimSpace(strings.Repeat("word ", 100))
	h.srv.Enqueue(pt.Text(words).Pace(500 * time.Microsecond)) // the pump keeps up

	m := &merged{taken: map[int64]bool{}}
	r := h.prompt("go", PromptOptions{Deliver: m.deliver})
	m.consume(t, r)
	checkRunEvents(t, m.evs, OutcomeCompleted)
	var text strings.Builder
	for _, e := range m.evs {
		if d, ok := e.(*OutputDelta); ok {
			text.WriteString(d.Text)
		}
	}
	if text.String() != words {
		t.Fatalf("deltas spell %q, want %q", text.String(), words)
	}
	if len(m.taken) == 0 || len(m.taken) == len(m.evs) {
		t.Fatalf("Deliver took %d of %d events; want both paths used", len(m.taken), len(m.evs))
	}
}

// TestDeliverNotOfferedOnceCancelled: a cancelled run never offers an
// event to Deliver (it must never wait for a consumer), and still
// delivers every event, run_finished included, on Events.
func TestDeliverNotOfferedOnceCancelled(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	h.srv.Enqueue(pt.Text(strings.TrimSpace(strings.Repeat("word ", 50))).StallAfter(20))
	var run *Run
	var ready sync.WaitGroup
	ready.Add(1)
	m := &merged{taken: map[int64]bool{}}
	cancelledAt := 0
	m.after = func(e Event) {
		if cancelledAt > 0 {
			t.Errorf("event %d (%s) offered to Deliver after the run was cancelled", e.Seq(), e.Kind())
			return
		}
		if e.Kind() == KindOutputDelta && e.Seq() > 5 {
			ready.Wait()
			cancelledAt = m.offers
			run.Cancel()
		}
	}
	run = h.prompt("go", PromptOptions{Deliver: m.deliver})
	ready.Done()
	m.consume(t, run)
	if cancelledAt == 0 {
		t.Fatal("the run was never cancelled")
	}
	checkRunEvents(t, m.evs, OutcomeCancelled)
	checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
}
