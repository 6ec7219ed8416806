//go:build unix

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// waitInside makes a probe call wait until n calls are inside at once (or
// a deadline passes, which the test then sees as missing overlap).
// Every n arrivals form a group that is released together, so a call can
// only return early when n calls were inside at the same time.
func waitInside(p *probeTool, n int32) func(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	var mu sync.Mutex
	waiting := 0
	release := make(chan struct{})
	return func(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
		mu.Lock()
		waiting++
		ch := release
		if waiting >= int(n) {
			close(release)
			release = make(chan struct{})
			waiting = 0
		}
		mu.Unlock()
		select {
		case <-ch:
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
		}
		return tools.Result{Text: "read " + inv.CallID}, nil
	}
}

// TestParallelWaveOverlaps: contiguous parallel workspace reads run four
// at a time (observed: each waits until four are inside; never five), and
// their results are persisted in call order.
func TestParallelWaveOverlaps(t *testing.T) {
	checkLeaks(t)
	pr := &probeTool{name: "pread", conc: tools.Parallel, effect: tools.WorkspaceRead}
	pr.onExec = waitInside(pr, 4)
	h := newHarness(t, harnessOpt{extra: []tools.Tool{pr}})
	var outs []pt.Output
	for i := range 8 {
		outs = append(outs, pt.FunctionCall(fmt.Sprintf("p%d", i), "pread", fmt.Sprintf(`{"n":%d}`, i)))
	}
	h.srv.Enqueue(pt.Reply(outs...), pt.Text("done"))
	checkRunEvents(t, drain(t, h.prompt("go", PromptOptions{})), OutcomeCompleted)
	if got := pr.maxIn.Load(); got != 4 {
		t.Fatalf("max overlap %d, want exactly 4 (waves of at most four)", got)
	}
	var order []string
	for _, e := range entries(readFile(t, h.sess.Path())) {
		if e.str("type") == "tool_result" {
			order = append(order, e.result().str("call_id"))
		}
	}
	if strings.Join(order, ",") != "p0,p1,p2,p3,p4,p5,p6,p7" {
		t.Fatalf("result order %v", order)
	}
}

// TestWaveBarrier: a mutation in the middle of reads is a barrier: the
// reads before it overlap only with each other, it runs alone, then the
// reads after it.
func TestWaveBarrier(t *testing.T) {
	checkLeaks(t)
	pr := &probeTool{name: "pread", conc: tools.Parallel, effect: tools.WorkspaceRead}
	pr.onExec = waitInside(pr, 2)
	insideAtWrite := int32(-1)
	wr := &probeTool{name: "pwrite", conc: tools.Parallel, effect: tools.WorkspaceMutation}
	wr.onExec = func(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
		insideAtWrite = pr.inside.Load()
		time.Sleep(20 * time.Millisecond)
		if pr.inside.Load() != 0 {
			insideAtWrite = 99
		}
		return tools.Result{Text: "wrote"}, nil
	}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{pr, wr}, policy: tools.UnsafeHost})
	h.srv.Enqueue(pt.Reply(
		pt.FunctionCall("r1", "pread", `{"n":1}`),
		pt.FunctionCall("r2", "pread", `{"n":2}`),
		pt.FunctionCall("w", "pwrite", `{"n":3}`),
		pt.FunctionCall("r3", "pread", `{"n":4}`),
		pt.FunctionCall("r4", "pread", `{"n":5}`),
	), pt.Text("done"))
	checkRunEvents(t, drain(t, h.prompt("go", PromptOptions{})), OutcomeCompleted)
	if got := pr.maxIn.Load(); got != 2 {
		t.Fatalf("max read overlap %d, want 2 (the write splits the reads)", got)
	}
	if insideAtWrite != 0 {
		t.Fatalf("reads inside while the write ran: %d", insideAtWrite)
	}
	if got := wr.maxIn.Load(); got != 1 {
		t.Fatalf("write overlap %d", got)
	}
	var order []string
	for _, e := range entries(readFile(t, h.sess.Path())) {
		if e.str("type") == "tool_result" {
			order = append(order, e.result().str("call_id"))
		}
	}
	if strings.Join(order, ",") != "r1,r2,w,r3,r4" {
		t.Fatalf("result order %v", order)
	}
}

