//go:build unix

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

var raceIterations = flag.Int("agent.race-iterations", 25, "iterations of the control race tests")

// TestFinishNowDuringBatch: FinishNow while a call of the batch runs lets
// that admitted call settle, pairs the not-yet-started call with a
// synthetic error, persists the input at the next boundary and makes every
// later request tool-free.
func TestFinishNowDuringBatch(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure, gate: make(chan struct{})}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}})
	h.srv.Enqueue(
		pt.Reply(pt.FunctionCall("a", "probe", `{"n":1}`), pt.FunctionCall("b", "probe", `{"n":2}`)),
		pt.Reply(pt.FunctionCall("c", "probe", `{"n":3}`)), // the model ignores tool_choice none
		pt.Text("final"),
	)
	r := h.prompt("go", PromptOptions{})
	waitFor(t, func() bool { return probe.inside.Load() == 1 })
	if err := r.FinishNow("wrap up now"); err != nil {
		t.Fatal(err)
	}
	close(probe.gate)
	checkRunEvents(t, drain(t, r), OutcomeCompleted)
	if n := probe.executed.Load(); n != 1 {
		t.Fatalf("executed %d calls, want only the one already running", n)
	}
	recs := readFile(t, h.sess.Path())
	if res := resultFor(recs, "a").result(); res["is_error"] == true {
		t.Fatalf("running call %v", res)
	}
	for _, id := range []string{"b", "c"} {
		if res := resultFor(recs, id).result(); res.str("text") != textToolsDisabled {
			t.Fatalf("%s: %v", id, res)
		}
	}
	reqs := h.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	if _, ok := reqs[0].Body["tools"]; !ok {
		t.Fatal("first request had no tools")
	}
	for _, req := range reqs[1:] {
		if _, ok := req.Body["tools"]; ok || req.Body["tool_choice"] != "none" {
			t.Fatalf("request after FinishNow: tools %v choice %v", req.Body["tools"], req.Body["tool_choice"])
		}
	}
	in := inputText(reqs[1])
	if !strings.Contains(in, "wrap up now") || strings.Index(in, "wrap up now") < strings.LastIndex(in, `"call_id":"b"`) {
		t.Fatalf("FinishNow input not after the results: %s", in)
	}
	if err := r.FinishNow("late"); !errors.Is(err, ErrRunEnded) {
		t.Fatalf("FinishNow after the end: %v", err)
	}
	if _, err := r.Steer("late"); !errors.Is(err, ErrRunEnded) {
		t.Fatalf("Steer after the end: %v", err)
	}
}

// TestSteeringAfterToolResults: steering submitted while a tool runs is
// delivered after that batch's results, before the next request.
func TestSteeringAfterToolResults(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure, gate: make(chan struct{})}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("a", "probe", `{"n":1}`), pt.FunctionCall("b", "probe", `{"n":2}`)), pt.Text("ok"))
	r := h.prompt("go", PromptOptions{})
	waitFor(t, func() bool { return probe.inside.Load() == 1 })
	id, err := r.Steer("also check the tests")
	if err != nil || id == "" {
		t.Fatalf("steer: %q %v", id, err)
	}
	close(probe.gate)
	checkRunEvents(t, drain(t, r), OutcomeCompleted)
	if probe.executed.Load() != 2 {
		t.Fatal("steering must not skip the batch's calls")
	}
	var order []string
	for _, e := range entries(readFile(t, h.sess.Path())) {
		order = append(order, e.str("type"))
	}
	if got := strings.Join(order, " "); got != "user assistant tool_result tool_result steering assistant" {
		t.Fatalf("entries %s", got)
	}
}

// TestFollowUpContinuesRun: a follow-up queued during the run is answered
// in the same run after the answer it waited for.
func TestFollowUpContinuesRun(t *testing.T) {
	checkLeaks(t)
	probe := &probeTool{name: "probe", effect: tools.Pure, gate: make(chan struct{})}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("a", "probe", `{"n":1}`)), pt.Text("first answer"), pt.Text("second answer"))
	r := h.prompt("go", PromptOptions{})
	waitFor(t, func() bool { return probe.inside.Load() == 1 })
	if _, err := r.FollowUp("and then this"); err != nil {
		t.Fatal(err)
	}
	close(probe.gate)
	checkRunEvents(t, drain(t, r), OutcomeCompleted)
	var order []string
	for _, e := range entries(readFile(t, h.sess.Path())) {
		order = append(order, e.str("type"))
	}
	if got := strings.Join(order, " "); got != "user assistant tool_result assistant follow_up assistant" {
		t.Fatalf("entries %s", got)
	}
}

