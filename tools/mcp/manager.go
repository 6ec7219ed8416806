// Package mcp runs executable extensions that speak the Model Context
// Protocol (MCP servers, over stdio or streamable HTTP) and registers their
// tools in a tools.Host as mcp__<server>__<tool>, through the official Go
// SDK (github.com/modelcontextprotocol/go-sdk).
//
// The package never decides whether a server may start: the caller passes
// each server's Blocked reason (configuration decides: only under
// unsafe_host, only when enabled), and a blocked server is listed but no
// process is started and no connection opened. The caller also holds
// every server while the session's own policy does not admit them
// (Options.Hold, Manager.Hold, Manager.Release): a held server is
// stopped, its tools withdrawn.
//
// A hostile workspace must not choose what a configured command runs. A
// stdio server without a configured cwd starts in Options.Dir, never in
// the workspace; its command is looked up on PATH without the entries
// that are relative or inside the workspace, and its PATH has them
// removed too; the server learns the workspace through MCP roots. Every tool classifies as
// tools.Extension whatever the server's annotations say (a readOnlyHint
// never lowers admission), is Sequential and ReplayUnsafe, so the broker
// admits it only under unsafe_host and crash recovery never re-runs it.
//
// A stdio server runs under internal/proc's guard, like a bash command: it
// dies with octet (even by SIGKILL), its stderr is drained into the log
// with a bound, and its environment is minimal. A server that crashes or
// disconnects is restarted with bounded exponential backoff; its tools stay
// registered meanwhile and answer with a tool error saying the server is
// down. Each tool's definition is pinned by digest when a server is first
// enabled (PinStore); a changed or new definition is withheld (not
// registered) and reported until the user re-enables it (Manager.Enable).
//
// Delivery contract of Options.OnChange: it is called, on a goroutine of
// the package, after every change of a server's state or tool set; calls
// may be coalesced, so a receiver reads Manager.List for the current
// state rather than trusting a count of calls.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/octet-agent/octet/tools"
)

// Spec is one configured server.
type Spec struct {
	Name string
	// Command (looked up on octet's PATH, without its workspace entries,
	// when it has no slash), Args, Env (added to the minimal environment)
	// and Cwd (default: Options.Dir) of a stdio server.
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string
	// URL, Headers and the bearer token of a streamable HTTP server.
	// BearerTokenEnv names where the token came from; when it is set and
	// BearerToken is empty the server fails to start, saying so.
	URL            string
	Headers        map[string]string
	BearerTokenEnv string
	BearerToken    string
	// StartupTimeout bounds starting, initializing and listing tools;
	// ToolTimeout bounds one call.
	StartupTimeout time.Duration
	ToolTimeout    time.Duration
	// Offered filters the server's tools by their own names
	// (enabled_tools / disabled_tools); nil offers every tool.
	Offered func(tool string) bool
	// Blocked says why the server must not start ("" starts it).
	Blocked string
	// FromClient: a client handed the server in (ACP mcpServers); no
	// [mcp_servers.NAME] table configures it.
	FromClient bool
	// Sandbox is the OS sandbox a stdio server runs in ("" or none: its
	// user's own access); SandboxPaths widen it as they widen bash's.
	Sandbox      tools.SandboxProfile
	SandboxPaths tools.SandboxConfig
}

// Options configure a Manager.
type Options struct {
	Servers []Spec
	// Host receives the tools of running servers (the final host the
	// agents advertise and execute from).
	Host *tools.Host
	// Allowed is the final allowlist for a model-visible name; nil allows
	// every name.
	Allowed func(name string) bool
	// Pins keeps the tool definition digests; nil pins in memory only.
	Pins *PinStore
	// Workspace is the session's workspace: told to servers as their MCP
	// root, and kept out of a stdio server's command lookup and PATH.
	Workspace string
	// Dir is a stdio server's working directory when its configuration
	// names none: a directory the workspace does not control (required
	// for a stdio server without Cwd; such a server fails to start
	// without it).
	Dir string
	// Hold, when set, holds every server from the start (Manager.Hold):
	// the session's policy is not known, or does not admit them.
	Hold   string
	Logger *slog.Logger
	// Redact replaces known secret values (the servers' tokens, header
	// values and secret-named environment values) in what the package
	// logs and lists: a server's stderr and its error messages; nil
	// redacts nothing.
	Redact func(string) string
	// OnChange is told about every change (see the package comment).
	OnChange func()
	// Backoff is the first restart delay (default 500ms), doubled per
	// consecutive failure up to MaxBackoff (default 30s).
	Backoff, MaxBackoff time.Duration
	// PingEvery is the liveness check period of a connected server
	// (default 5s).
	PingEvery time.Duration
}

// Server states in List.
const (
	StateDisabled = "disabled"   // not enabled, blocked by the launch policy or held by the session's: not running
	StateStarting = "starting"   // first start under way
	StateRunning  = "running"    // connected; its tools are registered
	StateDown     = "restarting" // crashed or disconnected; restarting after a backoff
	StateFailed   = "failed"     // gave up after repeated failures
	StateStopped  = "stopped"    // the manager was closed
)

// Tool states in List.
const (
	ToolActive   = "active"   // registered: the model can call it
	ToolChanged  = "changed"  // definition differs from the pinned one: withheld
	ToolNew      = "new"      // not pinned (appeared after the server was first enabled): withheld
	ToolExcluded = "excluded" // left out by enabled_tools/disabled_tools or the tools allowlist
	ToolInvalid  = "invalid"  // name or schema unusable: not registered
	// ToolUnavailable: the server failed for good; its tools were
	// withdrawn until it is re-enabled.
	ToolUnavailable = "unavailable"
)

// maxFailures is how many consecutive failed starts make a server
// "failed" (re-enable it with Manager.Enable to try again).
const maxFailures = 8

