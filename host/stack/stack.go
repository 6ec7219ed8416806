// Package stack builds octet's runtime from configuration: a [Stack] is
// one workspace's provider transport and model, its tools with their
// change recorder, confinement and redaction, its MCP servers and context
// files, and it builds the agents of the workspace's sessions (each with
// its effect broker and, under unsafe_host, its delegated children).
// [Workspaces] is the host.Runtime of the editor dialects over every
// workspace they open, one configuration and one watched set of context
// files each. The configuration stays data (internal/config); this
// package assembles it, for the host and the CLI alike.
package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/harness"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/internal/images"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
	"github.com/octet-agent/octet/tools/mcp"
)

// Stack is the runtime built from configuration for one workspace,
// shared by the sessions of one command (octet exec, octet demo) or by
// one session of an editor: provider transport, model, tool host and
// instructions.
type Stack struct {
	// MaxTurns bounds each run (0: the agent's default).
	MaxTurns int
	// Delegation, when set, adds observers (events, status, approvals)
	// to the team configuration of a session's children.
	Delegation func(sess *session.Session, cfg *team.Config)
	// Editor, when set, is the dialect's view of the editor for the
	// environment context (host.AgentSpec.Editor).
	Editor func() (client string, open []string)

	cfg            *config.Config
	workspace      string
	transport      provider.Transport
	model          provider.Model
	host           *tools.Host
	closeTools     func() error
	shellPath      string
	shellSelection tools.ShellSelection
	context        *config.ContextSet
	log            *slog.Logger
	// endpoint is the route's endpoint features (host configuration).
	endpoint provider.ResponsesFeatures
	// key is the provider credential (for each agent's WebSocket).
	key config.Secret
	// webSocket is true when agents start on the Responses WebSocket.
	webSocket bool
	// redactor replaces the key's value in everything tools produce.
	redactor *tools.Redactor
	// changes stages what edit and write change, with their images in
	// the workspace's change store under $OCTET_HOME.
	changes *changes.Recorder
	// confine is the file tools' confinement switch, which the broker
	// turns on when a session tightens its policy below unsafe_host.
	confine *tools.Confinement
	// buffers keeps commands and the editor's buffers in agreement (nil
	// without an editor that tracks them).
	buffers *tools.BufferGuard
	// ext are the MCP servers whose tools are in host.
	ext *extensions
}

// LoadConfig resolves configuration for workspace (lookup reads the
// environment) and logs its warnings.
func LoadConfig(lookup func(string) (string, bool), workspace string, flags config.Flags, log *slog.Logger) (*config.Config, error) {
	cfg, err := config.Load(config.Options{Workspace: workspace, LookupEnv: lookup, Flags: flags})
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	return cfg, nil
}

// LoadAPIKey returns the selected provider's key (config.LoadProviderKey),
// or none when the provider needs none or is on loopback (a scripted or
// local server) and no key is configured.
func LoadAPIKey(lookup func(string) (string, bool), cfg *config.Config) (config.Secret, error) {
	key, _, err := config.LoadProviderKey(cfg.Home, cfg.Provider(), lookup)
	if _, missing := errors.AsType[*config.MissingKeyError](err); missing && provider.IsLoopbackURL(cfg.BaseURL.Value) {
		return config.Secret{}, nil
	}
	return key, err
}

// New builds the runtime of workspace (an absolute path) with the
// provider key key, loading its context files. The caller closes it.
func New(cfg *config.Config, key config.Secret, workspace string, log *slog.Logger) (*Stack, error) {
	return newWith(cfg, key, workspace, log, nil, nil, nil)
}

