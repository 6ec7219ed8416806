package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/server"
)

const lspUsage = "octet lsp [flags]   (speaks LSP + octet/* on stdin/stdout)"

// contextDebounce coalesces bursts of AGENTS.md writes.
const contextDebounce = 200 * time.Millisecond

func runLSP(ctx context.Context, args []string, e env) error {
	var flags config.Flags
	fs := newFlagSet("lsp", lspUsage, e.stderr)
	addPolicyFlags(fs, &flags)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("lsp takes no arguments: %s", lspUsage)
	}
	log := newLogger(e.stderr, e.lookup)
	// Resolve everything that does not depend on the workspace now, so a
	// bad flag, config line or credential fails at startup with a clear
	// message instead of at the first octet/session/new.
	cfg, err := loadConfig(e, "", flags, log)
	if err != nil {
		return err
	}
	key, keyErr := loadAPIKey(e, cfg)
	if keyErr != nil {
		if !isCredentialError(keyErr) {
			return keyErr
		}
		// Serve anyway: the editor gets its handshake and a clear error
		// from octet/session/new, instead of a server that died at start
		// with the reason only in its stderr log.
		log.Error(keyErr.Error())
	}
	w := &workspaces{e: e, flags: flags, key: key, keyErr: keyErr, log: log, contexts: map[string]*watchedContext{}}
	defer w.close()
	rt := &server.Runtime{
		SessionsDir:  cfg.SessionsDir(),
		NewAgent:     w.newAgent,
		ResolveModel: resolveModel,
		ExplainError: func(err error) string { return providerHint(err, cfg.BaseURL.Value, cfg.Model.Value) },
	}
	err = server.Serve(ctx, interruptibleStdin(e.stdin), e.stdout, server.Options{Runtime: rt, Logger: log, Version: versionString()})
	switch {
	case errors.Is(err, server.ErrExitWithoutShutdown):
		return &exitError{code: exitFailed}
	case ctx.Err() != nil:
		return &exitError{code: exitCancelled}
	}
	return err
}

// isCredentialError reports whether err is a missing key or an unsafe
// credentials file (errors octet lsp reports per request, not at start).
func isCredentialError(err error) bool {
	if _, ok := errors.AsType[*config.MissingKeyError](err); ok {
		return true
	}
	_, ok := errors.AsType[*config.ModeError](err)
	return ok
}

// modelResolver maps a model name (octet/setModel, octet/session/new) to
// the provider's model table. The configured model is allowed whatever its
// name (with a conservative 128K window when the table does not know it);
// any other unknown name is refused with the list of known ones, at the
// call rather than at the run's first provider request.
func modelResolver(configured string) func(string) (provider.Model, error) {
	return func(name string) (provider.Model, error) {
		if name == "" {
			return provider.Model{}, errors.New("empty model name")
		}
		if m, ok := provider.LookupModel(name); ok {
			return m, nil
		}
		if name != configured {
			var extra []string
			if configured != "" {
				extra = append(extra, configured+" (configured)")
			}
			return provider.Model{}, server.UnknownModelError(name, extra...)
		}
		return provider.Model{Name: name, ContextWindow: 128_000, MaxOutputTokens: 16_384}, nil
	}
}

// workspaces builds agents for the server, one configuration per
// workspace (its project .octet/config.toml may tighten the profile) and
// one watched set of context files per workspace.
type workspaces struct {
	e     env
	flags config.Flags
	key   config.Secret
	// keyErr is why there is no usable key (missing, or an unsafe
	// credentials file); every session creation reports it.
	keyErr error
	log    *slog.Logger

	mu       sync.Mutex
	contexts map[string]*watchedContext
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

func (ws *workspaces) newAgent(ctx context.Context, spec server.AgentSpec) (*server.Built, error) {
	if ws.keyErr != nil {
		return nil, ws.keyErr
	}
	root, err := filepath.Abs(spec.Workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", spec.Workspace, err)
	}
	cfg, err := loadConfig(ws.e, root, ws.flags, ws.log)
	if err != nil {
		return nil, err
	}
	var contextSet *config.ContextSet
	if cfg.ContextFiles.Value {
		contextSet = ws.contextFor(cfg, root)
	}
	st, err := newStackWith(cfg, ws.key, root, ws.log, contextSet)
	if err != nil {
		return nil, err
	}
	if spec.Model != "" {
		m, err := resolveModel(spec.Model)
		if err != nil {
			st.Close()
			return nil, err
		}
		st.model = m
	}
	a, release, err := st.newAgent(spec.Session, spec.Approver)
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
	return &server.Built{Agent: a, Policy: cfg.EffectiveToolPolicy(st.shellSelection), Close: closeAgent}, nil
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
		ws.log.Warn("context files", "err", err)
	}
	wc.set = set
	w, err := config.NewFSWatcher(config.WatchPaths(paths), contextDebounce)
	if err != nil {
		ws.log.Warn("context files will not reload on change", "err", err)
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
