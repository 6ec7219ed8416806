package agent

import (
	"context"
	"strings"
	"testing"

	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestCompactNow: Compact summarizes the whole conversation in one
// auxiliary request without tools, records the summary keeping nothing
// verbatim, and the next prompt's request carries the summary instead of
// the earlier turns. With nothing to summarize it completes at once.
func TestCompactNow(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	empty, err := h.agent.Compact(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if evs := drain(t, empty); len(evs) == 0 || empty.Wait().Outcome != OutcomeCompleted || len(h.srv.Requests()) != 0 {
		t.Fatalf("compacting nothing: %v, %+v, %d requests", kindsOf(evs), empty.Wait(), len(h.srv.Requests()))
	}
	h.srv.Enqueue(pt.Text("EARLIER ANSWER"), pt.Text("THE SUMMARY"), pt.Text("after"))
	drain(t, h.prompt("EARLIER QUESTION", PromptOptions{}))
	r, err := h.agent.Compact(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kinds := strings.Join(kindsOf(drain(t, r)), " ")
	if res := r.Wait(); res.Outcome != OutcomeCompleted || !strings.Contains(kinds, "compaction_started") || !strings.Contains(kinds, "compaction_finished") {
		t.Fatalf("compact run %+v: %s", res, kinds)
	}
	var c *session.Compaction
	for _, e := range h.sess.Branch() {
		if e.Compaction != nil {
			c = e.Compaction
		}
	}
	if c == nil || c.Summary != "THE SUMMARY" || c.FirstKept != "" {
		t.Fatalf("compaction entry %+v", c)
	}
	reqs := h.srv.Requests()
	if s := string(reqs[1].Raw); !strings.Contains(s, "EARLIER QUESTION") || strings.Contains(s, `"tools"`) {
		t.Errorf("summary request: %s", s)
	}
	drain(t, h.prompt("next", PromptOptions{}))
	next := string(h.srv.Requests()[2].Raw)
	if !strings.Contains(next, "THE SUMMARY") || strings.Contains(next, "EARLIER QUESTION") {
		t.Errorf("the prompt after /compact sent %s", next)
	}
}