// Manager supervises the configured servers.
type Manager struct {
	opts    Options
	log     *slog.Logger
	servers []*server
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	// runMu serializes Hold, Release and Enable's restart; hold is the
	// current hold reason ("" when servers may run).
	runMu  sync.Mutex
	hold   string
	closed bool

	changeMu sync.Mutex
	changing bool
	again    bool
}

// Start starts every server that is not blocked (none while opts.Hold
// is set) and waits until each has either come up (its tools
// registered) or failed its first start; a failure is logged with its
// reason. Servers keep being supervised until Close. ctx bounds only
// this first wait.
func Start(ctx context.Context, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 500 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.PingEvery <= 0 {
		opts.PingEvery = pingEvery
	}
	if opts.Pins == nil {
		opts.Pins = NewMemoryPins()
	}
	if opts.Redact == nil {
		opts.Redact = func(s string) string { return s }
	}
	m := &Manager{opts: opts, log: opts.Logger, hold: opts.Hold}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	for _, sp := range opts.Servers {
		s := newServer(m, sp)
		if sp.Blocked == "" && opts.Hold != "" {
			s.state, s.reason = StateDisabled, opts.Hold
		}
		m.servers = append(m.servers, s)
	}
	if opts.Hold == "" {
		m.Release(ctx)
	}
	return m
}

// Hold stops every running server (a stdio server's whole process tree)
// and withdraws its tools, and keeps every server from starting until
// Release; reason (required) is listed as why. It returns once they
// are stopped.
func (m *Manager) Hold(reason string) {
	if reason == "" {
		reason = "held"
	}
	m.runMu.Lock()
	defer m.runMu.Unlock()
	m.hold = reason
	for _, s := range m.servers {
		if s.spec.Blocked == "" {
			s.hold(reason)
		}
	}
	m.changed()
}

// Release lets servers run again after Hold: every server that is not
// blocked, and not running, starts. It waits until each has come up or
// failed its first start, or ctx ends (an ended ctx returns at once,
// the servers starting in the background).
func (m *Manager) Release(ctx context.Context) {
	m.runMu.Lock()
	m.hold = ""
	var first sync.WaitGroup
	for _, s := range m.servers {
		if s.spec.Blocked != "" {
			continue
		}
		first.Add(1)
		if !s.start(first.Done) {
			first.Done()
		}
	}
	m.runMu.Unlock()
	m.changed()
	done := make(chan struct{})
	go func() { first.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Close stops every server (a stdio server's whole process tree) and
// removes their tools from the host.
func (m *Manager) Close() error {
	m.runMu.Lock()
	m.closed = true
	m.runMu.Unlock()
	m.cancel()
	m.wg.Wait()
	for _, s := range m.servers {
		s.mu.Lock()
		if s.state != StateDisabled {
			s.state, s.reason = StateStopped, ""
		}
		s.mu.Unlock()
		if m.opts.Host != nil {
			m.opts.Host.ReplaceGroup(s.prefix, nil)
		}
	}
	return nil
}

// changed tells OnChange, coalescing calls made while one is running.
func (m *Manager) changed() {
	if m.opts.OnChange == nil {
		return
	}
	m.changeMu.Lock()
	if m.changing {
		m.again = true
		m.changeMu.Unlock()
		return
	}
	m.changing = true
	m.changeMu.Unlock()
	go func() {
		for {
			m.opts.OnChange()
			m.changeMu.Lock()
			if !m.again {
				m.changing = false
				m.changeMu.Unlock()
				return
			}
			m.again = false
			m.changeMu.Unlock()
		}
	}()
}

// ErrUnknownServer is returned by Enable for a name no server has.
var ErrUnknownServer = errors.New("unknown MCP server")

// Enable re-enables withheld tools of the server name: the definitions it
// currently presents for the named tools (every withheld tool when names
// is empty) are pinned as they are and registered. A failed server is
// also started again. It returns the tools it pinned.
func (m *Manager) Enable(name string, names []string) ([]string, error) {
	i := slices.IndexFunc(m.servers, func(s *server) bool { return s.spec.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("%w %q", ErrUnknownServer, name)
	}
	s := m.servers[i]
	if s.spec.Blocked != "" {
		return nil, fmt.Errorf("MCP server %q is not started: %s", name, s.spec.Blocked)
	}
	m.runMu.Lock()
	defer m.runMu.Unlock()
	if m.hold != "" {
		return nil, fmt.Errorf("MCP server %q is not started: %s", name, m.hold)
	}
	pinned, err := s.repin(names)
	if err != nil {
		return nil, err
	}
	if s.restartFailed() {
		s.start(func() {})
	}
	m.changed()
	return pinned, nil
}

// List describes every configured server.
func (m *Manager) List() []ServerInfo {
	out := make([]ServerInfo, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s.info())
	}
	return out
}

// ServerInfo is one server in List (and octet/extensions/list).
type ServerInfo struct {
	Name      string     `json:"name"`
	Transport string     `json:"transport"` // "stdio" or "http"
	State     string     `json:"state"`
	Reason    string     `json:"reason,omitempty"` // why disabled, down or failed
	Restarts  int        `json:"restarts"`
	Tools     []ToolInfo `json:"tools"`
	Errors    []string   `json:"errors,omitempty"` // recent errors, newest last
}

// ToolInfo is one tool a server presents.
type ToolInfo struct {
	// Name is the model-visible name; Tool the server's own.
	Name   string `json:"name"`
	Tool   string `json:"tool"`
	State  string `json:"state"`
	Digest string `json:"digest"`
	// PinnedDigest is the pinned digest when it differs (State changed).
	PinnedDigest string `json:"pinnedDigest,omitempty"`
	Reason       string `json:"reason,omitempty"`
}
