package host

import (
	"context"
	"fmt"
	"strings"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Runtime is what the host needs from configuration: where sessions
// live and how to build the agent for one session. The CLI fills it from
// flags, config files and credentials; tests fill it with a loopback
// provider.
type Runtime struct {
	// SessionsDir holds the session files ($OCTET_HOME/sessions).
	SessionsDir string
	// NewAgent builds the agent, its tools and broker for one open session.
	// It must install spec.Approver as the broker's Approver (and
	// spec.Rules as its Rules). Required.
	NewAgent func(ctx context.Context, spec AgentSpec) (*Built, error)
	// ResolveModel maps a model name (a session's model selection) to a
	// provider model; nil uses provider.LookupModel and, for an unknown
	// name, refuses it with the names it knows.
	ResolveModel func(name string) (provider.Model, error)
	// ExplainError, when set, turns a run's failure into an actionable
	// sentence ("cannot reach the provider at …: check your network and
	// OPENAI_BASE_URL"), or "" when it has none. The dialects add it to
	// the error they report.
	ExplainError func(err error) string
	// Catalog, when set, is the model catalog of the configuration
	// (CatalogFor); nil is DefaultCatalog.
	Catalog func() Catalog
	// ListModels, when set, asks the endpoint which models it serves
	// (provider.HTTP.ListModels); the host merges the answer into the
	// catalog (Host.ListModels). Nil: the catalog is octet's own.
	ListModels func(ctx context.Context) ([]string, error)
	// Authenticate, when set, reads the provider credentials again (a
	// person has just logged in) and returns an error wrapping
	// ErrAuthRequired while there are still none.
	Authenticate func(ctx context.Context) error
}

// AgentSpec is what the host knows when it needs an agent.
type AgentSpec struct {
	// Session is the writable session the agent drives.
	Session *session.Session
	// Workspace is the session's absolute working directory.
	Workspace string
	// Model and Reasoning are what the client asked for ("" for the
	// configured default).
	Model, Reasoning string
	// Resolved is Model as the host resolved it from the catalog (its
	// limits and features; assumed for a model only the endpoint
	// lists); zero when Model is "".
	Resolved provider.Model
	// Approver asks the person at the front door to confirm effects.
	Approver tools.Approver
	// Principal names the editor session the run acts for.
	Principal string
	// Rules keeps the session's standing approvals (approve for
	// session) in its ledger; install it as the broker's
	// BrokerConfig.Rules. A broker without it asks every time.
	Rules tools.RuleStore
	// Documents is the editor's overlay of open documents for this
	// workspace (nil when there is none): pass it as
	// tools.Config.Documents so read and search see unsaved text and
	// edits of open documents go through the editor.
	Documents tools.Documents
	// Delegation, when set, connects the session's delegated children to
	// the front door: a runtime that delegates calls it on the team
	// configuration of the session's children (events, status changes,
	// approvals naming the child).
	Delegation func(*team.Config)
	// Policy is the session's own effect policy as far as it is known
	// before its agent exists: the policy a new session asked for, or what
	// a resumed session recorded (nil: the launch policy). NewAgent builds
	// the broker at this policy (or the launch policy, when Policy is
	// looser) before anything that acts with the session's authority
	// starts: MCP servers follow the session's policy, never the launch
	// policy the editor started octet with. The host records it and
	// applies it again afterwards (the ledger is the record).
	Policy *tools.Policy
	// Editor, when set, returns the client's name (its initialize's
	// clientInfo) and the documents open in the editor within the
	// workspace (absolute paths), for the model's environment context. It
	// is called before each prompt; it must be quick.
	Editor func() (client string, open []string)
	// MCPServers are MCP servers the client handed in for this session
	// (ACP's session/new): they start under the rules of configured ones
	// (only under unsafe_host; pinned; never under --offline), asked for
	// by the client rather than enabled in config.toml.
	MCPServers []MCPServer
}

// MCPServer is an MCP server a client hands in: a stdio command, or a
// streamable HTTP URL.
type MCPServer struct {
	Name    string
	Command string
	Args    []string
	Env     map[string]string
	URL     string
	Headers map[string]string
}

// Built is an agent ready to drive a session.
type Built struct {
	// Agent drives the session; it must have been built on
	// AgentSpec.Session with AgentSpec.Approver in its broker.
	Agent *agent.Agent
	// Policy is the EffectiveToolPolicy snapshot reported to the client.
	Policy tools.EffectiveToolPolicy
	// Close releases the tools (bash spill files); it may be nil.
	Close func() error
	// Changes is the recorder the tools stage their changes with; its
	// store answers a session's diff. Nil: diffs of paths changed more
	// than once in a run are unavailable.
	Changes *changes.Recorder
	// Extensions are the session's MCP servers; nil: none.
	Extensions Extensions
	// Prewarm asks the host to start a warm-up of the session's next
	// request when the session is opened or resumed (the prewarm config
	// key; agent.StartPrewarm decides whether the route grants it).
	Prewarm bool
}

// Extensions is a session's view of its executable extensions (MCP
// servers): what a dialect lists and re-enables. The host knows nothing
// else about them.
type Extensions interface {
	// List is the JSON-ready state: servers, their state, tools, errors.
	List() any
	// Enable re-enables the withheld tools of a server (all of them when
	// tools is empty), pinning the definitions it presents now, and
	// returns what it pinned.
	Enable(server string, tools []string) (any, error)
	// Subscribe calls f after every change (coalesced) until the
	// returned function is called.
	Subscribe(f func()) (cancel func())
}

// Resolve maps a model name to a provider model with ResolveModel.
// Without one it knows the provider's model table only: a name the run
// could not be qualified for is refused now, not at the first retry.
func (rt *Runtime) Resolve(name string) (provider.Model, error) {
	if rt.ResolveModel != nil {
		return rt.ResolveModel(name)
	}
	if m, ok := provider.LookupModel(name); ok {
		return m, nil
	}
	return provider.Model{}, UnknownModelError(name)
}

// UnknownModelError is the error for a model name octet does not know; it
// lists the names it does, plus extra (such as the configured model).
func UnknownModelError(name string, extra ...string) error {
	known := append(provider.ModelNames(), extra...)
	return fmt.Errorf("unknown model %q: use one of %s (or a dated snapshot of one, such as gpt-5-2025-08-07)",
		name, strings.Join(known, ", "))
}