// newWith is New with the context files already loaded (and watched) by
// the caller; a nil contextSet loads them. docs, when set, is the
// editor's document overlay the file tools consult; clientMCP are the
// MCP servers the client handed in for the session.
func newWith(cfg *config.Config, key config.Secret, workspace string, log *slog.Logger, contextSet *config.ContextSet, docs tools.Documents, clientMCP []host.MCPServer) (*Stack, error) {
	st := &Stack{cfg: cfg, workspace: workspace, log: log, key: key, context: contextSet}
	route := cfg.Provider()
	// The host asserts the route (configuration, never inferred from a
	// name): the endpoint side of every Responses feature, recovery's
	// qualification included.
	profile := agent.RuntimeProfile("none")
	if st.qualified() {
		profile = agent.ProfileCodex
	}
	st.endpoint = agent.EndpointGrant(profile)
	st.transport = provider.NewHTTP(httpConfig(route, key, st.endpoint, log))
	m := host.Model(cfg, cfg.Model.Value)
	if w := host.ModelWarning(cfg, m); w != "" {
		log.Warn(w)
	}
	st.model = m
	st.webSocket = cfg.Transport.Value == config.TransportWebSocket
	if st.webSocket && (route.WireAPI != config.WireResponses || route.KeyHeader != "" && route.KeyHeader != provider.KeyAuthorization || len(route.QueryParams) > 0) {
		log.Warn(fmt.Sprintf("transport = websocket is not used: provider %s is not a Responses route that takes its key as a bearer token without query parameters; using http", route.Name))
		st.webSocket = false
	}
	if st.webSocket && !agent.WebSocketGranted(m, st.endpoint) {
		// The WebSocket→HTTP fallback (a 426 handshake, repeated socket
		// failures) is a decision of the recovery policy, which only a
		// qualified Codex route has (runtime_profile = codex and a model
		// octet knows to grant it); without it a refused handshake would
		// fail the turn. Stay on HTTP rather than fail.
		why := fmt.Sprintf("model %s does not qualify for provider recovery", m.Name)
		if cfg.RuntimeProfile.Value != "codex" {
			why = "it needs runtime_profile = codex"
		}
		log.Warn(fmt.Sprintf("transport = websocket is not used: %s, and the WebSocket-to-HTTP fallback is part of provider recovery; using http", why))
		st.webSocket = false
	}
	st.shellPath, st.shellSelection = tools.ResolveShell(cfg.ShellPath.Value)
	// Tool output never carries the key on: results, progress and bash
	// spill files are redacted of its exact value.
	st.redactor = tools.NewRedactor(append(append(configuredSecrets(cfg), clientSecrets(clientMCP)...), key.Reveal())...)
	tc := host.ToolsConfig(cfg, workspace)
	tc.Redactor = st.redactor
	tc.Documents = docs
	st.buffers = tools.NewBufferGuard(docs, workspace)
	store, err := changes.OpenWorkspace(cfg.Home, workspace, 0)
	if err != nil {
		return nil, fmt.Errorf("set up tools: %w", err)
	}
	st.changes = &changes.Recorder{Store: store, Redact: st.redactor.String}
	tc.Changes = st.changes
	st.confine = &tools.Confinement{}
	tc.Confine = st.confine
	builtins, closeTools, err := tools.Builtins(tc)
	if err != nil {
		return nil, fmt.Errorf("set up tools: %w", err)
	}
	st.closeTools = closeTools
	all := tools.NewHost()
	var have []string
	for _, t := range builtins {
		if err := all.Register(t); err != nil {
			closeTools()
			return nil, fmt.Errorf("set up tools: %w", err)
		}
		have = append(have, t.Name())
	}
	enabled := slices.DeleteFunc(cfg.EnabledTools(), func(n string) bool {
		if strings.HasPrefix(n, config.MCPToolPrefix) {
			return true // registered when its server lists it
		}
		if !slices.Contains(have, n) {
			if n != "diagnostics" { // built only for an editor that forwards them
				log.Warn(fmt.Sprintf("tool %q is not available in this build", n))
			}
			return true
		}
		return false
	})
	if st.host, err = all.Filter(enabled); err != nil {
		closeTools()
		return nil, fmt.Errorf("set up tools: %w", err)
	}
	st.ext = startExtensions(cfg, st.host, workspace, log, clientMCP, st.redactor.String)
	logSandbox(host.EffectiveToolPolicy(cfg, st.shellSelection).Sandbox, log)
	if st.context != nil {
		return st, nil
	}
	var paths []config.ContextPath
	if cfg.ContextFiles.Value {
		paths = config.ContextFilePaths(cfg.Home, workspace)
	}
	st.context, err = config.NewContextSet(paths)
	if err != nil {
		log.Warn(err.Error())
	}
	return st, nil
}

// Config is the configuration the stack was built from.
func (st *Stack) Config() *config.Config { return st.cfg }

// Logger is where the stack logs.
func (st *Stack) Logger() *slog.Logger { return st.log }

