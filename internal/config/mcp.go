package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/octet-agent/octet/internal/sandbox"
)

// Limits and defaults of [mcp_servers.NAME].
const (
	DefaultMCPStartupTimeout = 10 * time.Second
	MaxMCPStartupTimeout     = 5 * time.Minute
	DefaultMCPToolTimeout    = 60 * time.Second
	MaxMCPToolTimeout        = time.Hour
	// MaxMCPServers bounds how many servers one config may define.
	MaxMCPServers = 32
	// MCPToolPrefix starts every MCP tool name: mcp__<server>__<tool>.
	MCPToolPrefix = "mcp__"
)

// mcpServerName is a server's name: letters, digits and '-', with single
// '_' between them, so "__" in mcp__<server>__<tool> always separates.
var mcpServerName = regexp.MustCompile(`^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$`)

// envVarName is a portable environment variable name.
// ValidMCPServerName reports whether name can name an MCP server (its
// tools are mcp__<name>__<tool>): letters, digits and dashes, single
// underscores between them.
func ValidMCPServerName(name string) bool { return mcpServerName.MatchString(name) }

var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MCPServer is one resolved [mcp_servers.NAME] table: an executable
// extension speaking the Model Context Protocol, over stdio (Command) or
// streamable HTTP (URL). It never starts unless Enabled is true and the
// launch policy allows it (MCPStartBlocked).
type MCPServer struct {
	Name string
	// Command, Args, Env and Cwd describe a stdio server. Command is
	// looked up on PATH when it has no slash.
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string
	// URL, Headers and BearerTokenEnv describe a streamable HTTP server;
	// the bearer token is read from the environment variable named
	// BearerTokenEnv (never from a file octet writes).
	URL            string
	Headers        map[string]string
	BearerTokenEnv string
	// BearerToken is the value of BearerTokenEnv at load time.
	BearerToken Secret

	// Enabled is false by default; only the global config turns it on.
	Enabled        Setting[bool]
	StartupTimeout time.Duration
	ToolTimeout    time.Duration
	// EnabledTools, when non-nil, is the only server tools offered (the
	// names the server uses, without the mcp__ prefix); DisabledTools are
	// never offered.
	EnabledTools  []string
	DisabledTools []string
	// Sandbox is the OS sandbox a stdio server runs in: none by default
	// (a server needs its own access), read-only or workspace-write (no
	// network) when the global config says so; a project may tighten it.
	Sandbox Setting[string]
}

// ToolOffered reports whether the server's tool named tool passes the
// server's enabled_tools / disabled_tools lists.
func (s *MCPServer) ToolOffered(tool string) bool {
	if slices.Contains(s.DisabledTools, tool) {
		return false
	}
	return s.EnabledTools == nil || slices.Contains(s.EnabledTools, tool)
}

// MCPToolName is the model-visible name of a server's tool.
func MCPToolName(server, tool string) string { return MCPToolPrefix + server + "__" + tool }

// isMCPToolName reports whether n has the shape mcp__<server>__<tool>.
func isMCPToolName(n string) bool {
	_, _, ok := SplitMCPToolName(n)
	return ok
}

