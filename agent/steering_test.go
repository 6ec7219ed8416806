package agent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// steerModel grants every feature on the model side, native steering
// included.
var steerModel = provider.Model{Name: "steer", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: provider.AllFeatures}

// steerHarness is a harness on the Responses WebSocket whose model and
// endpoint grant native steering.
func steerHarness(t *testing.T) *harness {
	t.Helper()
	return newHarness(t, harnessOpt{model: steerModel, websocket: true})
}

// awaitSteerable waits until r's response in progress takes native
// steering input.
func awaitSteerable(t *testing.T, r *Run) {
	t.Helper()
	waitFor(t, func() bool {
		r.nat.mu.Lock()
		defer r.nat.mu.Unlock()
		return r.nat.stream != nil
	})
}

// steerDuring starts a run of prompt on h and, once its response can
// take native steering, steers it with input: it returns the run, the
// input's id and the run's events to come.
func steerDuring(t *testing.T, h *harness, prompt, input string) (*Run, string, <-chan []Event) {
	t.Helper()
	r := h.prompt(prompt, PromptOptions{})
	events := drainLater(t, r)
	awaitSteerable(t, r)
	id, err := r.Steer(input)
	if err != nil {
		t.Fatal(err)
	}
	return r, id, events
}

// branchSummary renders the active branch as type[:text] items.
func branchSummary(h *harness) []string {
	var out []string
	for _, e := range h.sess.Branch() {
		s := string(e.Type)
		switch e.Type {
		case session.EntryAssistant:
			s += ":" + e.StopReason
		case session.EntrySteering:
			s += ":" + e.Text
			if e.NativeSteering != nil {
				s += "(native)"
			}
		case session.EntryToolResult:
			s += ":" + e.Result.CallID
		}
		out = append(out, s)
	}
	return out
}

// steerRecords returns the dispatch record of the native steering intent
// and the records settling it.
func steerRecords(t *testing.T, h *harness) (intent record, settled []record) {
	t.Helper()
	for _, r := range readFile(t, h.sess.Path()) {
		if r.str("kind") == "dispatch" && r.str("operation") == session.OperationNativeSteering {
			intent = r
		}
	}
	if intent == nil {
		t.Fatal("no native steering intent")
	}
	for _, r := range readFile(t, h.sess.Path()) {
		if r.str("kind") == "dispatch_settled" && r.str("id") == intent.str("id") {
			settled = append(settled, r)
		}
	}
	return intent, settled
}