// Model is the model the stack's agents start with.
func (st *Stack) Model() provider.Model { return st.model }

// MCPServers are the stack's MCP servers as they started (or did not).
func (st *Stack) MCPServers() []mcp.ServerInfo { return st.ext.m.List() }

// Close stops the MCP servers and releases the tools' resources.
func (st *Stack) Close() error {
	if st.ext != nil {
		st.ext.Close()
	}
	if st.closeTools != nil {
		return st.closeTools()
	}
	return nil
}

// instructions is the system prompt with the current context files, and
// the plan section when update_plan is among the tools.
func (st *Stack) instructions() string {
	_, plan := st.host.Lookup(tools.UpdatePlanTool{}.Name())
	return harness.Instructions(harness.Options{Plan: plan, ContextFiles: st.context.Instructions()})
}

// facts are what the environment context tells the model of the
// stack's workspace (harness.Facts.Environment is the agent's hook).
func (st *Stack) facts() harness.Facts {
	return harness.Facts{
		Workspace:     st.workspace,
		Shell:         st.shellPath,
		FilesConfined: func() bool { return !st.cfg.AllowExternalPaths.Value || st.confine.On() },
		Network:       "not restricted by octet: commands reach the network as the user can",
		Sandbox:       host.EffectiveToolPolicy(st.cfg, st.shellSelection).Sandbox,
		Editor:        st.Editor,
	}
}

// reasoning is the reasoning selection agents start with: the configured
// effort and reasoning_summary (requests carry it only for models that
// reason).
func (st *Stack) reasoning() *provider.Reasoning {
	r := provider.Reasoning{Effort: st.cfg.Reasoning.Value, Summary: st.cfg.ReasoningSummary.Value}
	if r.Summary == "none" || r.Effort == "none" {
		r.Summary = ""
	}
	if r == (provider.Reasoning{}) {
		return nil
	}
	return &r
}

// offer is the agent's Config.Offer: apply_patch goes to the models
// octet's table says were trained on its format (apply_patch = "auto"),
// or to every model ("on"); view_image to the models that take image
// input; every other tool to every model.
func (st *Stack) offer(m provider.Model, name string) bool {
	switch name {
	case "apply_patch":
		return st.cfg.ApplyPatch.Value == "on" || (st.cfg.ApplyPatch.Value == "auto" && m.ApplyPatch)
	case "view_image":
		return m.Images
	}
	return true
}

// qualified reports whether the host asserts the Codex runtime profile on
// a Responses route: the only route provider recovery may qualify.
func (st *Stack) qualified() bool {
	return st.cfg.RuntimeProfile.Value == "codex" && st.cfg.Provider().WireAPI == config.WireResponses
}

// retryPolicy is the agent's recovery envelope on the Codex runtime
// profile of a Responses route, and no retry otherwise (an unqualified
// route never replays a request body). Both price usage and enforce the
// hard ceilings.
func (st *Stack) retryPolicy() agent.RetryPolicy {
	if !st.qualified() {
		return meteredNoRetry{budget: host.Budget(st.cfg)}
	}
	p := agent.NewCodexRecovery(agent.RecoveryConfig{
		Profile:   agent.ProfileCodex,
		Wire:      provider.WireResponses,
		Model:     st.model,
		Endpoint:  st.endpoint,
		WebSocket: st.webSocket,
		Budget:    host.Budget(st.cfg),
	})
	p.SetMaxNetworkWait(st.cfg.MaxNetworkWait.Value)
	p.SetMaxRetryWait(st.cfg.MaxRetryWait.Value)
	return p
}

// httpConfig is the transport configuration of a provider route: its
// wire format, URL, key and where the key goes, headers, query
// parameters and timeouts. A provider with no key source sends none.
func httpConfig(p config.Provider, key config.Secret, endpoint provider.ResponsesFeatures, log *slog.Logger) provider.HTTPConfig {
	hc := provider.HTTPConfig{
		BaseURL:     p.BaseURL,
		Wire:        provider.WireAPI(p.WireAPI),
		APIKey:      key.Reveal(),
		KeyHeader:   p.KeyHeader,
		NoAuth:      p.EnvKey == "" && p.Credentials == "",
		IdleTimeout: p.StreamIdleTimeout,
		OpenTimeout: p.OpenTimeout,
		Features:    endpoint,
		Logger:      log,
	}
	if len(p.Headers) > 0 {
		hc.Headers = http.Header{}
		for k, v := range p.Headers {
			hc.Headers.Set(k, v)
		}
	}
	if len(p.QueryParams) > 0 {
		hc.Query = url.Values{}
		for k, v := range p.QueryParams {
			hc.Query.Set(k, v)
		}
	}
	return hc
}

