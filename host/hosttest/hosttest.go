// Package hosttest builds the real runtime of octet's sessions for tests
// of the host and of its dialects: the real agent, built-in tools with a
// change store, and effect broker over a scripted provider
// (provider/providertest), without configuration files. Only tests
// import it.
package hosttest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/images"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// Options select a Stack's runtime.
type Options struct {
	// Policy is the launch policy (the zero value is controlled_bash_approval).
	Policy tools.Policy
	// Recovery selects the Codex recovery envelope: a qualified model and
	// endpoint, with Backoff (default 20 ms) as the initial backoff.
	Recovery bool
	Backoff  time.Duration
	// InProcess plays the provider script through providertest's
	// in-process RoundTripper (no sockets), for tests inside a
	// testing/synctest bubble.
	InProcess bool
	// MaxTurns bounds each run (0: the agent's default).
	MaxTurns int
	// Delegation gives each root agent the product's subagents service
	// (its teams beside the session files) and the session's delegation
	// hook, as octet does under unsafe_host.
	Delegation bool
	// Home and Provider, when set, are used instead of a new temporary
	// home and scripted provider.
	Home     string
	Provider *providertest.Server
}

// Stack is the real runtime under a test: a scripted provider, session
// files under a temporary home, tools in a temporary workspace.
type Stack struct {
	Home, Workspace string
	Provider        *providertest.Server
	Runtime         *host.Runtime

	// Read each time an agent is built, so a test may set them after New:
	// Hooks run around every tool call; Intents, when set, wraps the
	// agent's intent log (the change store); StoreMax, when set, caps
	// the change store's blobs (its expiry); NewAgentErr, when set, is
	// what building an agent fails with.
	Hooks       []tools.Hooks
	Intents     func(changes.IntentLog) changes.IntentLog
	StoreMax    int64
	NewAgentErr error
}

// New builds the stack of o.
func New(t testing.TB, o Options) *Stack {
	t.Helper()
	st := &Stack{Home: o.Home, Workspace: t.TempDir(), Provider: o.Provider}
	if st.Home == "" {
		st.Home = t.TempDir()
	}
	if st.Provider == nil && o.InProcess {
		st.Provider = providertest.NewInProcess(t)
	} else if st.Provider == nil {
		st.Provider = providertest.New(t)
	}
	st.Runtime = &host.Runtime{SessionsDir: filepath.Join(st.Home, "sessions"), NewAgent: st.builder(o)}
	return st
}

// model is the model a stack's agents run.
func (o Options) model() provider.Model {
	if o.Recovery {
		m, _ := provider.LookupModel("gpt-5.1-codex")
		return m
	}
	return provider.Model{Name: "gpt-test", ContextWindow: 128_000, MaxOutputTokens: 16_000}
}

// retry is the agents' recovery policy (nil without Recovery).
func (o Options) retry(model provider.Model) agent.RetryPolicy {
	if !o.Recovery {
		return nil
	}
	backoff := o.Backoff
	if backoff == 0 {
		backoff = 20 * time.Millisecond
	}
	return agent.NewCodexRecovery(agent.RecoveryConfig{Profile: agent.ProfileCodex, Wire: provider.WireResponses, Model: model, Endpoint: model.Features, InitialBackoff: backoff})
}

// builder is the runtime's NewAgent.
func (st *Stack) builder(o Options) func(context.Context, host.AgentSpec) (*host.Built, error) {
	model := o.model()
	hc := provider.HTTPConfig{BaseURL: st.Provider.URL(), Features: model.Features}
	if o.InProcess {
		hc.RoundTripper = st.Provider.RoundTripper()
	}
	transport := provider.NewHTTP(hc)
	return func(ctx context.Context, spec host.AgentSpec) (*host.Built, error) {
		if st.NewAgentErr != nil {
			return nil, st.NewAgentErr
		}
		store, err := changes.OpenWorkspace(st.Home, spec.Workspace, 0)
		if err != nil {
			return nil, err
		}
		if st.StoreMax > 0 {
			store.SetMaxBytes(st.StoreMax)
		}
		recorder := &changes.Recorder{Store: store}
		builtins, closeTools, err := tools.Builtins(tools.Config{Root: spec.Workspace, Documents: spec.Documents, Changes: recorder})
		if err != nil {
			return nil, err
		}
		var owner *team.Owner
		if o.Delegation {
			owner = st.owner(spec)
			builtins = append(builtins, team.ServiceTools(owner, team.StandardTools)...)
		}
		closeAll := func() error {
			if owner != nil {
				owner.Close()
			}
			return closeTools()
		}
		toolHost := tools.NewHost()
		for _, tl := range builtins {
			if err := toolHost.Register(tl); err != nil {
				closeAll()
				return nil, err
			}
		}
		broker := tools.NewBroker(tools.BrokerConfig{
			Policy: o.Policy, Approver: spec.Approver, EffectivePolicy: tools.DefaultToolPolicy(o.Policy, "system_bash"),
			Principal: spec.Principal, Rules: spec.Rules, Hooks: st.Hooks,
			Buffers: tools.NewBufferGuard(spec.Documents, spec.Workspace),
		})
		if p := spec.Policy; p != nil && *p != broker.Policy() && p.NoLooserThan(broker.LaunchPolicy()) {
			if _, err := broker.SetPolicy(*p); err != nil {
				closeAll()
				return nil, err
			}
		}
		var intents changes.IntentLog = store
		if st.Intents != nil {
			intents = st.Intents(store)
		}
		cfg := agent.Config{
			Session: spec.Session, Transport: transport, Model: model, Host: toolHost, Broker: broker,
			Instructions: "You are a test agent.", Principal: spec.Principal, Retry: o.retry(model),
			MaxTurns: o.MaxTurns, Intents: intents, Images: images.Open(filepath.Join(st.Home, "images")),
		}
		if owner != nil {
			cfg.RunEnd, cfg.Ledger = owner.RunEnd, owner.Ledger
		}
		a, err := agent.New(cfg)
		if err != nil {
			closeAll()
			return nil, err
		}
		if owner != nil {
			owner.Bind(a)
		}
		return &host.Built{Agent: a, Policy: broker.EffectiveToolPolicy(), Close: closeAll, Changes: recorder}, nil
	}
}

// owner is the subagents service of spec's session: its teams beside the
// session files, connected to the front door by spec.Delegation.
func (st *Stack) owner(spec host.AgentSpec) *team.Owner {
	tcfg := team.Config{
		Dir: filepath.Join(filepath.Dir(spec.Session.Path()), "teams"), Service: &team.ProductService,
		NewAgent: func(cfg agent.Config) (*agent.Agent, func(), error) {
			a, err := agent.New(cfg)
			return a, nil, err
		},
	}
	if spec.Delegation != nil {
		spec.Delegation(&tcfg)
	}
	return team.NewOwner(tcfg)
}
