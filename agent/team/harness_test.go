package team

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// price is the scripted model's price per million tokens (input 1.25 $,
// cached 0.125 $, output 10 $), so each request's exact cost is known.
var price = agent.Price{Input: 1_250_000, CachedInput: 125_000, Output: 10_000_000}

// pricedNoRetry prices usage and never retries (stateless: clonable).
type pricedNoRetry struct {
	agent.NoRetry
	budget *agent.Budget
}

func (p pricedNoRetry) PriceUsage(model string, u provider.Usage) (int64, bool) {
	c, ok := p.budget.Cost(model, u)
	return int64(c), ok
}
func (p pricedNoRetry) CloneRetry() agent.RetryPolicy { return p }

// CheckCeiling implements agent.CeilingChecker.
func (p pricedNoRetry) CheckCeiling(model string, t session.Totals) error {
	return p.budget.Check(model, t)
}

// BeforeRequest enforces the budget's hard ceilings, as the product's
// policies do.
func (p pricedNoRetry) BeforeRequest(_ string, m provider.Model, _ *provider.Request, t session.Totals) error {
	return p.budget.Check(m.Name, t)
}

// fixture is a real root agent (scripted loopback provider, real session
// file, built-in tools, the subagents service, a real broker) whose
// children talk to a second scripted provider.
type fixture struct {
	t         *testing.T
	workspace string
	sessions  string
	root      *agent.Agent
	rootSrv   *providertest.Server
	childSrv  *providertest.Server
	owner     *Owner
	cfg       Config
	model     provider.Model
}

type fixtureOpt struct {
	limits   Limits
	service  *Service
	approver tools.Approver
	onEvent  func(Snapshot, agent.Event)
	policy   tools.Policy
	native   bool              // the generic surface (NativeTools, Config.Native)
	maxCost  agent.Picodollars // the root session's cost ceiling (0: none)
	// sessions, when set, is the directory of the root session and the
	// teams (default: a temporary one); session, when set, is an existing
	// root session to open instead of creating one.
	sessions, session string
}

func newFixture(t *testing.T, o fixtureOpt) *fixture {
	t.Helper()
	f := &fixture{t: t, workspace: t.TempDir(), sessions: o.sessions}
	if f.sessions == "" {
		f.sessions = t.TempDir()
	}
	f.rootSrv, f.childSrv = providertest.New(t), providertest.New(t)
	f.model = provider.Model{Name: "scripted", ContextWindow: 400_000, MaxOutputTokens: 128_000}
	budget := &agent.Budget{Prices: agent.PriceTable{"scripted": price}, Ceilings: agent.Ceilings{MaxCost: o.maxCost}}
	sess, err := session.Create(f.sessions, session.Header{Cwd: f.workspace, Title: "root"})
	if o.session != "" {
		sess, err = session.Open(o.session)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	builtins, closeTools, err := tools.Builtins(tools.Config{Root: f.workspace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeTools() })
	host := tools.NewHost()
	policy := o.policy
	if policy == tools.Controlled {
		policy = tools.UnsafeHost
	}
	f.cfg = Config{
		Dir: filepath.Join(f.sessions, "teams"), Limits: o.limits, Service: o.service, OnEvent: o.onEvent, Native: o.native,
		NewAgent: func(cfg agent.Config) (*agent.Agent, func(), error) {
			cfg.Transport = provider.NewHTTP(provider.HTTPConfig{BaseURL: f.childSrv.URL()})
			a, err := agent.New(cfg)
			return a, nil, err
		},
	}
	f.owner = NewOwner(f.cfg)
	delegation := ServiceTools(f.owner, StandardTools)
	if o.native {
		delegation = NativeTools(f.owner, StandardTools)
	}
	for _, tl := range append(builtins, delegation...) {
		if err := host.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	broker := tools.NewBroker(tools.BrokerConfig{Policy: policy, Approver: o.approver, Principal: sess.Header().ID})
	f.root, err = agent.New(agent.Config{
		Session: sess, Transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: f.rootSrv.URL()}),
		Model: f.model, Host: host, Broker: broker, Instructions: "You are the root.",
		Retry: pricedNoRetry{budget: budget}, RunEnd: f.owner.RunEnd, Ledger: f.owner.Ledger, Principal: sess.Header().ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.owner.Bind(f.root)
	return f
}

// completeRoot runs prompt on the root to its end, failing the test
// unless it completed.
func (f *fixture) completeRoot(t *testing.T, prompt string) {
	t.Helper()
	r, err := f.root.Prompt(context.Background(), prompt, agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	if res := r.Wait(); res.Outcome != agent.OutcomeCompleted {
		t.Fatalf("root run %s %v", res.Outcome, res.Err)
	}
}

// team starts a team directly on the root (no root run needed).
func (f *fixture) team() *Team {
	f.t.Helper()
	cfg := f.cfg
	cfg.Root, cfg.RunID = f.root, "run_test"
	tm, err := Start(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { tm.Shutdown(context.Background(), "run_test", 5*time.Second) })
	return tm
}

// stalls queues n child turns that stall until cancelled.
func (f *fixture) stalls(n int) {
	for range n {
		f.childSrv.Enqueue(providertest.Stall())
	}
}

// waitScriptTaken waits until every turn scripted for the children is
// taken: a child's running status does not say its request reached the
// server, and a turn scripted after it must not be taken by that request.
func (f *fixture) waitScriptTaken(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); f.childSrv.Pending() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d scripted child turns never taken", f.childSrv.Pending())
		}
	}
}

// spawnConcurrently spawns n children of parent at once and returns the
// successes and the errors.
func spawnConcurrently(tm *Team, parent string, n int) (ok []Snapshot, errs []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := tm.Spawn(SpawnRequest{Parent: parent, Task: "task " + string(rune('a'+i%26))})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else {
				ok = append(ok, s)
			}
		}()
	}
	close(start)
	wg.Wait()
	return ok, errs
}

// limitOf returns the LimitError's Limit, or "" for another error.
func limitOf(err error) string {
	if le, ok := errors.AsType[*LimitError](err); ok {
		return le.Limit
	}
	return ""
}

// waitStatus waits until agent id of tm has status st.
func waitStatus(t *testing.T, tm *Team, id string, st Status) Snapshot {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, s := range tm.List("root") {
			if s.ID == id && s.Status == st {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s never reached %s: %+v", id, st, tm.List("root"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// provenance reads the team's journal.
func provenance(t *testing.T, tm *Team) []Record {
	t.Helper()
	recs, err := ReadProvenance(filepath.Join(tm.Dir(), JournalName))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func countKind(recs []Record, kind string) int {
	n := 0
	for _, r := range recs {
		if r.Kind == kind {
			n++
		}
	}
	return n
}

var _ = os.Getpid

// sendConcurrently sends text from the root to child id n times at once;
// it returns how many were accepted and the limits of the refusals.
func sendConcurrently(tm *Team, id string, n int, text string) (ok int, limits []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := tm.Send("root", id, text)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
			} else {
				limits = append(limits, limitOf(err))
			}
		}()
	}
	wg.Wait()
	return ok, limits
}