// agentTransport is the transport of one agent: the shared HTTP transport,
// or with transport = "websocket" the agent's own Responses WebSocket (it
// carries one response at a time) that falls back to HTTP when the
// recovery policy decides so. close releases the socket.
func (st *Stack) agentTransport() (tr provider.Transport, close func()) {
	if !st.webSocket {
		return st.transport, func() {}
	}
	route := st.cfg.Provider()
	// The route's bounds hold on the socket as on HTTP: a silent response
	// ends after stream_idle_timeout_secs, a dial after open_timeout_secs.
	ws := provider.NewWebSocket(provider.WSConfig{
		BaseURL:        route.BaseURL,
		Headers:        httpConfig(route, config.Secret{}, 0, nil).Headers,
		APIKey:         st.key.Reveal(),
		IdleTimeout:    route.StreamIdleTimeout,
		ConnectTimeout: route.OpenTimeout,
		Features:       st.endpoint,
		Logger:         st.log,
	})
	return agent.NewFallbackTransport(ws, st.transport), func() { _ = ws.Close() }
}

// NewAgent opens an agent on sess with approvals from approver and
// standing approvals in rules (nil: none), at the session's effect policy
// policy (nil, or looser than the launch policy: the launch policy). The
// session's MCP servers run only while its policy admits them. The agent
// follows context file reloads (SetInstructions) until release is
// called; release also closes its WebSocket, if any.
func (st *Stack) NewAgent(sess *session.Session, approver tools.Approver, rules tools.RuleStore, policy *tools.Policy) (a *agent.Agent, release func(), err error) {
	// Children of earlier runs that were never mirrored (the process was
	// killed during delegation) count before any ceiling is checked.
	// Not counting them would let a ceiling pass what they cost.
	if n, err := team.Reconcile(sess, host.TeamsDir(filepath.Dir(sess.Path())), st.log); err != nil {
		return nil, nil, err
	} else if n > 0 {
		st.log.Info("delegated usage reconciled from child sessions", "session", sess.Header().ID, "records", n)
	}
	broker := tools.NewBroker(tools.BrokerConfig{
		Policy:          host.ToolPolicy(st.cfg),
		Approver:        approver,
		Rules:           rules,
		Confine:         st.confine,
		Buffers:         st.buffers,
		EffectivePolicy: host.EffectiveToolPolicy(st.cfg, st.shellSelection),
		Principal:       sess.Header().ID,
		Logger:          st.log,
		Redactor:        st.redactor,
	})
	if policy != nil && *policy != broker.Policy() && policy.NoLooserThan(broker.LaunchPolicy()) {
		if _, err := broker.SetPolicy(*policy); err != nil {
			return nil, nil, err
		}
	}
	th, owner, err := st.delegationHost(sess)
	if err != nil {
		return nil, nil, err
	}
	tr, closeTransport := st.agentTransport()
	cfg := agent.Config{
		Session:      sess,
		Transport:    tr,
		Model:        st.model,
		Host:         th,
		Broker:       broker,
		Instructions: st.instructions(),
		Reasoning:    st.reasoning(),
		Environment:  st.facts().Environment,
		Offer:        st.offer,
		Retry:        st.retryPolicy(),
		MaxTurns:     st.MaxTurns,
		Logger:       st.log,
		Principal:    sess.Header().ID,
		Intents:      st.changes.Store,
		Images:       images.Open(filepath.Join(st.cfg.Home, "images")),
	}
	if owner != nil {
		cfg.RunEnd, cfg.Ledger = owner.RunEnd, owner.Ledger
	}
	a, err = agent.New(cfg)
	if err != nil {
		closeTransport()
		return nil, nil, err
	}
	if owner != nil {
		owner.Bind(a)
	}
	unfollow := st.ext.follow(broker)
	unsubscribe := st.context.Subscribe(func(string) { a.SetInstructions(st.instructions()) })
	// A reload between agent.New and Subscribe would otherwise be missed.
	a.SetInstructions(st.instructions())
	return a, func() {
		if owner != nil {
			owner.Close()
		}
		unfollow()
		unsubscribe()
		closeTransport()
	}, nil
}