// submitted is one control a racing goroutine tried to submit.
type submitted struct {
	kind     string // "steering" (Steer, FinishNow) or "follow_up"
	text     string
	accepted bool
}

// TestControlsRace submits steering, follow-ups and FinishNow from several
// goroutines at random moments of many runs, including around the final
// close. Every accepted control is persisted exactly once with its type;
// every refused one (ErrRunEnded) never appears.
func TestControlsRace(t *testing.T) {
	checkLeaks(t)
	for it := range *raceIterations {
		t.Run(fmt.Sprint(it), func(t *testing.T) { controlsRaceOnce(t, it) })
	}
}

func controlsRaceOnce(t *testing.T, it int) {
	probe := &probeTool{name: "probe", effect: tools.Pure}
	rng := rand.New(rand.NewPCG(uint64(it), 7))
	toolRng := rand.New(rand.NewPCG(uint64(it), 9)) // only the (sequential) tool uses it
	probe.onExec = func(_ context.Context, inv tools.Invocation) (tools.Result, error) {
		time.Sleep(time.Duration(toolRng.IntN(2000)) * time.Microsecond)
		return tools.Result{Text: "ok"}, nil
	}
	h := newHarness(t, harnessOpt{extra: []tools.Tool{probe}, maxTurns: 40})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "probe", `{"n":1}`), pt.FunctionCall("c2", "probe", `{"n":2}`)))
	for range 20 {
		h.srv.Enqueue(pt.Text("t"))
	}
	r := h.prompt("go", PromptOptions{})
	var mu sync.Mutex
	var subs []submitted
	var wg sync.WaitGroup
	submit := func(kind, text string, f func() error) {
		err := f()
		if err != nil && !errors.Is(err, ErrRunEnded) {
			t.Errorf("submit %s: %v", text, err)
		}
		mu.Lock()
		subs = append(subs, submitted{kind: kind, text: text, accepted: err == nil})
		mu.Unlock()
	}
	delays := make([]time.Duration, 7)
	for i := range delays {
		delays[i] = time.Duration(rng.IntN(12000)) * time.Microsecond
	}
	for k := range 3 {
		wg.Go(func() {
			time.Sleep(delays[k])
			text := fmt.Sprintf("steer-%d-%d", it, k)
			submit("steering", text, func() error { _, err := r.Steer(text); return err })
		})
		wg.Go(func() {
			time.Sleep(delays[3+k])
			text := fmt.Sprintf("follow-%d-%d", it, k)
			submit("follow_up", text, func() error { _, err := r.FollowUp(text); return err })
		})
	}
	if it%2 == 0 {
		wg.Go(func() {
			time.Sleep(delays[6])
			text := fmt.Sprintf("finish-%d", it)
			submit("steering", text, func() error { return r.FinishNow(text) })
		})
	}
	evs := drain(t, r)
	wg.Wait()
	checkRunEvents(t, evs, OutcomeCompleted)
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeCompleted)
	found := map[string][]string{}
	es := entries(recs)
	for i, e := range es {
		if txt := e.str("text"); txt != "" {
			found[txt] = append(found[txt], e.str("type"))
		}
		// A batch's results directly follow its assistant entry: steering
		// never lands between a call and its result.
		if e.str("type") == "assistant" {
			calls := 0
			for _, item := range e["items"].([]any) {
				if item.(map[string]any)["type"] == "function_call" {
					calls++
				}
			}
			for j := 1; j <= calls; j++ {
				if i+j >= len(es) || es[i+j].str("type") != "tool_result" {
					t.Fatalf("entry after a call is %v", es[min(i+j, len(es)-1)])
				}
			}
		}
	}
	finishAccepted := false
	for _, s := range subs {
		got := found[s.text]
		switch {
		case s.accepted && (len(got) != 1 || got[0] != s.kind):
			t.Fatalf("accepted %s %q persisted as %v", s.kind, s.text, got)
		case !s.accepted && len(got) != 0:
			t.Fatalf("refused %q was persisted", s.text)
		}
		if s.accepted && strings.HasPrefix(s.text, "finish-") {
			finishAccepted = true
		}
	}
	reqs := h.srv.Requests()
	if finishAccepted && reqs[len(reqs)-1].Body["tool_choice"] != "none" {
		t.Fatal("the request after an accepted FinishNow still offered tools")
	}
	if _, err := r.FollowUp("after"); !errors.Is(err, ErrRunEnded) {
		t.Fatalf("follow-up after the end: %v", err)
	}
}