// TestNativeSteeringInterrupts: "qualified WebSocket runs without hard
// ceilings prepare a local receipt, persist intent, then dispatch. Each
// completed response retains independent usage. Applied input follows
// the completed prefix, atomically linked by EntryMetadata.native_steering
// to its operation/local ID, before the successor." A steering input
// during the response goes out as response.steer on its socket after its
// intent is durable; the steered response is committed with its own
// usage, then the input as a steering entry linked to the operation,
// then the successor the provider made of it (no second response.create)
// with its own usage and the operation's steering_completed settlement
// in the same write. Usage is reported incomplete until then.
func TestNativeSteeringInterrupts(t *testing.T) {
	h := steerHarness(t)
	h.srv.Enqueue(pt.Text("a long plan with many steps").SteerAfter(1, true, pt.Text("a short plan")))
	r, id, events := steerDuring(t, h, "plan it", "keep it short")
	evs := <-events
	checkRunEvents(t, evs, OutcomeCompleted)
	res := r.Wait()
	reqs := h.srv.Requests()
	if len(reqs) != 2 || reqs[1].Body["type"] != "response.steer" || reqs[1].Body["input"] != "keep it short" {
		t.Fatalf("client events: %d, second %v", len(reqs), reqs[len(reqs)-1].Body)
	}
	want := []string{"user", "assistant:steered", "steering:keep it short(native)", "assistant:completed"}
	if got := branchSummary(h); !reflect.DeepEqual(got, want) {
		t.Fatalf("branch %v, want %v", got, want)
	}
	intent, settled := steerRecords(t, h)
	if intent.str("local_id") != id || intent.str("input") != "keep it short" {
		t.Errorf("intent %v: want local id %s and the input", intent, id)
	}
	steer := h.sess.Branch()[2]
	if steer.NativeSteering.Operation != intent.str("id") || steer.NativeSteering.LocalID != id {
		t.Errorf("steering entry link %+v, intent %s, local id %s", steer.NativeSteering, intent.str("id"), id)
	}
	if len(settled) != 1 || settled[0].str("outcome") != session.SettledSteeringCompleted {
		t.Fatalf("settlements %v", settled)
	}
	// The settlement is in the successor's batch, after the intent and
	// the steering entry.
	recs := readFile(t, h.sess.Path())
	var order []string
	var opener record // the record that opened the batch in progress
	sameBatch := false
	for _, rec := range recs {
		if rec["batch"] != nil || rec["batch_of"] == nil {
			opener = rec
		}
		switch {
		case rec.str("kind") == "dispatch" && rec.str("operation") == session.OperationNativeSteering:
			order = append(order, "intent")
		case rec.str("kind") == "entry" && rec.str("type") == "steering":
			order = append(order, "applied")
		case rec.str("kind") == "entry" && rec.str("type") == "assistant":
			order = append(order, "assistant")
		case rec.str("kind") == "dispatch_settled" && rec.str("outcome") == session.SettledSteeringCompleted:
			order = append(order, "settled")
			sameBatch = rec["batch_of"] != nil && opener.str("type") == "assistant" && opener.str("id") == h.sess.Branch()[3].ID
		}
	}
	if want := []string{"intent", "assistant", "applied", "assistant", "settled"}; !reflect.DeepEqual(order, want) {
		t.Errorf("record order %v, want %v", order, want)
	}
	if !sameBatch {
		t.Error("the settlement is not written in the successor's batch")
	}
	if n := len(recordsOf(t, h, "usage")); n != 2 || res.Usage.Requests != 2 {
		t.Errorf("%d usage records, %d run requests; want each response's own", n, res.Usage.Requests)
	}
	var complete []bool
	for _, e := range evs {
		if u, ok := e.(*Usage); ok {
			complete = append(complete, u.Complete)
		}
	}
	if !reflect.DeepEqual(complete, []bool{false, true}) {
		t.Errorf("usage events complete %v, want [false true]: uncertain until the successor settles", complete)
	}
	if h.sess.Totals().Uncertain || !res.Usage.Complete {
		t.Error("usage uncertain after the settlement")
	}
}

// TestNativeSteeringReturnsToolResults: "Required tool results return on
// the same socket without repeating steering input." The steered
// response's call runs, its result is durable, and the result goes back
// as response.create with previous_response_id on the same socket, its
// input the output only; the input is applied before the successor.
func TestNativeSteeringReturnsToolResults(t *testing.T) {
	h := steerHarness(t)
	h.writeFile("notes.txt", "alpha\n")
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "read", `{"path":"notes.txt"}`)).SteerAfter(1, false, pt.Text("done")))
	_, _, events := steerDuring(t, h, "read the notes", "and summarize them")
	checkRunEvents(t, <-events, OutcomeCompleted)
	reqs := h.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d client events, want create, steer, continuation", len(reqs))
	}
	cont := reqs[2]
	if cont.Body["type"] != "response.create" || cont.Body["previous_response_id"] != "resp_scripted" || cont.RemoteAddr != reqs[0].RemoteAddr {
		t.Fatalf("continuation %v over %s", cont.Body, cont.RemoteAddr)
	}
	in := cont.Input()
	if len(in) != 1 || in[0].(map[string]any)["type"] != "function_call_output" || in[0].(map[string]any)["call_id"] != "c1" {
		t.Fatalf("continuation input %v: want c1's output only", in)
	}
	if strings.Contains(string(cont.Raw), "and summarize them") {
		t.Fatal("the continuation repeats the steering input")
	}
	want := []string{"user", "assistant:completed", "tool_result:c1", "steering:and summarize them(native)", "assistant:completed"}
	if got := branchSummary(h); !reflect.DeepEqual(got, want) {
		t.Fatalf("branch %v, want %v", got, want)
	}
	if _, settled := steerRecords(t, h); len(settled) != 1 || settled[0].str("outcome") != session.SettledSteeringCompleted {
		t.Fatalf("settlements %v", settled)
	}
}