// delegationHost is the root agent's tool host: the stack's own host
// (live: MCP tools a server registers later, or withdraws, reach the
// model at its next request) plus the subagents service's delegation
// tools when the launch policy admits the Delegation effect (unsafe_host)
// and the tool allowlist is not narrowed (--tools, tools = [...] name
// exactly the tools offered). The delegation tools state their effect,
// so a session whose own policy denies delegation is not offered them
// (tools.Broker.Offers). The owner (nil without delegation) manages the
// run's children: their teams live beside the session file, each
// child's agent gets its own transport and a clone of the retry policy,
// and st.Delegation observes them. A stack drives one session, so its
// host is that session's.
func (st *Stack) delegationHost(sess *session.Session) (*tools.Host, *team.Owner, error) {
	if host.ToolPolicy(st.cfg) != tools.UnsafeHost || st.cfg.Tools.Source != config.SourceDefault {
		return st.host, nil, nil
	}
	var names []string
	for _, tl := range st.host.Tools() {
		names = append(names, tl.Name())
	}
	th := st.host
	tcfg := team.Config{
		Dir:     host.TeamsDir(filepath.Dir(sess.Path())),
		Service: &team.ProductService,
		Logger:  st.log,
		NewAgent: func(cfg agent.Config) (*agent.Agent, func(), error) {
			tr, closeTransport := st.agentTransport()
			cfg.Transport = tr
			a, err := agent.New(cfg)
			if err != nil {
				closeTransport()
				return nil, nil, err
			}
			return a, closeTransport, nil
		},
	}
	if st.Delegation != nil {
		st.Delegation(sess, &tcfg)
	}
	owner := team.NewOwner(tcfg)
	for _, tl := range team.ServiceTools(owner, names) {
		if err := th.Register(tl); err != nil {
			return nil, nil, fmt.Errorf("register delegation tools: %w", err)
		}
	}
	return th, owner, nil
}

// EndpointModels lists the models the selected provider's endpoint
// serves (GET …/models, with the route's headers, key and query).
func EndpointModels(ctx context.Context, cfg *config.Config, key config.Secret, log *slog.Logger) ([]string, error) {
	return provider.NewHTTP(httpConfig(cfg.Provider(), key, 0, log)).ListModels(ctx)
}

// ProviderHint turns a provider failure into an actionable sentence
// naming the selected provider's settings ("" for another failure).
func ProviderHint(err error, cfg *config.Config) string {
	pe, ok := errors.AsType[*provider.Error](err)
	if !ok {
		return ""
	}
	p := cfg.Provider()
	where := "base_url of [model_providers." + p.Name + "]"
	if p.Name == config.DefaultProvider {
		where = "OPENAI_BASE_URL"
	}
	keySource := keySources(p)
	api := map[string]string{config.WireResponses: "Responses", config.WireChat: "Chat Completions", config.WireAnthropic: "Messages"}[p.WireAPI]
	switch {
	case pe.Class == provider.Connect && pe.LocalRefused:
		return fmt.Sprintf("no server is listening at %s: start it, or check %s", p.BaseURL, where)
	case pe.Class == provider.Connect || pe.Class == provider.NetworkUnavailable:
		return fmt.Sprintf("cannot reach the provider at %s: check your network and %s", p.BaseURL, where)
	case pe.Class == provider.NotEventStream:
		return fmt.Sprintf("%s does not look like a %s API root: check %s", p.BaseURL, api, where)
	case pe.Class == provider.AuthUnavailable:
		return "no API key: " + keySource
	case pe.Permanent() && !keyRefusal(pe):
		// Before the status: a 403 for the region, a 429 for the quota.
		return permanentHint(pe, keySource)
	case pe.Class == provider.HTTPStatus && (pe.Status == 401 || pe.Status == 403):
		return fmt.Sprintf("the provider refused the API key (HTTP %d): check %s", pe.Status, keySource)
	case pe.Class == provider.HTTPStatus && pe.Status == 404:
		return fmt.Sprintf("the provider at %s has no %s endpoint or model %q (HTTP 404): check %s and --model", p.BaseURL, api, cfg.Model.Value, where)
	case pe.Permanent():
		return permanentHint(pe, keySource)
	case pe.Class == provider.HTTPStatus && (pe.Status == 400 || pe.Status == 413) && contextOverflow(pe):
		return fmt.Sprintf("the request is larger than the model or the provider takes (HTTP %d): %s", pe.Status, adviceCompact)
	case pe.Class == provider.HTTPStatus && (pe.Status == 429 || pe.Status >= 500):
		what := "is overloaded or failing"
		if pe.Status == 429 {
			what = "rate-limited the request"
		}
		s := fmt.Sprintf("the provider %s (HTTP %d)", what, pe.Status)
		if pe.HasRetryAfter {
			s += fmt.Sprintf("; it asks to wait %s before trying again", pe.RetryAfter.Round(time.Second))
		}
		if advice := retryAdvice(err, cfg); advice != "" || pe.Status != 429 {
			return s + advice
		}
		return s + "; octet does not resend a rate-limited request: run the prompt again later"
	}
	if what := interruption(pe); what != "" {
		return what + retryAdvice(err, cfg)
	}
	return ""
}