// TestSlowConsumerLosesNothing: a consumer far slower than the run (and a
// run producing more events than the buffer holds) still receives every
// event in order and the single run_finished.
func TestSlowConsumerLosesNothing(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	h.srv.Enqueue(pt.Text(strings.Repeat("word ", 600)))
	r := h.prompt("talk", PromptOptions{})
	var evs []Event
	for e := range r.Events() {
		if len(evs) < 20 {
			time.Sleep(2 * time.Millisecond)
		}
		evs = append(evs, e)
	}
	checkRunEvents(t, evs, OutcomeCompleted)
	if len(evs) < eventBuffer {
		t.Fatalf("only %d events; the test needs more than the buffer", len(evs))
	}
	if res := r.Wait(); res.Outcome != OutcomeCompleted {
		t.Fatalf("result %+v", res)
	}
}

// recordingObserver keeps every telemetry record.
type recordingObserver struct {
	mu   sync.Mutex
	recs []any
}

func (o *recordingObserver) add(v any) { o.mu.Lock(); o.recs = append(o.recs, v); o.mu.Unlock() }

func (o *recordingObserver) RunStarted(i RunInfo)                { o.add(i) }
func (o *recordingObserver) RequestFinished(i RequestInfo)       { o.add(i) }
func (o *recordingObserver) ToolFinished(i ToolInfo)             { o.add(i) }
func (o *recordingObserver) CompactionFinished(i CompactionInfo) { o.add(i) }
func (o *recordingObserver) RunFinished(i RunInfo)               { o.add(i) }

// TestTelemetryCarriesNoPayload: the observer sees coarse boundaries with
// hashes and measurements, never the prompt, arguments or results.
func TestTelemetryCarriesNoPayload(t *testing.T) {
	checkLeaks(t)
	obs := &recordingObserver{}
	h := newHarness(t, harnessOpt{observer: obs})
	h.writeFile("secret.txt", "RESULTSECRET\n")
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "read", `{"path":"secret.txt"}`), pt.FunctionCall("c2", "TOOLNAMESECRET", `{}`)), pt.Text("ANSWERSECRET"))
	checkRunEvents(t, drain(t, h.prompt("PROMPTSECRET", PromptOptions{})), OutcomeCompleted)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	raw, _ := json.Marshal(obs.recs)
	for _, secret := range []string{"PROMPTSECRET", "RESULTSECRET", "ANSWERSECRET", "secret.txt", "TOOLNAMESECRET"} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("telemetry contains %s: %s", secret, raw)
		}
	}
	var reqs, toolsSeen, runs int
	for _, r := range obs.recs {
		switch r := r.(type) {
		case RequestInfo:
			reqs++
			if len(r.InstructionsHash) != 64 || !r.OK || r.Input == 0 {
				t.Fatalf("request info %+v", r)
			}
		case ToolInfo:
			toolsSeen++
			if len(r.ArgumentsHash) != 64 || r.Executed != (r.Tool == "read") || r.ResultBytes == 0 {
				t.Fatalf("tool info %+v", r)
			}
			if r.Tool != "read" && r.Tool != "" { // a model-chosen unknown name is payload
				t.Fatalf("tool info names an unregistered tool: %+v", r)
			}
		case RunInfo:
			runs++
		}
	}
	if reqs != 2 || toolsSeen != 2 || runs != 2 {
		t.Fatalf("requests %d tools %d run hooks %d", reqs, toolsSeen, runs)
	}
}

