package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// contextDebounce coalesces bursts of AGENTS.md writes.
const contextDebounce = 200 * time.Millisecond

// modelResolver maps a model name (octet/setModel, octet/session/new) to
// a provider model (host.Model): the model table, the models cfg
// declares ([models."NAME"]) and the configured model are allowed (one
// octet does not know with an assumed window); any other name is refused
// with the list of allowed ones, at the call rather than at the run's
// first provider request.
func modelResolver(cfg *config.Config) func(string) (provider.Model, error) {
	return func(name string) (provider.Model, error) {
		if name == "" {
			return provider.Model{}, errors.New("empty model name")
		}
		_, known := provider.LookupModel(name)
		_, declared := cfg.Models[name]
		if known || declared || name == cfg.Model.Value {
			return host.Model(cfg, name), nil
		}
		var extra []string
		if cfg.Model.Value != "" {
			if _, ok := provider.LookupModel(cfg.Model.Value); !ok {
				extra = append(extra, cfg.Model.Value+" (configured)")
			}
		}
		for _, n := range slices.Sorted(maps.Keys(cfg.Models)) {
			if n != cfg.Model.Value {
				extra = append(extra, n+" (declared)")
			}
		}
		return provider.Model{}, host.UnknownModelError(name, extra...)
	}
}

// Workspaces builds the agents of the editor dialects' sessions, one
// configuration per workspace (its project .octet/config.toml may
// tighten the profile) and one watched set of context files per
// workspace: its Runtime is the host.Runtime they serve. Close stops the
// context files' watchers.
type Workspaces struct {
	// lookup reads the environment; flags are the command line's.
	lookup func(string) (string, bool)
	flags  config.Flags
	log    *slog.Logger

	mu sync.Mutex
	// global is the last configuration that loaded; keys are the
	// credentials read for each key source a configuration's provider
	// named (an error: missing, an unsafe or broken credentials file;
	// every session creation reports it), each read once.
	global   *config.Config
	keys     map[keySource]loadedKey
	contexts map[string]*watchedContext
}

// NewWorkspaces returns the runtime builder of the editor dialects over
// the environment lookup and the command line's flags.
func NewWorkspaces(lookup func(string) (string, bool), flags config.Flags, log *slog.Logger) *Workspaces {
	return &Workspaces{lookup: lookup, flags: flags, log: log, contexts: map[string]*watchedContext{}}
}

// Runtime is the host.Runtime of the sessions in sessionsDir.
func (ws *Workspaces) Runtime(sessionsDir string) *host.Runtime {
	return &host.Runtime{
		SessionsDir:  sessionsDir,
		NewAgent:     ws.newAgent,
		ResolveModel: ws.resolveModel,
		ExplainError: ws.explain,
		Catalog:      ws.catalog,
		ListModels:   ws.listModels,
		Authenticate: ws.authenticate,
	}
}

// keySource is where a provider's key comes from: a workspace whose
// project selects another of the user's providers gets that provider's
// key, never the one read for another provider.
type keySource struct {
	envKey, entry string
	loopback      bool // a missing key is no error
}

type loadedKey struct {
	key config.Secret
	err error
}

// LoadGlobal loads the configuration without a workspace and, the first
// time it loads, the credentials. It returns the first problem.
func (ws *Workspaces) LoadGlobal() error {
	cfg, err := LoadConfig(ws.lookup, "", ws.flags, ws.log)
	if err != nil {
		return err
	}
	_, err = ws.credentials(cfg)
	return err
}

// credentials records cfg as the current global configuration and returns
// the key of its provider, reading it the first time that key source is
// named and again while there is none (a person may have run octet login
// since). A missing key is host.ErrAuthRequired.
func (ws *Workspaces) credentials(cfg *config.Config) (config.Secret, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.global = cfg
	p := cfg.Provider()
	src := keySource{envKey: p.EnvKey, entry: p.Credentials, loopback: provider.IsLoopbackURL(p.BaseURL)}
	k, ok := ws.keys[src]
	if !ok || errors.Is(k.err, host.ErrAuthRequired) {
		k.key, k.err = LoadAPIKey(ws.lookup, cfg)
		if _, missing := errors.AsType[*config.MissingKeyError](k.err); missing {
			k.err = fmt.Errorf("%w: %w", host.ErrAuthRequired, k.err)
		}
		if ws.keys == nil {
			ws.keys = map[keySource]loadedKey{}
		}
		ws.keys[src] = k
	}
	return k.key, k.err
}

// authenticate is Runtime.Authenticate: the configuration and the
// credentials read again.
func (ws *Workspaces) authenticate(context.Context) error {
	cfg, err := LoadConfig(ws.lookup, "", ws.flags, ws.log)
	if err != nil {
		return err
	}
	ws.mu.Lock()
	ws.keys = nil
	ws.mu.Unlock()
	_, err = ws.credentials(cfg)
	return err
}