// TestNativeSteeringRefusedIsQueued: a response.steer.failed settles the
// operation as steering_failed (not applied, not uncertain) and the input
// is delivered as ordinary steering at the next boundary.
func TestNativeSteeringRefusedIsQueued(t *testing.T) {
	h := steerHarness(t)
	h.srv.Enqueue(pt.Text("plan").SteerRefusedAfter(1, "steering_not_supported"), pt.Text("revised"))
	_, _, events := steerDuring(t, h, "plan it", "keep it short")
	checkRunEvents(t, <-events, OutcomeCompleted)
	reqs := h.srv.Requests()
	if len(reqs) != 3 || reqs[2].Body["type"] != "response.create" || !strings.Contains(string(reqs[2].Raw), "keep it short") {
		t.Fatalf("client events %d; the input must go in the next request", len(reqs))
	}
	want := []string{"user", "assistant:completed", "steering:keep it short", "assistant:completed"}
	if got := branchSummary(h); !reflect.DeepEqual(got, want) {
		t.Fatalf("branch %v, want %v", got, want)
	}
	if _, settled := steerRecords(t, h); len(settled) != 1 || settled[0].str("outcome") != session.SettledSteeringFailed {
		t.Fatalf("settlements %v", settled)
	}
	if h.sess.Totals().Uncertain {
		t.Fatal("a refused input made usage uncertain")
	}
}

// TestControlsWaitForTheOwnedSuccessor: "Controls queued between native
// segments wait until the owned successor settles." A second input while
// the first's successor is in progress is not sent natively: it is
// delivered as ordinary steering once the successor is committed.
func TestControlsWaitForTheOwnedSuccessor(t *testing.T) {
	h := steerHarness(t)
	hold := make(chan struct{})
	h.srv.Enqueue(pt.Text("first").SteerAfter(1, true, pt.Text("second").HoldUntil(hold)), pt.Text("third"))
	r, _, events := steerDuring(t, h, "go", "one")
	waitFor(t, func() bool { // the steered response is committed: between the two
		for _, e := range h.sess.Branch() {
			if e.StopReason == "steered" {
				return true
			}
		}
		return false
	})
	if _, err := r.Steer("two"); err != nil {
		t.Fatal(err)
	}
	close(hold)
	checkRunEvents(t, <-events, OutcomeCompleted)
	want := []string{"user", "assistant:steered", "steering:one(native)", "assistant:completed", "steering:two", "assistant:completed"}
	if got := branchSummary(h); !reflect.DeepEqual(got, want) {
		t.Fatalf("branch %v, want %v", got, want)
	}
	steers := 0
	for _, q := range h.srv.Requests() {
		if q.Body["type"] == "response.steer" {
			steers++
		}
	}
	if steers != 1 {
		t.Fatalf("%d response.steer frames, want 1", steers)
	}
}

// TestNativeSteeringNeedsTheGrant: without the model's grant, or under a
// hard ceiling, a steering input during a response is queued as on
// ordinary routes: no response.steer is sent.
func TestNativeSteeringNeedsTheGrant(t *testing.T) {
	noSteer := steerModel
	noSteer.Features &^= provider.FeatureNativeSteering
	for name, o := range map[string]harnessOpt{
		"model":        {model: noSteer, websocket: true},
		"hard-ceiling": {model: steerModel, websocket: true, retry: ceilingPolicy{}},
		"http":         {model: steerModel},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, o)
			hold := make(chan struct{})
			h.srv.Enqueue(pt.Text("first").HoldUntil(hold), pt.Text("second"))
			r := h.prompt("go", PromptOptions{})
			events := drainLater(t, r)
			waitFor(t, func() bool { return len(h.srv.Requests()) == 1 })
			if _, err := r.Steer("queued"); err != nil {
				t.Fatal(err)
			}
			close(hold)
			checkRunEvents(t, <-events, OutcomeCompleted)
			for _, q := range h.srv.Requests() {
				if q.Body["type"] == "response.steer" {
					t.Fatal("a response.steer was sent")
				}
			}
			want := []string{"user", "assistant:completed", "steering:queued", "assistant:completed"}
			if got := branchSummary(h); !reflect.DeepEqual(got, want) {
				t.Fatalf("branch %v, want %v", got, want)
			}
		})
	}
}

