package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/tools"
	"github.com/octet-agent/octet/tools/mcp"
)

// extensions are a stack's MCP servers: started into the stack's host
// when the launch policy allows and while the session's own policy does
// (follow), listed and re-enabled through host.Extensions, and stopped
// with the stack.
type extensions struct {
	m       *mcp.Manager
	offline bool

	// tmp is a temporary directory the servers run in, removed at Close
	// ("" when they run in $OCTET_HOME/mcp).
	tmp string

	// runMu serializes apply; applied and held are the last state it set.
	runMu   sync.Mutex
	applied bool
	held    bool

	mu   sync.Mutex
	subs map[int]func()
	next int
}

var _ host.Extensions = (*extensions)(nil)

// mcpSpecs turns the configured servers into the manager's specs, each
// with the reason it must not start (configuration decides).
func mcpSpecs(cfg *config.Config) []mcp.Spec {
	var out []mcp.Spec
	for _, s := range cfg.MCPDiscovered() {
		out = append(out, mcp.Spec{
			Name: s.Name, Command: s.Command, Args: s.Args, Env: s.Env, Cwd: s.Cwd,
			URL: s.URL, Headers: s.Headers, BearerTokenEnv: s.BearerTokenEnv, BearerToken: s.BearerToken.Reveal(),
			StartupTimeout: s.StartupTimeout, ToolTimeout: s.ToolTimeout,
			Offered: s.ToolOffered, Blocked: cfg.MCPServerBlocked(&s),
			Sandbox:      tools.SandboxProfile(s.Sandbox.Value),
			SandboxPaths: host.SandboxPaths(cfg),
		})
	}
	return out
}

// clientSpecs turns the MCP servers a client handed in into the
// manager's specs under the rules of configured ones: none under
// --offline; each blocked by the launch policy as configured ones are,
// and by a tools allowlist naming none of its tools. A name that is
// invalid or taken by a configured server is left out, logged.
func clientSpecs(cfg *config.Config, client []host.MCPServer, log *slog.Logger) []mcp.Spec {
	if cfg.Offline.Value {
		return nil
	}
	var out []mcp.Spec
	for _, c := range client {
		if !config.ValidMCPServerName(c.Name) || slices.ContainsFunc(cfg.MCPServers, func(s config.MCPServer) bool { return s.Name == c.Name }) ||
			slices.ContainsFunc(out, func(s mcp.Spec) bool { return s.Name == c.Name }) {
			log.Warn(fmt.Sprintf("MCP server %q from the client not started: its name is invalid or already used (letters, digits, dashes and single underscores)", c.Name))
			continue
		}
		blocked := cfg.MCPStartBlocked()
		if blocked == "" {
			blocked = cfg.MCPAllowlistBlocked(c.Name)
		}
		out = append(out, mcp.Spec{
			Name: c.Name, Command: c.Command, Args: c.Args, Env: c.Env,
			URL: c.URL, Headers: c.Headers, Blocked: blocked, FromClient: true,
			StartupTimeout: config.DefaultMCPStartupTimeout, ToolTimeout: config.DefaultMCPToolTimeout,
		})
	}
	return out
}

// startExtensions starts the configured MCP servers that may start, and
// those the client handed in, registering their tools in host, and logs
// why the others do not. redact keeps the servers' secrets out of what
// is logged of them.
func startExtensions(cfg *config.Config, host *tools.Host, workspace string, log *slog.Logger, client []host.MCPServer, redact func(string) string) *extensions {
	x := &extensions{offline: cfg.Offline.Value, subs: map[int]func(){}}
	if cfg.Offline.Value && len(cfg.MCPServers)+len(client) > 0 {
		log.Info("MCP servers not discovered", "reason", cfg.MCPStartBlocked())
	}
	specs := mcpSpecs(cfg)
	for i, sp := range specs {
		switch {
		case sp.Blocked == "":
		case cfg.MCPServers[i].Enabled.Value:
			log.Warn(fmt.Sprintf("MCP server %s not started: %s", sp.Name, sp.Blocked))
		default:
			log.Info("MCP server not started", "server", sp.Name, "reason", sp.Blocked)
		}
	}
	for _, sp := range clientSpecs(cfg, client, log) {
		if sp.Blocked != "" {
			log.Warn(fmt.Sprintf("MCP server %s from the client not started: %s", sp.Name, sp.Blocked))
		}
		specs = append(specs, sp)
	}
	dir, temp := serverDir(cfg.Home, workspace, log)
	if temp {
		x.tmp = dir
	}
	x.m = mcp.Start(context.Background(), mcp.Options{
		Servers: specs, Host: host, Allowed: cfg.MCPToolAllowed, Pins: mcp.OpenPins(cfg.Home),
		Workspace: workspace, Dir: dir, Logger: log, OnChange: x.changed, Redact: redact,
		Hold: "waiting for the session's effect policy",
	})
	return x
}

// serverDir is where stdio MCP servers without a configured cwd run: an
// empty directory of octet's own ($OCTET_HOME/mcp, mode 0700), never the
// workspace, so what the workspace holds (a module named like the
// server's, a node_modules/.bin) is not what a configured command finds.
// When $OCTET_HOME is inside the workspace, or cannot hold it, a private
// temporary directory (temp is true); "" when there is none (such
// servers then fail to start, saying so).
func serverDir(home, workspace string, log *slog.Logger) (dir string, temp bool) {
	dir = filepath.Join(home, "mcp")
	if !within(dir, workspace) {
		err := os.MkdirAll(dir, 0o700)
		if err == nil {
			return dir, false
		}
		log.Warn(fmt.Sprintf("MCP servers: no directory under OCTET_HOME to run in (%v); using a temporary one", err))
	}
	tmp, err := os.MkdirTemp("", "octet-mcp-")
	if err != nil {
		log.Warn(fmt.Sprintf("MCP servers: no directory to run in (%v); stdio servers without cwd will not start", err))
		return "", false
	}
	return tmp, true
}

