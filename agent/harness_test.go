package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// harness wires a real agent: the scripted loopback provider over HTTP, a
// real session file, real built-in tools and a real broker.
type harness struct {
	t      *testing.T
	root   string // workspace
	srv    *providertest.Server
	sess   *session.Session
	host   *tools.Host
	broker *tools.Broker
	agent  *Agent
	model  provider.Model
}

type harnessOpt struct {
	policy    tools.Policy
	approver  tools.Approver
	model     provider.Model
	extra     []tools.Tool
	retry     RetryPolicy
	observer  Observer
	maxTurns  int
	sessDir   string
	sessPath  string // an existing session to open writable (instead of creating one)
	transport provider.Transport
	websocket bool // the Responses WebSocket transport against the scripted server
	maxResult int  // the broker's MaxResultBytes (0: default)
	// endpoint, when set, is what the scripted route grants (default:
	// every feature).
	endpoint *provider.ResponsesFeatures
	changes  *changes.Recorder
}

// checkLeaks verifies at the very end of the test (after every other
// cleanup, the server's included) that no goroutine the test started is
// left behind.
func checkLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

func newHarness(t *testing.T, o harnessOpt) *harness {
	t.Helper()
	h := &harness{t: t, root: t.TempDir()}
	h.srv = providertest.New(t)
	dir := o.sessDir
	if dir == "" {
		dir = t.TempDir()
	}
	var err error
	if o.sessPath != "" {
		h.sess, err = session.Open(o.sessPath)
	} else {
		h.sess, err = session.Create(dir, session.Header{Cwd: h.root, Title: "test"})
	}
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	t.Cleanup(func() { h.sess.Close() })
	h.host = tools.NewHost()
	builtins, closeTools, err := tools.Builtins(tools.Config{Root: h.root, Changes: o.changes})
	if err != nil {
		t.Fatalf("builtins: %v", err)
	}
	t.Cleanup(func() { closeTools() })
	for _, tl := range append(builtins, o.extra...) {
		if err := h.host.Register(tl); err != nil {
			t.Fatalf("register %s: %v", tl.Name(), err)
		}
	}
	h.broker = tools.NewBroker(tools.BrokerConfig{Policy: o.policy, Approver: o.approver, MaxResultBytes: o.maxResult})
	h.model = o.model
	if h.model.Name == "" {
		h.model = provider.Model{Name: "scripted", ContextWindow: 400_000, MaxOutputTokens: 128_000, Features: provider.FeatureParallelToolCalls}
	}
	tr := o.transport
	features := provider.AllFeatures
	if o.endpoint != nil {
		features = *o.endpoint
	}
	if o.websocket {
		ws := provider.NewWebSocket(provider.WSConfig{BaseURL: h.srv.URL(), Features: features})
		t.Cleanup(func() { ws.Close() })
		tr = ws
	}
	if tr == nil {
		tr = provider.NewHTTP(provider.HTTPConfig{BaseURL: h.srv.URL(), Features: features})
	}
	h.agent, err = New(Config{
		Session: h.sess, Transport: tr, Model: h.model, Host: h.host, Broker: h.broker,
		Instructions: "You are a test agent.", MaxTurns: o.maxTurns, Retry: o.retry, Telemetry: o.observer,
		Principal: "test",
	})
	if err != nil {
		t.Fatalf("new agent: %v", err)
	}
	return h
}

// prompt starts a run and fails the test on error.
func (h *harness) prompt(text string, opts PromptOptions) *Run {
	h.t.Helper()
	r, err := h.agent.Prompt(context.Background(), text, opts)
	if err != nil {
		h.t.Fatalf("prompt: %v", err)
	}
	return r
}

// drainLater drains r on a goroutine of its own; the channel gets its
// events once the run's stream is closed.
func drainLater(t *testing.T, r *Run) <-chan []Event {
	evs := make(chan []Event, 1)
	go func() { evs <- drain(t, r) }()
	return evs
}

// completed checks that res is a completed run and returns the requests
// the scripted server received.
func (h *harness) completed(t *testing.T, res RunResult) []providertest.Request {
	t.Helper()
	if res.Outcome != OutcomeCompleted {
		t.Fatalf("run %+v", res)
	}
	return h.srv.Requests()
}

// drain collects every event of r until the channel closes, with a
// watchdog so a hung run fails instead of blocking the test binary.
func drain(t *testing.T, r *Run) []Event {
	t.Helper()
	var evs []Event
	timeout := time.After(60 * time.Second)
	for {
		select {
		case e, ok := <-r.Events():
			if !ok {
				return evs
			}
			evs = append(evs, e)
		case <-timeout:
			t.Fatalf("run did not finish; %d events so far, last %v", len(evs), kindsOf(evs[max(0, len(evs)-5):]))
		}
	}
}

func kindsOf(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind()
	}
	return out
}

// checkRunEvents asserts the structural event invariants of one run:
// Seq 1..n without gaps, run_started first, exactly one run_finished, last.
func checkRunEvents(t *testing.T, evs []Event, want Outcome) *RunFinished {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	for i, e := range evs {
		if e.Seq() != int64(i+1) {
			t.Fatalf("event %d (%s) has seq %d", i, e.Kind(), e.Seq())
		}
	}
	if evs[0].Kind() != KindRunStarted {
		t.Fatalf("first event %s, want run_started", evs[0].Kind())
	}
	n := 0
	for _, e := range evs {
		if e.Kind() == KindRunFinished {
			n++
		}
	}
	fin, ok := evs[len(evs)-1].(*RunFinished)
	if n != 1 || !ok {
		t.Fatalf("want exactly one run_finished, last; got %d, kinds %v", n, kindsOf(evs))
	}
	if fin.Outcome != want {
		t.Fatalf("outcome %s (error %q), want %s", fin.Outcome, fin.Error, want)
	}
	return fin
}