// TestSteeringBridgeFailsClosed: "The host update bridge holds at most
// 128 events and fails closed on overflow." A response that sends more
// than 128 steering events fails the run (not retried: a protocol
// violation), its usage uncertain.
func TestSteeringBridgeFailsClosed(t *testing.T) {
	h := steerHarness(t)
	frames := [][]byte{[]byte(`{"type":"response.created","response":{"id":"resp_1"}}`)}
	for i := range maxSteeringEvents + 1 {
		frames = append(frames, fmt.Appendf(nil, `{"type":"response.steer.failed","steer":{"id":"s%d","previous_response_id":"resp_1"},"error":{"code":"too_many_pending_steers"}}`, i))
	}
	frames = append(frames, []byte(`{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[]}}`))
	h.srv.Enqueue(pt.Events(frames...))
	res := h.prompt("go", PromptOptions{}).Wait()
	if res.Outcome != OutcomeFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "steering update bridge") {
		t.Fatalf("run %+v", res)
	}
	if !h.sess.Totals().Uncertain {
		t.Fatal("usage certain after a failed response")
	}
}

// TestNativeSteeringFailureIsUncertain: a successor that breaks off
// leaves the operation settled as uncertain (a usage_uncertain marker of
// operation native_steering), never completed; the applied input stays
// where it is, and the session takes the next prompt.
func TestNativeSteeringFailureIsUncertain(t *testing.T) {
	h := steerHarness(t)
	h.srv.Enqueue(pt.Text("first").SteerAfter(1, true, pt.Text("second half").DropAfter(3)), pt.Text("next"))
	_, _, events := steerDuring(t, h, "go", "one")
	evs := <-events
	checkRunEvents(t, evs, OutcomeFailed)
	_, settled := steerRecords(t, h)
	if len(settled) != 1 || settled[0].str("outcome") != session.SettledUncertain {
		t.Fatalf("settlements %v", settled)
	}
	marked := false
	for _, u := range recordsOf(t, h, "usage_uncertain") {
		marked = marked || u.str("operation") == session.OperationNativeSteering
	}
	if !marked || !h.sess.Totals().Uncertain {
		t.Fatal("no uncertainty for the interrupted operation")
	}
	if un := h.sess.UnresolvedSteering(); len(un) != 0 {
		t.Fatalf("settled in process, yet unresolved: %v", un)
	}
	h.completed(t, h.prompt("again", PromptOptions{}).Wait())
}