// interruption names a failure that a new request may not repeat (the
// connection or the stream broke, the provider failed the response for a
// reason that does not blame the request), or "" for another failure.
func interruption(pe *provider.Error) string {
	switch pe.Class {
	case provider.ResponseHeaders:
		return "the provider did not answer the request"
	case provider.BodyInterrupted, provider.TerminalEOF, provider.IdleTimeout, provider.StreamFailure:
		return "the provider's response stream broke off before the answer was complete"
	case provider.ResponsesFailed:
		if provider.IsRequestCode(pe.Code) {
			return ""
		}
		return "the provider failed the response before it was complete"
	case provider.ResponsesIncomplete:
		if pe.IncompleteReason == "content_filter" {
			return "the provider's content filter stopped the answer: rephrase the prompt"
		}
	}
	return ""
}

// retryAdvice says what to do after a failure a new request may not
// repeat: the selected route either never resends a request on its own,
// or already did until its budget ran out.
func retryAdvice(err error, cfg *config.Config) string {
	p := cfg.Provider()
	if cfg.RuntimeProfile.Value != "codex" || p.WireAPI != config.WireResponses {
		return fmt.Sprintf("; provider %s is not a qualified route, so octet never resends a request on its own: run the prompt again", p.Name)
	}
	if ee, ok := errors.AsType[*agent.ExhaustedError](err); ok {
		return fmt.Sprintf("; octet made %d attempts without success: run the prompt again later", ee.Attempts)
	}
	if _, ok := errors.AsType[*agent.RetryWaitLimit](err); ok {
		return "; octet stopped retrying at max_retry_wait_secs: run the prompt again later, or raise the bound"
	}
	return ""
}

// adviceCompact is what to do about a conversation too large to send.
const adviceCompact = "compact the session (/compact, or octet exec --compact --session ID) or start a new one"

// contextOverflowWords are how providers without a context_length_exceeded
// code say a request does not fit: Anthropic ("prompt is too long"),
// llama.cpp (exceed_context_size_error), vLLM and gateways ("maximum
// context length"), and a 413's request_too_large.
var contextOverflowWords = []string{"prompt is too long", "exceed_context_size", "exceeds the available context",
	"context length", "context window", "context_length", "request_too_large", "too many tokens"}

// contextOverflow reports whether a refusal says the request does not
// fit the model's context or the provider's size bound.
func contextOverflow(pe *provider.Error) bool {
	text := strings.ToLower(pe.Code + " " + pe.Type + " " + pe.Message)
	for _, w := range contextOverflowWords {
		if strings.Contains(text, w) {
			return true
		}
	}
	return pe.Status == 413
}

// keyRefusal reports whether a permanent code refuses the key itself.
func keyRefusal(pe *provider.Error) bool {
	switch strings.ToLower(strings.TrimSpace(pe.Code)) {
	case "invalid_api_key", "invalid_authentication", "authentication_error", "permission_denied", "account_deactivated":
		return true
	}
	return pe.Code == "" && strings.EqualFold(pe.Type, "authentication_error")
}