// TestWaveRealReads runs the built-in read tool in a wave.
func TestWaveRealReads(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	var outs []pt.Output
	for i := range 4 {
		name := fmt.Sprintf("f%d.txt", i)
		h.writeFile(name, fmt.Sprintf("content %d\n", i))
		outs = append(outs, pt.FunctionCall(fmt.Sprintf("c%d", i), "read", fmt.Sprintf(`{"path":%q}`, name)))
	}
	h.srv.Enqueue(pt.Reply(outs...), pt.Text("done"))
	checkRunEvents(t, drain(t, h.prompt("go", PromptOptions{})), OutcomeCompleted)
	recs := readFile(t, h.sess.Path())
	for i := range 4 {
		res := resultFor(recs, fmt.Sprintf("c%d", i)).result()
		if !strings.Contains(res.str("text"), fmt.Sprintf("content %d", i)) {
			t.Fatalf("read %d: %v", i, res)
		}
	}
}

// TestCompactionAtThreshold: with a 20K window and the 16K output reserve
// the threshold is an estimate above 3616 tokens. At exactly 3616 the
// request goes out uncompacted with max_output_tokens clamped to what
// remains; one token more triggers a summary request through the same
// transport, a durable compaction entry, and a next request that starts
// from the summary.
func TestCompactionAtThreshold(t *testing.T) {
	checkLeaks(t)
	model := provider.Model{Name: "small", ContextWindow: 20_000, MaxOutputTokens: 100_000}
	h := newHarness(t, harnessOpt{model: model})
	first := "FIRSTPROMPT " + strings.Repeat("x ", 7000)
	h.srv.Enqueue(pt.Text("ok one").WithUsage(provider.Usage{InputTokens: 3500, OutputTokens: 100}))
	checkRunEvents(t, drain(t, h.prompt(first, PromptOptions{WithoutTools: true})), OutcomeCompleted)
	// estimate = 3600 (calibrated) + 9 ("next") = 3609; add 7 via usage.
	h.srv.Enqueue(pt.Text("ok two").WithUsage(provider.Usage{InputTokens: 3600, OutputTokens: 7}))
	checkRunEvents(t, drain(t, h.prompt("next", PromptOptions{WithoutTools: true})), OutcomeCompleted)
	reqs := h.srv.Requests()
	if len(reqs) != 2 || reqs[1].Body["instructions"] == compactionInstructions {
		t.Fatalf("compacted below the threshold: %d requests", len(reqs))
	}
	if got := reqs[1].Body["max_output_tokens"]; got != float64(20_000-3609) {
		t.Fatalf("max_output_tokens %v, want %d", got, 20_000-3609)
	}
	// Now the calibrated size is 3607; "more" adds 9: 3616 = threshold.
	h.srv.Enqueue(pt.Text("ok three").WithUsage(provider.Usage{InputTokens: 3608, OutputTokens: 0}))
	checkRunEvents(t, drain(t, h.prompt("more", PromptOptions{WithoutTools: true})), OutcomeCompleted)
	if reqs = h.srv.Requests(); len(reqs) != 3 || reqs[2].Body["max_output_tokens"] != float64(20_000-3616) {
		t.Fatalf("at the threshold: %d requests, max_output_tokens %v", len(reqs), reqs[len(reqs)-1].Body["max_output_tokens"])
	}
	// 3608 + 10 ("again") = 3618: over the threshold.
	h.srv.Enqueue(
		pt.Text("SUMMARY-XYZ the user asked about x").WithUsage(provider.Usage{InputTokens: 3000, OutputTokens: 20}),
		pt.Text("answer after compaction"),
	)
	r := h.prompt("again", PromptOptions{WithoutTools: true})
	evs := drain(t, r)
	checkRunEvents(t, evs, OutcomeCompleted)
	if !kindSeen(evs, KindCompactionStarted) || !kindSeen(evs, KindCompactionFinished) {
		t.Fatalf("no compaction events: %v", kindsOf(evs))
	}
	reqs = h.srv.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests, want 5", len(reqs))
	}
	sum, next := reqs[3], reqs[4]
	if sum.Body["instructions"] != compactionInstructions || !strings.Contains(inputText(sum), "FIRSTPROMPT") {
		t.Fatal("request 4 is not the summary request over the old context")
	}
	if _, ok := sum.Body["tools"]; ok {
		t.Fatal("summary request advertised tools")
	}
	if !strings.Contains(inputText(next), "SUMMARY-XYZ") || strings.Contains(inputText(next), "FIRSTPROMPT") {
		t.Fatalf("next request does not start from the summary: %s", inputText(next)[:200])
	}
	recs := readFile(t, h.sess.Path())
	var comp record
	var firstAssistant string
	for _, e := range entries(recs) {
		if e.str("type") == "assistant" && firstAssistant == "" {
			firstAssistant = e.str("id")
		}
		if e.str("type") == "compaction" {
			comp = e
		}
	}
	c, _ := comp["compaction"].(map[string]any)
	if c == nil || c["summary"] != "SUMMARY-XYZ the user asked about x" || c["first_kept"] != firstAssistant || c["tokens_before"] != float64(3618) {
		t.Fatalf("compaction entry %v (first assistant %s)", comp, firstAssistant)
	}
	var compUsage int
	for _, rec := range recs {
		if rec.str("kind") == "usage" && rec.str("operation") == OperationCompaction {
			compUsage++
		}
	}
	if compUsage != 1 {
		t.Fatalf("compaction usage records %d", compUsage)
	}
	// The kept tail is replayed verbatim after the summary.
	if !strings.Contains(inputText(next), "ok one") || !strings.Contains(inputText(next), "again") {
		t.Fatalf("kept tail missing: %s", inputText(next))
	}
	// How full the context is: after the summary, the compacted
	// context's estimate (well under the 3618 before); after the next
	// answer, that request's input+output.
	var usages []*Usage
	for _, ev := range evs {
		if u, ok := ev.(*Usage); ok {
			usages = append(usages, u)
		}
	}
	if len(usages) != 2 || usages[0].ContextTokens <= 0 || usages[0].ContextTokens >= 3618 || usages[0].ContextWindow != 20_000 {
		t.Fatalf("usage after the compaction: %+v", usages)
	}
	// (Usage events are run subtotals: the request's own counts are the difference.)
	if usages[1].ContextTokens != usages[1].Input-usages[0].Input+usages[1].Output-usages[0].Output {
		t.Errorf("usage after the next answer: contextTokens %d, want that request's input+output", usages[1].ContextTokens)
	}
}