// within reports whether p is root or inside it (both absolute, links
// in root resolved when they can be).
func within(p, root string) bool {
	if root == "" {
		return false
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		if q, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			p = filepath.Join(q, filepath.Base(p))
		}
		root = r
	}
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// follow runs the servers while b's policy admits executable extensions
// (unsafe_host) and holds them otherwise, now and at every change of
// the policy, until the returned stop: the session's servers follow its
// own policy, not the one octet was launched with. The first start is
// waited for (the session's first request sees their tools); a later
// one is not.
func (x *extensions) follow(b *tools.Broker) (stop func()) {
	x.apply(context.Background(), b.Policy())
	later, cancel := context.WithCancel(context.Background())
	cancel()
	return b.OnPolicyChange(func(p tools.Policy) { x.apply(later, p) })
}

// apply holds or releases the servers for policy p.
func (x *extensions) apply(ctx context.Context, p tools.Policy) {
	x.runMu.Lock()
	defer x.runMu.Unlock()
	held := p != tools.UnsafeHost
	if x.applied && held == x.held {
		return
	}
	x.applied, x.held = true, held
	if held {
		x.m.Hold(fmt.Sprintf("effect policy %s (this session): MCP servers run only under unsafe_host", p))
		return
	}
	x.m.Release(ctx)
}

// clientSecrets are the client-supplied servers' credentials (their
// header, environment and URL query values named like one), for the
// redactor: a server echoing them does not hand them to the model.
func clientSecrets(client []host.MCPServer) []string {
	var out []string
	for _, c := range client {
		out = append(out, serverSecrets(c.URL, c.Headers, c.Env)...)
	}
	return out
}

// configuredSecrets are the configured servers' bearer tokens, header
// values and secret-named environment values, for the redactor, as
// clientSecrets are the client-supplied servers'.
func configuredSecrets(cfg *config.Config) []string {
	var out []string
	for _, s := range cfg.MCPServers {
		if !s.BearerToken.IsZero() {
			out = append(out, s.BearerToken.Reveal())
		}
		out = append(out, serverSecrets(s.URL, s.Headers, s.Env)...)
	}
	return out
}

// serverSecrets are one server's values named like a credential: its
// headers' (with the credential of a "Scheme credential" value on its
// own), its environment's and its URL query's, and its URL's password.
// Other values are not: the redactor rewrites every tool's output, and
// an Accept: application/json header would rewrite every file that says
// application/json.
func serverSecrets(rawURL string, headers, env map[string]string) []string {
	var out []string
	for k, v := range headers {
		if !secretHeader(k) {
			continue
		}
		out = append(out, v)
		if _, cred, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
			out = append(out, strings.TrimSpace(cred))
		}
	}
	for k, v := range env {
		if secretName(k) {
			out = append(out, v)
		}
	}
	if u, err := url.Parse(rawURL); err == nil && rawURL != "" {
		if p, ok := u.User.Password(); ok {
			out = append(out, p, url.QueryEscape(p))
		}
		for k, vs := range u.Query() {
			if secretName(k) {
				for _, v := range vs {
					out = append(out, v, url.QueryEscape(v))
				}
			}
		}
	}
	return out
}

// secretHeader reports whether an HTTP header carries a credential
// (Authorization, Proxy-Authorization, Cookie, X-Auth-…, or named like a
// secret).
func secretHeader(name string) bool {
	l := strings.ToLower(name)
	return strings.Contains(l, "auth") || strings.Contains(l, "cookie") || secretName(name)
}

// secretName reports whether a variable or parameter is named like a
// secret (…TOKEN, …KEY, …SECRET, …PASSWORD, any case).
func secretName(name string) bool {
	u := strings.ToUpper(name)
	return strings.Contains(u, "TOKEN") || strings.Contains(u, "KEY") || strings.Contains(u, "SECRET") || strings.Contains(u, "PASSWORD")
}

// List implements host.Extensions.
func (x *extensions) List() any {
	return struct {
		Offline bool             `json:"offline"`
		Servers []mcp.ServerInfo `json:"servers"`
	}{x.offline, x.m.List()}
}

// Enable implements host.Extensions.
func (x *extensions) Enable(name string, tools []string) (any, error) {
	pinned, err := x.m.Enable(name, tools)
	if err != nil {
		return nil, err
	}
	if pinned == nil {
		pinned = []string{}
	}
	return struct {
		Server string   `json:"server"`
		Pinned []string `json:"pinned"`
	}{name, pinned}, nil
}

// Subscribe implements host.Extensions.
func (x *extensions) Subscribe(f func()) func() {
	x.mu.Lock()
	defer x.mu.Unlock()
	id := x.next
	x.next++
	x.subs[id] = f
	return func() {
		x.mu.Lock()
		delete(x.subs, id)
		x.mu.Unlock()
	}
}

func (x *extensions) changed() {
	x.mu.Lock()
	fs := make([]func(), 0, len(x.subs))
	for _, f := range x.subs {
		fs = append(fs, f)
	}
	x.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// Close stops the servers; no change is announced after it.
func (x *extensions) Close() error {
	x.mu.Lock()
	clear(x.subs)
	x.mu.Unlock()
	err := x.m.Close()
	if x.tmp != "" {
		err = errors.Join(err, os.RemoveAll(x.tmp))
	}
	return err
}