// permanentHint says what to do about an explicit permanent provider
// code: the key's account (auth, quota), the conversation's size, or
// the prompt (policy).
func permanentHint(pe *provider.Error, keySource string) string {
	code := strings.ToLower(strings.TrimSpace(pe.Code))
	if !provider.IsPermanentCode(code) {
		code = strings.ToLower(strings.TrimSpace(pe.Type))
	}
	switch {
	case strings.Contains(code, "quota") || strings.HasPrefix(code, "billing_") || code == "usage_not_included":
		return fmt.Sprintf("the provider account has no quota for this request (%s): check the plan and billing of the key in %s", code, keySource)
	case code == "context_length_exceeded":
		return "the conversation no longer fits the model's context window (context_length_exceeded): " + adviceCompact
	case strings.HasSuffix(code, "_policy") || strings.HasSuffix(code, "policy_violation"):
		return fmt.Sprintf("the provider refused the request under its usage policy (%s): rephrase the prompt", code)
	case code == "server_is_overloaded" || code == "slow_down":
		return fmt.Sprintf("the provider declined the request for lack of capacity (%s): run the prompt again later", code)
	case code == "unsupported_country_region_territory":
		return "the provider does not serve requests from this country, region or territory (unsupported_country_region_territory): use a provider available where you are"
	case code == "invalid_prompt":
		return "the provider refused the prompt as invalid (invalid_prompt): rephrase it"
	}
	return fmt.Sprintf("the provider refused the key's account (%s): check %s", code, keySource)
}

// keySources says where provider p's key comes from, for a message.
func keySources(p config.Provider) string {
	var s []string
	if p.EnvKey != "" {
		s = append(s, p.EnvKey)
	}
	switch {
	case p.Credentials == "openai":
		s = append(s, "openai_api_key in $OCTET_HOME/credentials")
	case p.Credentials != "":
		s = append(s, p.Credentials+" under [api_keys] in $OCTET_HOME/credentials")
	}
	if len(s) == 0 {
		return "provider " + p.Name + " has no key source (env_key or credentials)"
	}
	return strings.Join(s, " or ")
}

// logSandbox states the OS sandbox on stderr when a stack starts: a
// warning when the host cannot sandbox commands (the controlled policies
// then only admit them) or enforces less than the profiles say — when
// the launch's profile sandboxes commands; under none (nothing is
// sandboxed: octet exec's default) the same is said at Info level, for
// the sessions that choose a profile later (an editor's ask session).
func logSandbox(s tools.Setting[tools.SandboxValue], log *slog.Logger) {
	v := s.Value
	level := slog.LevelWarn
	if v.Profile == tools.SandboxNone || v.Profile == "" {
		level = slog.LevelInfo
	}
	switch {
	case !v.Available():
		log.Log(context.Background(), level, "OS sandbox unavailable: commands are admitted by the effect policy but not confined", "reason", v.Note)
	case v.Note != "":
		log.Log(context.Background(), level, "OS sandbox", "mechanism", v.Mechanism, "abi", v.ABI, "profile", v.Profile, "not enforced here", v.Note)
	default:
		log.Debug("OS sandbox", "mechanism", v.Mechanism, "abi", v.ABI, "profile", v.Profile, "source", s.Source)
	}
}

// SettleSelection settles the model and reasoning selection of sess's
// agent a before a run of octet exec: a continued session gets back the
// selection it recorded last (host.RestoreSelection) unless --model or
// --reasoning choose anew; what was chosen by a flag is recorded, so a
// later continuation without the flag keeps it.
func (st *Stack) SettleSelection(a *agent.Agent, sess *session.Session) error {
	err := host.RestoreSelection(a, sess, func(name string) (provider.Model, error) {
		if m, ok := provider.LookupModel(name); ok {
			return m, nil
		}
		return provider.Model{}, fmt.Errorf("model %q is not in octet's model table", name)
	}, st.log)
	if err != nil {
		return err
	}
	byModel, byEffort := st.cfg.Model.Source == config.SourceFlag, st.cfg.Reasoning.Source == config.SourceFlag
	if !byModel && !byEffort {
		return nil
	}
	m, effort := a.Model(), a.Reasoning()
	if byModel {
		m = st.model
	}
	if byEffort {
		effort = ""
		if r := st.reasoning(); r != nil {
			effort = r.Effort
		}
	}
	return a.SetSelection(m, effort)
}