// record is one decoded session line.
type record map[string]any

func (r record) str(k string) string { s, _ := r[k].(string); return s }

func (r record) result() record { m, _ := r["result"].(map[string]any); return m }

// readFile decodes every line of the session file.
func readFile(t *testing.T, path string) []record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read session: %v", err)
	}
	var out []record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m record
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("session line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// entries returns the entry records of a decoded file.
func entries(recs []record) []record {
	var out []record
	for _, r := range recs {
		if r.str("kind") == "entry" {
			out = append(out, r)
		}
	}
	return out
}

// count counts records of a kind.
func count(recs []record, kind string) int {
	n := 0
	for _, r := range recs {
		if r.str("kind") == kind {
			n++
		}
	}
	return n
}

// checkpoints returns the checkpoint records.
func checkpoints(recs []record) []record {
	var out []record
	for _, r := range recs {
		if r.str("kind") == "checkpoint" {
			out = append(out, r)
		}
	}
	return out
}

// checkDurableEnd asserts one checkpoint with the outcome and that the file
// opens read-only without damage.
func checkDurableEnd(t *testing.T, path string, want Outcome) []record {
	t.Helper()
	recs := readFile(t, path)
	cps := checkpoints(recs)
	if len(cps) != 1 || cps[0].str("outcome") != string(want) {
		t.Fatalf("checkpoints %v, want one %s", cps, want)
	}
	s, err := session.Inspect(path)
	if err != nil {
		t.Fatalf("inspect session: %v", err)
	}
	defer s.Close()
	if s.TornBytes() != 0 {
		t.Fatalf("session has a torn tail of %d bytes", s.TornBytes())
	}
	return recs
}

// probeTool is a test tool (registered like any extension) that records,
// when it executes, what the session file holds at that moment.
type probeTool struct {
	name     string
	path     func() string
	conc     tools.Concurrency
	effect   tools.Effect
	replay   tools.ReplaySafety
	mu       sync.Mutex
	seen     [][]record // file snapshot per execution
	calls    []string   // call ids in execution order
	inside   atomic.Int32
	maxIn    atomic.Int32
	gate     chan struct{} // when non-nil, each call waits on it (or ctx)
	panicOn  string        // a call id that panics
	onExec   func(ctx context.Context, inv tools.Invocation) (tools.Result, error)
	executed atomic.Int32
}

func (p *probeTool) Name() string        { return p.name }
func (p *probeTool) Description() string { return "test probe" }
func (p *probeTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`)
}
func (p *probeTool) Concurrency() tools.Concurrency                 { return p.conc }
func (p *probeTool) ReplaySafety() tools.ReplaySafety               { return p.replay }
func (p *probeTool) Classify(json.RawMessage) (tools.Effect, error) { return p.effect, nil }

func (p *probeTool) Execute(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	p.executed.Add(1)
	n := p.inside.Add(1)
	defer p.inside.Add(-1)
	for {
		m := p.maxIn.Load()
		if n <= m || p.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	if p.path != nil {
		snap := readFileNoT(p.path())
		p.mu.Lock()
		p.seen = append(p.seen, snap)
		p.mu.Unlock()
	}
	p.mu.Lock()
	p.calls = append(p.calls, inv.CallID)
	p.mu.Unlock()
	if inv.CallID == p.panicOn {
		panic("probe panic")
	}
	if inv.Progress != nil {
		inv.Progress("progress " + inv.CallID)
	}
	if p.onExec != nil {
		return p.onExec(ctx, inv)
	}
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return tools.Result{Text: "cancelled", IsError: true}, nil
		}
	}
	return tools.Result{Text: "probe ok " + inv.CallID}, nil
}

var _ tools.Tool = (*probeTool)(nil)

// readFileNoT decodes the session file without a *testing.T (inside a tool).
func readFileNoT(path string) []record {
	data, _ := os.ReadFile(path)
	var out []record
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m record
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// resultFor returns the tool_result entry record for callID, or nil.
func resultFor(recs []record, callID string) record {
	for _, r := range entries(recs) {
		if r.str("type") == "tool_result" && r.result().str("call_id") == callID {
			return r
		}
	}
	return nil
}

// writeFile writes a workspace file.
func (h *harness) writeFile(name, content string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.root, name), []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// readWS reads a workspace file.
func (h *harness) readWS(name string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.root, name))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

// inputTypes summarizes a recorded request's input as "type:role" strings.
func inputTypes(req providertest.Request) []string {
	var out []string
	for _, it := range req.Input() {
		m, _ := it.(map[string]any)
		s, _ := m["type"].(string)
		if role, ok := m["role"].(string); ok {
			s += ":" + role
		}
		out = append(out, s)
	}
	return out
}

// inputText concatenates every text and output in a recorded request's input.
func inputText(req providertest.Request) string {
	b, _ := json.Marshal(req.Input())
	return string(b)
}

// waitFor polls cond until it holds (or fails the test after 30s).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
