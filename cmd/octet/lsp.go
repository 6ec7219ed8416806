package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/cmd/octet/internal/dialects"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

const lspUsage = "octet lsp [flags]   (speaks LSP + octet/* on stdin/stdout)"

// contextDebounce coalesces bursts of AGENTS.md writes.
const contextDebounce = 200 * time.Millisecond

func runLSP(ctx context.Context, args []string, e env) error {
	e, restore := editorStdio(e)
	defer restore()
	d, err := startDialect("lsp", lspUsage, args, e)
	if err != nil {
		return err
	}
	defer d.w.close()
	err = dialects.ServeLSP(ctx, e.stdin, e.stdout, d.options())
	switch {
	case errors.Is(err, dialects.ErrExitWithoutShutdown):
		return &exitError{code: exitFailed}
	case ctx.Err() != nil:
		return &exitError{code: exitCancelled}
	}
	return err
}

// dialect is what an editor protocol (octet lsp, octet acp) serves: the
// runtime over the workspaces' configuration and agents.
type dialect struct {
	rt  *host.Runtime
	w   *workspaces
	log *slog.Logger
	// startErr is a mistake in a configuration file found at startup: the
	// dialect serves anyway and reports it (fixing the file is enough).
	startErr error
}

// options are what the dialect is served with.
func (d *dialect) options() dialects.Options {
	return dialects.Options{Runtime: d.rt, Logger: d.log, Version: versionString(), ConfigError: d.startErr}
}

// startDialect parses the editor protocol command's flags and builds its
// runtime. The caller closes d.w.
func startDialect(name, usage string, args []string, e env) (*dialect, error) {
	var flags config.Flags
	fs := newFlagSet(name, usage, e.stdout)
	addPolicyFlags(fs, &flags)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageErrorf("%s takes no arguments: %s", name, usage)
	}
	// An editor that closes its end of stdout must not kill octet with
	// SIGPIPE before the runs are settled: the write fails instead, and the
	// server treats it as the client gone (runs cancelled, settled, exit).
	signal.Ignore(syscall.SIGPIPE)
	log := newLogger(e.stderr, e.lookup)
	w := &workspaces{e: e, flags: flags, log: log, contexts: map[string]*watchedContext{}}
	// Resolve what does not depend on the workspace now. A flag mistake
	// fails at startup; a mistake in a file (config.toml, credentials) does
	// not: the editor gets its handshake, the error (file:line) as a
	// message, and again from every request that needs the configuration,
	// which reads it anew (fixing the file is enough).
	startErr := w.loadGlobal()
	if _, ok := errors.AsType[*config.UsageError](startErr); ok {
		w.close()
		return nil, startErr
	}
	if startErr != nil {
		log.Error(startErr.Error())
	}
	home, origin, err := config.HomeOrigin(e.lookup)
	if err != nil {
		w.close()
		return nil, err
	}
	if origin == config.HomeFromAccount {
		log.Warn("HOME is not set: octet keeps its state in " + home + ", in the account's home directory (set OCTET_HOME to choose another)")
	} else {
		log.Info("octet's state directory", "dir", home, "from", origin)
	}
	rt := &host.Runtime{
		SessionsDir:  filepath.Join(home, "sessions"),
		NewAgent:     w.newAgent,
		ResolveModel: w.resolveModel,
		ExplainError: w.explain,
		Catalog:      w.catalog,
		ListModels:   w.listModels,
		Authenticate: w.authenticate,
	}
	return &dialect{rt: rt, w: w, log: log, startErr: startErr}, nil
}

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

// workspaces builds agents for the server, one configuration per
// workspace (its project .octet/config.toml may tighten the profile) and
// one watched set of context files per workspace.
type workspaces struct {
	e     env
	flags config.Flags
	log   *slog.Logger

	mu sync.Mutex
	// global is the last configuration that loaded; keys are the
	// credentials read for each key source a configuration's provider
	// named (an error: missing, an unsafe or broken credentials file;
	// every session creation reports it), each read once.
	global   *config.Config
	keys     map[keySource]loadedKey
	contexts map[string]*watchedContext
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

// loadGlobal loads the configuration without a workspace and, the first
// time it loads, the credentials. It returns the first problem.
func (ws *workspaces) loadGlobal() error {
	cfg, err := loadConfig(ws.e, "", ws.flags, ws.log)
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
func (ws *workspaces) credentials(cfg *config.Config) (config.Secret, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.global = cfg
	p := cfg.Provider()
	src := keySource{envKey: p.EnvKey, entry: p.Credentials, loopback: provider.IsLoopbackURL(p.BaseURL)}
	k, ok := ws.keys[src]
	if !ok || errors.Is(k.err, host.ErrAuthRequired) {
		k.key, k.err = loadAPIKey(ws.e, cfg)
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
func (ws *workspaces) authenticate(context.Context) error {
	cfg, err := loadConfig(ws.e, "", ws.flags, ws.log)
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
func (ws *workspaces) current() *config.Config {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.global
}

// explain is Runtime.ExplainError over the current configuration.
func (ws *workspaces) explain(err error) string {
	cfg := ws.current()
	if cfg == nil {
		return ""
	}
	return providerHint(err, cfg)
}

// resolveModel is Runtime.ResolveModel: the model table plus the
// configured and declared models.
func (ws *workspaces) resolveModel(name string) (provider.Model, error) {
	cfg := ws.current()
	if cfg == nil {
		c := config.Defaults()
		cfg = &c
	}
	return modelResolver(cfg)(name)
}

// catalog is Runtime.Catalog: the catalog of the current configuration.
func (ws *workspaces) catalog() host.Catalog {
	cfg := ws.current()
	if cfg == nil {
		return host.DefaultCatalog()
	}
	return host.CatalogFor(cfg)
}

// listModels is Runtime.ListModels: the model list of the current
// configuration's endpoint.
func (ws *workspaces) listModels(ctx context.Context) ([]string, error) {
	cfg := ws.current()
	if cfg == nil {
		return nil, errors.New("no configuration has loaded")
	}
	key, err := ws.credentials(cfg)
	if err != nil {
		return nil, err
	}
	return endpointModels(ctx, cfg, key, ws.log)
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

func (ws *workspaces) newAgent(ctx context.Context, spec host.AgentSpec) (*host.Built, error) {
	root, err := filepath.Abs(spec.Workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", spec.Workspace, err)
	}
	cfg, err := loadConfig(ws.e, root, ws.flags, ws.log)
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
	st, err := newStackWith(cfg, key, root, ws.log, contextSet, spec.Documents, spec.MCPServers)
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
		st.delegation = func(_ *session.Session, cfg *team.Config) { spec.Delegation(cfg) }
	}
	st.editor = spec.Editor
	a, release, err := st.newAgent(spec.Session, spec.Approver, spec.Rules, spec.Policy)
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
	return &host.Built{Agent: a, Policy: host.EffectiveToolPolicy(cfg, st.shellSelection), Close: closeAgent, Changes: st.changes, Extensions: st.ext}, nil
}

// contextFor returns the workspace's watched context set, loading it and
// starting the watcher on first use. New sessions see the current
// AGENTS.md. The files are read outside ws.mu, so a workspace whose
// files are slow to read delays only its own sessions.
func (ws *workspaces) contextFor(cfg *config.Config, root string) *config.ContextSet {
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

func (ws *workspaces) close() {
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