// SplitMCPToolName splits a name of the shape mcp__<server>__<tool>; ok
// is false for any other name.
func SplitMCPToolName(n string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(n, MCPToolPrefix)
	if !ok {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "__")
	if !ok || !mcpServerName.MatchString(server) || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// mcpFile is one [mcp_servers.NAME] table as written. Nil fields were
// not set.
type mcpFile struct {
	Command            *string           `toml:"command"`
	Args               *[]string         `toml:"args"`
	Env                map[string]string `toml:"env"`
	Cwd                *string           `toml:"cwd"`
	URL                *string           `toml:"url"`
	Headers            map[string]string `toml:"headers"`
	BearerTokenEnv     *string           `toml:"bearer_token_env_var"`
	Enabled            *bool             `toml:"enabled"`
	StartupTimeoutSecs *int64            `toml:"startup_timeout_secs"`
	ToolTimeoutSecs    *int64            `toml:"tool_timeout_secs"`
	EnabledTools       *[]string         `toml:"enabled_tools"`
	DisabledTools      *[]string         `toml:"disabled_tools"`
	Sandbox            *string           `toml:"sandbox"`
}

var mcpKeys = []string{
	"command", "args", "env", "cwd", "url", "headers", "bearer_token_env_var",
	"enabled", "startup_timeout_secs", "tool_timeout_secs", "enabled_tools", "disabled_tools", "sandbox",
}

// validateMCP checks every [mcp_servers.NAME] table.
func (fc *fileConfig) validateMCP() error {
	if len(fc.MCPServers) > MaxMCPServers {
		return fc.errAt("mcp_servers", "%d servers; at most %d", len(fc.MCPServers), MaxMCPServers)
	}
	var errs []error
	for _, name := range sortedKeys(fc.MCPServers) {
		m := fc.MCPServers[name]
		bad := func(format string, args ...any) {
			errs = append(errs, fc.errAt("mcp_servers", "[mcp_servers.%s]: %s", name, fmt.Sprintf(format, args...)))
		}
		if !mcpServerName.MatchString(name) || len(name) > 32 {
			bad("a server name is 1-32 letters, digits and '-', with single '_' between them")
			continue
		}
		stdio := m.Command != nil || m.Args != nil || m.Env != nil || m.Cwd != nil
		http := m.URL != nil || m.Headers != nil || m.BearerTokenEnv != nil
		switch {
		case stdio && http:
			bad("set either command (stdio) or url (streamable HTTP), not both")
		case m.Command != nil && strings.TrimSpace(*m.Command) == "":
			bad("command must not be empty")
		case m.URL != nil && validateBaseURL(*m.URL) != nil:
			bad("url must start with http:// or https://")
		case m.Cwd != nil && !filepath.IsAbs(*m.Cwd):
			bad("cwd must be an absolute path")
		case m.BearerTokenEnv != nil && !envVarName.MatchString(*m.BearerTokenEnv):
			bad("bearer_token_env_var must name an environment variable")
		}
		if http && m.URL == nil {
			bad("a streamable HTTP server needs url")
		}
		for k := range m.Env {
			if !envVarName.MatchString(k) {
				bad("env: %q is not an environment variable name", k)
			}
		}
		if m.StartupTimeoutSecs != nil && (*m.StartupTimeoutSecs < 1 || time.Duration(*m.StartupTimeoutSecs)*time.Second > MaxMCPStartupTimeout) {
			bad("startup_timeout_secs %d is out of range 1..%d", *m.StartupTimeoutSecs, int(MaxMCPStartupTimeout.Seconds()))
		}
		if m.Sandbox != nil {
			if _, err := sandbox.ParseProfile(*m.Sandbox); err != nil {
				bad("%v", err)
			}
		}
		if m.ToolTimeoutSecs != nil && (*m.ToolTimeoutSecs < 1 || time.Duration(*m.ToolTimeoutSecs)*time.Second > MaxMCPToolTimeout) {
			bad("tool_timeout_secs %d is out of range 1..%d", *m.ToolTimeoutSecs, int(MaxMCPToolTimeout.Seconds()))
		}
	}
	return errors.Join(errs...)
}

// mcpDefinesServer reports whether m says how to run a server (a project
// config may not).
func (m mcpFile) definesServer() bool {
	return m.Command != nil || m.Args != nil || m.Env != nil || m.Cwd != nil ||
		m.URL != nil || m.Headers != nil || m.BearerTokenEnv != nil ||
		m.StartupTimeoutSecs != nil || m.ToolTimeoutSecs != nil
}

// applyMCP replaces c's servers with the global config's, resolving
// bearer tokens through lookup. A server that says neither how to start
// it (command) nor where it is (url) is an error here, in the global
// config; a project's tables only tighten existing servers.
func (fc *fileConfig) applyMCP(c *Config, lookup func(string) (string, bool)) error {
	if fc.MCPServers == nil {
		return nil
	}
	c.MCPServers = nil
	var errs []error
	for _, name := range sortedKeys(fc.MCPServers) {
		m := fc.MCPServers[name]
		if m.Command == nil && m.URL == nil {
			errs = append(errs, fc.errAt("mcp_servers", "[mcp_servers.%s]: a stdio server needs command, a streamable HTTP server url", name))
			continue
		}
		s := MCPServer{
			Name: name, Env: m.Env, Headers: m.Headers,
			StartupTimeout: DefaultMCPStartupTimeout, ToolTimeout: DefaultMCPToolTimeout,
		}
		set(&s.Enabled, false, SourceDefault)
		set(&s.Sandbox, string(sandbox.None), SourceDefault)
		if m.Sandbox != nil {
			set(&s.Sandbox, *m.Sandbox, SourceConfig)
		}
		if m.Command != nil {
			s.Command = *m.Command
		}
		if m.Args != nil {
			s.Args = slices.Clone(*m.Args)
		}
		if m.Cwd != nil {
			s.Cwd = *m.Cwd
		}
		if m.URL != nil {
			s.URL = *m.URL
		}
		if m.BearerTokenEnv != nil {
			s.BearerTokenEnv = *m.BearerTokenEnv
			if v, ok := lookup(s.BearerTokenEnv); ok {
				s.BearerToken = NewSecret(v)
			}
		}
		if m.Enabled != nil {
			set(&s.Enabled, *m.Enabled, SourceConfig)
		}
		if m.StartupTimeoutSecs != nil {
			s.StartupTimeout = time.Duration(*m.StartupTimeoutSecs) * time.Second
		}
		if m.ToolTimeoutSecs != nil {
			s.ToolTimeout = time.Duration(*m.ToolTimeoutSecs) * time.Second
		}
		if m.EnabledTools != nil {
			s.EnabledTools = slices.Clone(*m.EnabledTools)
		}
		if m.DisabledTools != nil {
			s.DisabledTools = slices.Clone(*m.DisabledTools)
		}
		c.MCPServers = append(c.MCPServers, s)
	}
	return errors.Join(errs...)
}

// tightenMCP applies a project's [mcp_servers.NAME] tables: a project may
// disable a server (enabled = false), disable tools (disabled_tools),
// narrow enabled_tools or tighten its sandbox; it may never add a server, enable one, or say how
// one runs. Anything else is ignored with a warning.
func (fc *fileConfig) tightenMCP(c *Config, warn func(key, format string, args ...any)) {
	for _, name := range sortedKeys(fc.MCPServers) {
		m := fc.MCPServers[name]
		i := slices.IndexFunc(c.MCPServers, func(s MCPServer) bool { return s.Name == name })
		if i < 0 {
			warn("mcp_servers."+name, "a project may not add MCP server %q (only the global config defines servers)", name)
			continue
		}
		s := &c.MCPServers[i]
		if m.definesServer() {
			warn("mcp_servers."+name, "a project may not say how MCP server %q runs (command, url, env, timeouts: global config only)", name)
		}
		if m.Sandbox != nil {
			cur, _ := sandbox.ParseProfile(s.Sandbox.Value)
			switch p, _ := sandbox.ParseProfile(*m.Sandbox); {
			case p == cur:
			case p.NoLooserThan(cur):
				set(&s.Sandbox, string(p), SourceProjectConfig)
			default:
				warn("mcp_servers", "a project may only tighten MCP server %q's sandbox (%s from %s)", name, cur, s.Sandbox.Source)
			}
		}
		if m.Enabled != nil {
			switch {
			case !*m.Enabled && s.Enabled.Value:
				set(&s.Enabled, false, SourceProjectConfig)
			case *m.Enabled && !s.Enabled.Value:
				warn("mcp_servers."+name, "a project may not enable MCP server %q (disabled from %s)", name, s.Enabled.Source)
			}
		}
		if m.DisabledTools != nil {
			for _, t := range *m.DisabledTools {
				if !slices.Contains(s.DisabledTools, t) {
					s.DisabledTools = append(s.DisabledTools, t)
				}
			}
		}
		if m.EnabledTools != nil {
			var kept, extra []string
			for _, t := range *m.EnabledTools {
				if s.EnabledTools == nil || slices.Contains(s.EnabledTools, t) {
					kept = append(kept, t)
				} else {
					extra = append(extra, t)
				}
			}
			if len(extra) > 0 {
				warn("mcp_servers."+name, "a project may not enable tools %s of MCP server %q", strings.Join(extra, ", "), name)
			}
			if kept == nil {
				kept = []string{}
			}
			s.EnabledTools = kept
		}
	}
}

// MCPStartBlocked says why no MCP server may start at all in this launch,
// or "" when servers that are enabled may: they start only under
// unsafe_host, never under controlled, controlled_bash_approval or
// --safe-mode (a broker check at call time cannot contain a process that
// already runs), and never with --offline, which skips their discovery
// entirely (see MCPDiscovered).
func (c *Config) MCPStartBlocked() string {
	switch {
	case c.Offline.Value:
		return "--offline skips MCP server discovery and startup"
	case c.SafeMode:
		return "--safe-mode: MCP servers start only under effect_policy unsafe_host"
	case c.EffectPolicy.Value != UnsafeHost:
		return fmt.Sprintf("effect_policy %s (from %s): MCP servers start only under unsafe_host", c.EffectPolicy.Value, c.EffectPolicy.Source)
	}
	return ""
}

// MCPDiscovered returns the servers to list: none under --offline, every
// configured one otherwise.
func (c *Config) MCPDiscovered() []MCPServer {
	if c.Offline.Value {
		return nil
	}
	return c.MCPServers
}

// MCPServerBlocked says why server s does not start, or "" when it
// starts: disabled, the launch policy forbids every server, or a tools
// allowlist names none of its tools.
func (c *Config) MCPServerBlocked(s *MCPServer) string {
	if !s.Enabled.Value {
		return fmt.Sprintf("disabled (enabled = false from %s); set enabled = true in %s", s.Enabled.Source, filepath.Join(c.Home, "config.toml"))
	}
	if why := c.MCPStartBlocked(); why != "" {
		return why
	}
	return c.MCPAllowlistBlocked(s.Name)
}

// MCPAllowlistBlocked says why the server name must not start because of
// the tools allowlist (it names none of its tools), or "".
func (c *Config) MCPAllowlistBlocked(name string) string {
	prefix := MCPToolName(name, "")
	if c.Tools.Source != SourceDefault && !slices.ContainsFunc(c.Tools.Value, func(n string) bool { return strings.HasPrefix(n, prefix) }) {
		return fmt.Sprintf("the tools allowlist (from %s) names none of its tools (%s<tool>)", c.Tools.Source, prefix)
	}
	return ""
}

// MCPToolAllowed reports whether the final tool allowlist admits the MCP
// tool name (mcp__<server>__<tool>): every tool of a started server when
// no tools list was given, otherwise only the names it lists.
func (c *Config) MCPToolAllowed(name string) bool {
	if c.Tools.Source == SourceDefault {
		return true
	}
	return slices.Contains(c.Tools.Value, name)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