// TestUnresolvedSteeringRefusesPrompt: "Resume refuses a new prompt on
// any unresolved operation rather than guessing from text or replaying
// input." An intent a crashed writer left unsettled is settled as
// unresolved (with a usage_uncertain marker) by the next writable open,
// and Prompt refuses the session, saying what to do.
func TestUnresolvedSteeringRefusesPrompt(t *testing.T) {
	dir := t.TempDir()
	s, err := session.Create(dir, session.Header{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEntry(session.Entry{Type: session.EntryUser, RunID: "run_1", Text: "go"}); err != nil {
		t.Fatal(err)
	}
	intent := session.Dispatch{ID: "op_1", RunID: "run_1", Operation: session.OperationNativeSteering, Model: "steer", LocalID: "run_1-m1", Input: "keep it short"}
	if err := s.Append(session.DispatchRecord(intent)); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	s.Close() // the writer dies here: nothing settles the intent
	h := newHarness(t, harnessOpt{model: steerModel, websocket: true, sessPath: path})
	un := h.sess.UnresolvedSteering()
	if len(un) != 1 || un[0].ID != "op_1" {
		t.Fatalf("unresolved %v", un)
	}
	_, err = h.agent.Prompt(context.Background(), "next", PromptOptions{})
	var ue *UnresolvedSteeringError
	if !errors.As(err, &ue) || ue.Operation != "op_1" || !strings.Contains(err.Error(), "start a new session") {
		t.Fatalf("Prompt: %v", err)
	}
	if n := len(h.srv.Requests()); n != 0 {
		t.Fatalf("%d requests", n)
	}
	if !h.sess.Totals().Uncertain {
		t.Fatal("usage certain with an unresolved operation")
	}
}

// steerWatch wraps a transport's streams so that before each Steer the
// test looks at what is durable.
type steerWatch struct {
	provider.Transport
	before func(input string)
}

func (w steerWatch) EndpointFeatures() provider.ResponsesFeatures { return provider.AllFeatures }

func (w steerWatch) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	s, err := w.Transport.Open(ctx, req)
	if ss, ok := s.(provider.SteeringStream); ok && err == nil {
		return watchedStream{ss, w.before}, nil
	}
	return s, err
}

type watchedStream struct {
	provider.SteeringStream
	before func(input string)
}

func (s watchedStream) Steer(ctx context.Context, input string) error {
	s.before(input)
	return s.SteeringStream.Steer(ctx, input)
}

// TestSteeringIntentDurableBeforeDispatch: "prepare a local receipt,
// persist intent, then dispatch." When response.steer is about to be
// sent, the session file already holds the intent naming the input and
// the local id Steer returns.
func TestSteeringIntentDurableBeforeDispatch(t *testing.T) {
	srv := pt.New(t)
	srv.Enqueue(pt.Text("plan").SteerAfter(1, true, pt.Text("short plan")))
	ws := provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), Features: provider.AllFeatures})
	t.Cleanup(func() { ws.Close() })
	var h *harness
	var seen []record
	watch := steerWatch{Transport: ws, before: func(input string) {
		for _, r := range readFile(t, h.sess.Path()) {
			if r.str("kind") == "dispatch" && r.str("operation") == session.OperationNativeSteering && r.str("input") == input {
				seen = append(seen, r)
			}
		}
	}}
	h = newHarness(t, harnessOpt{model: steerModel, transport: watch})
	_, id, events := steerDuring(t, h, "plan it", "keep it short")
	checkRunEvents(t, <-events, OutcomeCompleted)
	if len(seen) != 1 || seen[0].str("local_id") != id {
		t.Fatalf("intents durable at dispatch: %v (local id %s)", seen, id)
	}
}

// TestFinishNowStaysStickyAcrossTheSuccessor: "FinishNow's tool
// prohibition remains sticky." A FinishNow accepted while the successor
// of a steering input is pending does not stop the successor (it is the
// provider's, with the original settings), but a call the successor makes
// is paired with an error, never run, and the next request carries no
// tools.
func TestFinishNowStaysStickyAcrossTheSuccessor(t *testing.T) {
	h := steerHarness(t)
	h.writeFile("notes.txt", "alpha\n")
	hold := make(chan struct{})
	h.srv.Enqueue(pt.Text("first").SteerAfter(1, true, pt.Reply(pt.FunctionCall("c1", "read", `{"path":"notes.txt"}`)).HoldUntil(hold)), pt.Text("final"))
	r, _, events := steerDuring(t, h, "go", "one")
	waitFor(t, func() bool {
		for _, e := range h.sess.Branch() {
			if e.StopReason == "steered" {
				return true
			}
		}
		return false
	})
	if err := r.FinishNow("wrap up"); err != nil {
		t.Fatal(err)
	}
	close(hold)
	checkRunEvents(t, <-events, OutcomeCompleted)
	var res *session.ToolResult
	for _, e := range h.sess.Branch() {
		if e.Type == session.EntryToolResult {
			res = e.Result
		}
	}
	if res == nil || !res.IsError || strings.Contains(res.Text, "alpha") {
		t.Fatalf("the successor's call: %+v, want an error without running it", res)
	}
	last := h.srv.Requests()[len(h.srv.Requests())-1]
	if _, ok := last.Body["tools"]; ok || last.Body["tool_choice"] != "none" {
		t.Fatalf("the request after FinishNow: tools %v, tool_choice %v", last.Body["tools"], last.Body["tool_choice"])
	}
}