// bigHistory is a first prompt that puts a 20K-window model over its
// compaction threshold on the first request.
func bigHistory() string { return "OLDHISTORY " + strings.Repeat("long history ", 2000) }

// TestCompactionRetryAndFailure: the summary request goes through the same
// retry seam as an auxiliary operation (provider_retry names it, nothing is
// shown as recovered answer text); a compaction that finally fails is
// reported and the turn continues uncompacted.
func TestCompactionRetryAndFailure(t *testing.T) {
	checkLeaks(t)
	model := provider.Model{Name: "small", ContextWindow: 20_000, MaxOutputTokens: 8000}
	t.Run("retried", func(t *testing.T) {
		h := newHarness(t, harnessOpt{model: model, retry: &scriptedRetry{delay: time.Millisecond, max: 2}})
		h.srv.Enqueue(pt.Text("SUMMARY partial words here").DropAfter(7), pt.Text("SUMMARY-OK"), pt.Text("answer"))
		evs := drain(t, h.prompt(bigHistory(), PromptOptions{WithoutTools: true}))
		checkRunEvents(t, evs, OutcomeCompleted)
		var retry *ProviderRetry
		for _, e := range evs {
			switch e := e.(type) {
			case *ProviderRetry:
				retry = e
			case *RecoveredOutput, *OutputDelta:
				if d, ok := e.(*OutputDelta); ok && d.Text != "answer" {
					t.Fatalf("summary text shown as output: %+v", e)
				}
				if _, ok := e.(*RecoveredOutput); ok {
					t.Fatal("summary partial shown as recovered output")
				}
			}
		}
		if retry == nil || retry.Operation == nil || *retry.Operation != OperationCompaction {
			t.Fatalf("retry %+v", retry)
		}
		recs := readFile(t, h.sess.Path())
		if count(recs, "usage_uncertain") != 1 {
			t.Fatal("the interrupted summary attempt left no uncertainty marker")
		}
		if !strings.Contains(inputText(h.srv.Requests()[2]), "SUMMARY-OK") {
			t.Fatal("main request does not start from the summary")
		}
	})
	t.Run("failed", func(t *testing.T) {
		h := newHarness(t, harnessOpt{model: model})
		h.srv.Enqueue(pt.Status(400, "invalid_request_error", "bad", "no"), pt.Text("answer"))
		evs := drain(t, h.prompt(bigHistory(), PromptOptions{WithoutTools: true}))
		checkRunEvents(t, evs, OutcomeCompleted)
		var fin *CompactionFinished
		for _, e := range evs {
			if f, ok := e.(*CompactionFinished); ok {
				fin = f
			}
		}
		if fin == nil || fin.Error == "" || fin.EntryID != "" {
			t.Fatalf("compaction_finished %+v", fin)
		}
		reqs := h.srv.Requests()
		if len(reqs) != 2 || !strings.Contains(inputText(reqs[1]), "OLDHISTORY") {
			t.Fatal("the turn did not continue uncompacted")
		}
		for _, e := range entries(readFile(t, h.sess.Path())) {
			if e.str("type") == "compaction" {
				t.Fatal("failed compaction persisted an entry")
			}
		}
	})
}