// TestUndrainedCancelledRunStillCheckpoints: a consumer that stops reading
// (the buffer is full and the run is paced) and then cancels does not keep
// the run from finishing: the checkpoint is durable, Done closes and the
// agent is released without anyone reading; the events that did not fit
// are delivered afterwards, in order, with the single run_finished last.
func TestUndrainedCancelledRunStillCheckpoints(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	h.srv.Enqueue(pt.Text(strings.Repeat("word ", 2000)))
	r := h.prompt("talk", PromptOptions{})
	waitFor(t, func() bool { return len(r.Events()) == cap(r.Events()) })
	r.Cancel()
	select {
	case <-r.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a cancelled run with an undrained event stream did not finish")
	}
	checkDurableEnd(t, h.sess.Path(), OutcomeCancelled)
	if h.agent.Active() != nil {
		t.Fatal("agent still busy after the run's checkpoint")
	}
	if res := r.Wait(); res.Outcome != OutcomeCancelled {
		t.Fatalf("result %+v", res)
	}
	evs := drain(t, r)
	checkRunEvents(t, evs, OutcomeCancelled)
	if len(evs) <= eventBuffer {
		t.Fatalf("only %d events; the test needs more than the buffer", len(evs))
	}
}

// panickingObserver panics in every hook.
type panickingObserver struct{ calls atomic.Int32 }

func (o *panickingObserver) hit()                              { o.calls.Add(1); panic("observer bug") }
func (o *panickingObserver) RunStarted(RunInfo)                { o.hit() }
func (o *panickingObserver) RequestFinished(RequestInfo)       { o.hit() }
func (o *panickingObserver) ToolFinished(ToolInfo)             { o.hit() }
func (o *panickingObserver) CompactionFinished(CompactionInfo) { o.hit() }
func (o *panickingObserver) RunFinished(RunInfo)               { o.hit() }

// TestPanickingObserverIsIgnored: telemetry is outside the ledger; a
// panicking observer neither fails the run nor crashes the process (its
// RunStarted and RunFinished hooks run outside the loop's recovery).
func TestPanickingObserverIsIgnored(t *testing.T) {
	checkLeaks(t)
	obs := &panickingObserver{}
	h := newHarness(t, harnessOpt{observer: obs})
	h.writeFile("a.txt", "alpha\n")
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "read", `{"path":"a.txt"}`)), pt.Text("done"))
	r := h.prompt("go", PromptOptions{})
	checkRunEvents(t, drain(t, r), OutcomeCompleted)
	checkDurableEnd(t, h.sess.Path(), OutcomeCompleted)
	if res := r.Wait(); res.Err != nil {
		t.Fatalf("run error %v", res.Err)
	}
	if n := obs.calls.Load(); n != 5 { // start, 2 requests, 1 tool, finish
		t.Fatalf("observer called %d times", n)
	}
}

// TestFinishNowWithdrawsPendingApproval: a call still waiting for approval
// when FinishNow arrives is not admitted yet; it is withdrawn (the
// approval's context ends) and paired with the tools-disabled error, never
// executed, and the run finishes tool-free instead of being cancelled.
func TestFinishNowWithdrawsPendingApproval(t *testing.T) {
	checkLeaks(t)
	ap := &blockingApprover{entered: make(chan struct{}, 1)}
	h := newHarness(t, harnessOpt{policy: tools.Controlled, approver: ap})
	h.srv.Enqueue(
		pt.Reply(pt.FunctionCall("w", "write", `{"path":"x.txt","content":"x"}`)),
		pt.Text("final"),
	)
	r := h.prompt("hi", PromptOptions{})
	<-ap.entered
	if err := r.FinishNow("stop editing"); err != nil {
		t.Fatal(err)
	}
	checkRunEvents(t, drain(t, r), OutcomeCompleted)
	if _, err := os.Stat(filepath.Join(h.root, "x.txt")); !os.IsNotExist(err) {
		t.Fatal("the withdrawn write happened")
	}
	recs := checkDurableEnd(t, h.sess.Path(), OutcomeCompleted)
	if res := resultFor(recs, "w").result(); res.str("text") != textToolsDisabled || res["is_error"] != true {
		t.Fatalf("withdrawn call %v", res)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 2 || reqs[1].Body["tool_choice"] != "none" || !strings.Contains(inputText(reqs[1]), "stop editing") {
		t.Fatalf("requests %d, last %v", len(reqs), reqs[len(reqs)-1].Body["tool_choice"])
	}
}