// current returns the last global configuration that loaded (nil if none).
func (ws *Workspaces) current() *config.Config {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.global
}

// explain is Runtime.ExplainError over the current configuration.
func (ws *Workspaces) explain(err error) string {
	cfg := ws.current()
	if cfg == nil {
		return ""
	}
	return ProviderHint(err, cfg)
}

// resolveModel is Runtime.ResolveModel: the model table plus the
// configured and declared models.
func (ws *Workspaces) resolveModel(name string) (provider.Model, error) {
	cfg := ws.current()
	if cfg == nil {
		c := config.Defaults()
		cfg = &c
	}
	return modelResolver(cfg)(name)
}

// catalog is Runtime.Catalog: the catalog of the current configuration.
func (ws *Workspaces) catalog() host.Catalog {
	cfg := ws.current()
	if cfg == nil {
		return host.DefaultCatalog()
	}
	return host.CatalogFor(cfg)
}

// listModels is Runtime.ListModels: the model list of the current
// configuration's endpoint.
func (ws *Workspaces) listModels(ctx context.Context) ([]string, error) {
	cfg := ws.current()
	if cfg == nil {
		return nil, errors.New("no configuration has loaded")
	}
	key, err := ws.credentials(cfg)
	if err != nil {
		return nil, err
	}
	return EndpointModels(ctx, cfg, key, ws.log)
}

// watchedContext is a workspace's AGENTS.md set, reloaded on change.
// ready is closed once set is loaded; the other fields are set before.
type watchedContext struct {
	ready  chan struct{}
	set    *config.ContextSet
	cancel context.CancelFunc
	done   chan struct{}
	w      config.Watcher
}

func (ws *Workspaces) newAgent(ctx context.Context, spec host.AgentSpec) (*host.Built, error) {
	root, err := filepath.Abs(spec.Workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", spec.Workspace, err)
	}
	cfg, err := LoadConfig(ws.lookup, root, ws.flags, ws.log)
	if err != nil {
		return nil, err
	}
	key, err := ws.credentials(cfg)
	if err != nil {
		return nil, err
	}
	var contextSet *config.ContextSet
	if cfg.ContextFiles.Value {
		contextSet = ws.contextFor(cfg, root)
	}
	st, err := newWith(cfg, key, root, ws.log, contextSet, spec.Documents, spec.MCPServers)
	if err != nil {
		return nil, err
	}
	switch {
	case spec.Resolved.Name != "":
		st.model = spec.Resolved
	case spec.Model != "":
		m, err := modelResolver(cfg)(spec.Model)
		if err != nil {
			st.Close()
			return nil, err
		}
		st.model = m
	}
	if spec.Delegation != nil {
		st.Delegation = func(_ *session.Session, cfg *team.Config) { spec.Delegation(cfg) }
	}
	st.Editor = spec.Editor
	a, release, err := st.NewAgent(spec.Session, spec.Approver, spec.Rules, spec.Policy)
	if err != nil {
		st.Close()
		return nil, err
	}
	// The agent follows its workspace's AGENTS.md (the watched set calls
	// SetInstructions on reload) until the server closes the session.
	closeAgent := func() error {
		release()
		return st.Close()
	}
	return &host.Built{Agent: a, Policy: host.EffectiveToolPolicy(cfg, st.shellSelection), Close: closeAgent, Changes: st.changes, Extensions: st.ext,
		Prewarm: st.webSocket && cfg.Prewarm.Value}, nil
}

// contextFor returns the workspace's watched context set, loading it and
// starting the watcher on first use. New sessions see the current
// AGENTS.md. The files are read outside ws.mu, so a workspace whose
// files are slow to read delays only its own sessions.
func (ws *Workspaces) contextFor(cfg *config.Config, root string) *config.ContextSet {
	ws.mu.Lock()
	wc, ok := ws.contexts[root]
	if !ok {
		wc = &watchedContext{ready: make(chan struct{}), done: make(chan struct{})}
		ws.contexts[root] = wc
	}
	ws.mu.Unlock()
	if ok {
		<-wc.ready
		return wc.set
	}
	defer close(wc.ready)
	paths := config.ContextFilePaths(cfg.Home, root)
	set, err := config.NewContextSet(paths)
	if err != nil {
		ws.log.Warn(err.Error())
	}
	wc.set = set
	w, err := config.NewFSWatcher(config.WatchPaths(paths), contextDebounce)
	if err != nil {
		ws.log.Warn("context files will not reload when they change: " + err.Error())
		close(wc.done)
		return set
	}
	var wctx context.Context
	wctx, wc.cancel = context.WithCancel(context.Background())
	wc.w = w
	go func() {
		defer close(wc.done)
		set.Follow(wctx, w)
	}()
	return set
}

// Close stops the watchers of the workspaces' context files.
func (ws *Workspaces) Close() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, wc := range ws.contexts {
		<-wc.ready
		if wc.cancel != nil {
			wc.cancel()
			wc.w.Close()
		}
		<-wc.done
	}
}