// TestSteeringDuringCompactionReachesNextRequest: steering accepted while
// the summary request is pending is delivered at the compaction's
// settlement, so the main request that follows it already carries it
// (after the summary).
func TestSteeringDuringCompactionReachesNextRequest(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{model: provider.Model{Name: "small", ContextWindow: 20_000, MaxOutputTokens: 8000}})
	h.srv.Enqueue(
		pt.Text("SUMMARY of the long history so far").Pace(40*time.Millisecond),
		pt.Text("answer"),
	)
	r := h.prompt(bigHistory(), PromptOptions{})
	evs := waitEvent(t, r, KindCompactionStarted)
	waitFor(t, func() bool { return len(h.srv.Requests()) == 1 })
	if _, err := r.Steer("STEER-DURING-COMPACTION"); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, drain(t, r)...)
	checkRunEvents(t, evs, OutcomeCompleted)
	reqs := h.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want the summary and one main request", len(reqs))
	}
	in := inputText(reqs[1])
	sum, steer := strings.Index(in, "SUMMARY of the long"), strings.Index(in, "STEER-DURING-COMPACTION")
	if sum < 0 || steer < sum {
		t.Fatalf("main request after compaction: summary at %d, steering at %d: %s", sum, steer, in)
	}
	for _, e := range entries(readFile(t, h.sess.Path())) {
		if e.str("type") == "steering" && e.str("text") == "STEER-DURING-COMPACTION" {
			return
		}
	}
	t.Fatal("steering not persisted as its entry")
}

// TestCompactionRecordsFileSets: the compaction entry carries the
// cumulative files read and modified by the summarized calls, and a
// second compaction keeps the first one's sets.
func TestCompactionRecordsFileSets(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{policy: tools.UnsafeHost, model: provider.Model{Name: "small", ContextWindow: 20_000, MaxOutputTokens: 8000}})
	h.writeFile("a.txt", "alpha\n")
	h.srv.Enqueue(
		pt.Reply(pt.FunctionCall("r", "read", `{"path":"a.txt"}`), pt.FunctionCall("w", "write", `{"path":"b.txt","content":"beta\n"}`)),
		pt.Text("done"),
		pt.Text("SUMMARY one"), pt.Text("after one"),
		pt.Reply(pt.FunctionCall("w2", "write", `{"path":"c.txt","content":"gamma\n"}`)), pt.Text("done two"),
		pt.Text("SUMMARY two"), pt.Text("after two"),
	)
	checkRunEvents(t, drain(t, h.prompt("work", PromptOptions{})), OutcomeCompleted)
	checkRunEvents(t, drain(t, h.prompt(bigHistory(), PromptOptions{})), OutcomeCompleted)
	checkRunEvents(t, drain(t, h.prompt("more work", PromptOptions{})), OutcomeCompleted)
	checkRunEvents(t, drain(t, h.prompt(bigHistory(), PromptOptions{})), OutcomeCompleted)
	var comps []map[string]any
	for _, e := range entries(readFile(t, h.sess.Path())) {
		if e.str("type") == "compaction" {
			comps = append(comps, e["compaction"].(map[string]any))
		}
	}
	if len(comps) != 2 {
		t.Fatalf("%d compactions", len(comps))
	}
	str := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if str(comps[0]["readFiles"]) != `["a.txt"]` || str(comps[0]["modifiedFiles"]) != `["b.txt"]` {
		t.Fatalf("first compaction %v", comps[0])
	}
	if str(comps[1]["readFiles"]) != `["a.txt"]` || str(comps[1]["modifiedFiles"]) != `["b.txt","c.txt"]` {
		t.Fatalf("second compaction %v", comps[1])
	}
}

// TestWaveEligibility: only statically Parallel calls that are exactly
// Pure/WorkspaceRead/HostRead and admitted join a wave. A denied HostRead
// (Controlled) ends the wave and is paired after it in call order, never
// executed; a statically Sequential read runs alone; admitted HostReads
// (UnsafeHost) overlap like workspace reads.
func TestWaveEligibility(t *testing.T) {
	t.Run("denied and sequential are barriers", func(t *testing.T) {
		checkLeaks(t)
		pr := &probeTool{name: "pread", conc: tools.Parallel, effect: tools.WorkspaceRead}
		pr.onExec = waitInside(pr, 2)
		hr := &probeTool{name: "hread", conc: tools.Parallel, effect: tools.HostRead}
		insideAtSeq := int32(-1)
		sq := &probeTool{name: "sread", conc: tools.Sequential, effect: tools.WorkspaceRead}
		sq.onExec = func(context.Context, tools.Invocation) (tools.Result, error) {
			insideAtSeq = pr.inside.Load()
			return tools.Result{Text: "seq"}, nil
		}
		h := newHarness(t, harnessOpt{extra: []tools.Tool{pr, hr, sq}, policy: tools.Controlled})
		h.srv.Enqueue(pt.Reply(
			pt.FunctionCall("r1", "pread", `{"n":1}`),
			pt.FunctionCall("r2", "pread", `{"n":2}`),
			pt.FunctionCall("h1", "hread", `{"n":3}`),
			pt.FunctionCall("r3", "pread", `{"n":4}`),
			pt.FunctionCall("r4", "pread", `{"n":5}`),
			pt.FunctionCall("s1", "sread", `{"n":6}`),
		), pt.Text("done"))
		checkRunEvents(t, drain(t, h.prompt("go", PromptOptions{})), OutcomeCompleted)
		if got := pr.maxIn.Load(); got != 2 {
			t.Fatalf("max read overlap %d, want 2", got)
		}
		if hr.executed.Load() != 0 || insideAtSeq != 0 || sq.executed.Load() != 1 {
			t.Fatalf("host read executed %d, reads inside the sequential call %d", hr.executed.Load(), insideAtSeq)
		}
		recs := readFile(t, h.sess.Path())
		var order []string
		for _, e := range entries(recs) {
			if e.str("type") == "tool_result" {
				order = append(order, e.result().str("call_id"))
			}
		}
		if strings.Join(order, ",") != "r1,r2,h1,r3,r4,s1" {
			t.Fatalf("result order %v", order)
		}
		if res := resultFor(recs, "h1").result(); res["is_error"] != true {
			t.Fatalf("denied host read %v", res)
		}
	})
	t.Run("admitted host reads overlap", func(t *testing.T) {
		checkLeaks(t)
		hr := &probeTool{name: "hread", conc: tools.Parallel, effect: tools.HostRead}
		hr.onExec = waitInside(hr, 4)
		h := newHarness(t, harnessOpt{extra: []tools.Tool{hr}, policy: tools.UnsafeHost})
		var outs []pt.Output
		for i := range 4 {
			outs = append(outs, pt.FunctionCall(fmt.Sprintf("h%d", i), "hread", fmt.Sprintf(`{"n":%d}`, i)))
		}
		h.srv.Enqueue(pt.Reply(outs...), pt.Text("done"))
		checkRunEvents(t, drain(t, h.prompt("go", PromptOptions{})), OutcomeCompleted)
		if got := hr.maxIn.Load(); got != 4 {
			t.Fatalf("max host-read overlap %d, want 4", got)
		}
	})
}
