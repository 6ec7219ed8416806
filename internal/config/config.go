// Package config resolves octet's effective configuration for one workspace:
// built-in defaults, the global $OCTET_HOME/config.toml, environment
// variables, command-line flags and, last, the project .octet/config.toml
// files from the repository root down to the workspace (ProjectDirs), which
// may tighten but never relax the authority profile. Every resolved setting
// remembers where its value came from (default, config, project_config, env
// or flag) so the EffectiveToolPolicy snapshot can show it.
//
// It also loads credentials (OPENAI_API_KEY or an owner-private credentials
// file) and context files (AGENTS.md), and watches the latter for changes.
// The package never writes to stdout; warnings are returned to the caller.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/octet-agent/octet/internal/osfile"
	"github.com/octet-agent/octet/internal/price"
)

// Source names where a setting's value came from.
type Source string

// The sources, from weakest to strongest (a project config only tightens).
const (
	SourceDefault       Source = "default"
	SourceConfig        Source = "config"
	SourceEnv           Source = "env"
	SourceFlag          Source = "flag"
	SourceProjectConfig Source = "project_config"
)

// Setting is one resolved value with its source, serialised as
// {"value": ..., "source": ...} in the EffectiveToolPolicy snapshot.
type Setting[T any] struct {
	Value  T      `json:"value"`
	Source Source `json:"source"`
}

func set[T any](s *Setting[T], v T, src Source) { *s = Setting[T]{Value: v, Source: src} }

// Default values documented in the README and the tools reference.
const (
	DefaultModel          = "gpt-5.1-codex"
	DefaultReasoning      = "medium"
	DefaultBaseURL        = "https://api.openai.com/v1"
	DefaultBashTimeout    = 120 * time.Second
	DefaultMaxOutputBytes = 1 << 20

	// MaxBashTimeout is the product-level upper bound on bash_timeout_secs
	// (the bash tool's own ceiling).
	MaxBashTimeout = 10 * time.Minute
	// MaxMaxOutputBytes is the product-level upper bound on max_output_bytes.
	MaxMaxOutputBytes = 64 << 20
	// MinMaxOutputBytes keeps a tool result large enough to be useful.
	MinMaxOutputBytes = 1024
)

// BuiltinTools is the full built-in tool surface, in advertising order.
// diagnostics is there only for an editor that forwards its diagnostics.
var BuiltinTools = []string{"read", "search", "edit", "write", "apply_patch", "bash", "view_image", "update_plan", "diagnostics"}

// RuntimeProfiles lists the accepted runtime_profile values.
var RuntimeProfiles = []string{"codex", "none"}

// ReasoningEfforts lists the accepted reasoning values.
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// ReasoningSummaries lists the accepted reasoning_summary values: the
// Responses API's reasoning.summary modes, and "none" to ask for none.
var ReasoningSummaries = []string{"auto", "concise", "detailed", "none"}

// ApplyPatchModes lists the accepted apply_patch values: "auto" offers
// the tool to the models octet's table says were trained on its format,
// "on" to every model, "off" to none.
var ApplyPatchModes = []string{"auto", "on", "off"}

// Config is the resolved configuration for one octet process and workspace.
type Config struct {
	// Home is $OCTET_HOME (default ~/.octet).
	Home string
	// Workspace is the absolute workspace root the project config came from.
	Workspace string

	Model     Setting[string]
	Reasoning Setting[string]
	// ReasoningSummary is the reasoning.summary requested from models
	// that reason (reasoning_summary; "none" requests none).
	ReasoningSummary Setting[string]
	// ApplyPatch selects which models are offered apply_patch (auto, on,
	// off; see ApplyPatchModes).
	ApplyPatch Setting[string]
	BaseURL    Setting[string]

	EffectPolicy       Setting[EffectPolicy]
	AllowExternalPaths Setting[bool]
	AllowEdit          Setting[bool]
	AllowWrite         Setting[bool]
	AllowProcess       Setting[bool]
	AllowShell         Setting[bool]
	// ShellPath is the configured shell; empty means "select automatically".
	ShellPath      Setting[string]
	BashTimeout    Setting[time.Duration]
	MaxOutputBytes Setting[int64]
	// Tools is the final allowlist of tool names, in BuiltinTools order.
	Tools Setting[[]string]
	// Sandbox is the OS sandbox profile approved shell calls run under
	// ("": the effect policy's default, SandboxProfile).
	Sandbox Setting[string]
	// SandboxReadPaths and SandboxWritePaths widen every sandbox: absolute
	// paths commands may also read, or write (a relative write path names
	// a workspace entry: ".git" opens the repository's metadata).
	SandboxReadPaths  Setting[[]string]
	SandboxWritePaths Setting[[]string]

	// RuntimeProfile is the host-selected runtime profile of the provider
	// route: "codex" asserts an OpenAI Responses route generating with
	// locally dispatched function tools, which is what qualifies in-process
	// provider recovery; "none" never replays a request. It defaults to
	// "codex" whatever the base URL: octet's only provider is the OpenAI
	// Responses API (OPENAI_BASE_URL names a Responses endpoint: the API,
	// a gateway in front of it, a test server) and octet itself always
	// generates with locally dispatched function tools. An endpoint that is
	// not that route is declared with "none".
	RuntimeProfile Setting[string]

	// Transport is the provider transport: "http" (server-sent events) or
	// "websocket" (the Responses WebSocket, falling back to HTTP when the
	// server asks for it or the socket keeps failing). Global config only.
	Transport Setting[string]
	// Prewarm, with transport = "websocket" on a route and model that
	// grant it, sends a warm-up of the next request (generate: false)
	// when an editor opens or resumes a session: the provider prepares
	// the conversation's prefix before the first prompt. The warm-up is
	// a billed provider request (the prefix's input tokens), so it is
	// off unless set. Global config only.
	Prewarm Setting[bool]
	// Prices are the global config's [prices.<model>] tables, checked:
	// each replaces that model's built-in price in the table the host
	// assembles (host.Prices) to turn known usage into exact cost.
	Prices Setting[map[string]price.Spec]
	// MaxSessionTokens is a hard ceiling on a session's cumulative input
	// plus output tokens (0: none). Like every hard ceiling it also
	// refuses further requests while the session has outstanding usage
	// uncertainty.
	MaxSessionTokens Setting[int64]
	// MaxSessionCost is a hard ceiling on a session's cumulative known
	// cost (0: none); max_session_cost_usd in the config file.
	MaxSessionCost Setting[price.Picodollars]
	// MaxNetworkWait bounds how long one network outage is waited out
	// before the run fails (0: unbounded; cancellation always wins).
	MaxNetworkWait Setting[time.Duration]
	// MaxRetryWait bounds all the time one turn spends replacing failed
	// provider requests (the failed attempts and the waits between them)
	// before the run fails (0: only the attempt budgets bound it).
	MaxRetryWait Setting[time.Duration]

	// ModelProvider is the selected provider's name (model_provider).
	ModelProvider Setting[string]
	// Providers are the built-in presets with the global config's
	// [model_providers.NAME] tables applied, by name (Provider returns
	// the selected one).
	Providers map[string]Provider
	// Models are the global config's [models."NAME"] tables.
	Models map[string]ModelSpec
	// userProviders are the providers the global config has a table
	// for: the ones a project may select.
	userProviders []string

	// ContextFiles is false under --no-context-files.
	ContextFiles Setting[bool]
	// Offline is --offline: it turns off optional discovery, which today
	// is MCP servers (MCPDiscovered lists none, none starts). It is not a
	// network switch: inference still contacts the configured provider.
	Offline Setting[bool]

	// SafeMode is --safe-mode (or its alias --safe).
	SafeMode bool
	// MCPServers are the [mcp_servers.NAME] tables of the global config,
	// sorted by name, as a project config tightened them.
	MCPServers []MCPServer

	// Warnings are human-readable notes about ignored settings (a project
	// config that tried to relax the profile, say). Callers log them.
	Warnings []string
}

// SessionsDir is where session files live.
func (c *Config) SessionsDir() string { return filepath.Join(c.Home, "sessions") }

// ToolEnabled reports whether name is in the final allowlist.
func (c *Config) ToolEnabled(name string) bool { return slices.Contains(c.Tools.Value, name) }

// Flags are the command-line settings. Pointer fields are nil when the flag
// was not given, so an explicit flag can be told from a default.
type Flags struct {
	SafeMode       bool
	Yolo           bool
	EffectPolicy   *string
	Tools          *string
	NoContextFiles bool
	Offline        bool
	ShellPath      *string
	Model          *string
	Reasoning      *string
	// AllowShell is --allow-shell[=false], the allow_shell key as a flag.
	// It gates the shell channel only: true never bypasses allow_process,
	// the effect policy or its approvals.
	AllowShell *bool
}

// Options are the inputs of Load.
type Options struct {
	// Home overrides $OCTET_HOME; empty means HomeDir(LookupEnv).
	Home string
	// Workspace is the workspace root; empty means no project config.
	Workspace string
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Flags are the parsed command-line flags.
	Flags Flags
	// KnownTools are the tool names --tools and `tools` may name; nil means
	// BuiltinTools.
	KnownTools []string
}

// UsageError is a command-line or environment mistake (conflicting flags,
// an unknown tool name). The message says how to fix it.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// HomeDir returns $OCTET_HOME, or .octet in the user's home directory
// (HomeOrigin says which).
func HomeDir(lookup func(string) (string, bool)) (string, error) {
	h, _, err := HomeOrigin(lookup)
	return h, err
}

// Where HomeOrigin found octet's state directory.
const (
	HomeFromEnv     = "OCTET_HOME"
	HomeFromHome    = "the home directory"
	HomeFromAccount = "the account's home directory (HOME is not set)"
)

// HomeOrigin is HomeDir and where it came from: $OCTET_HOME, the home
// directory ($HOME; on Windows %USERPROFILE%) or, when that is not set
// (editors may start octet with only PATH and a few variables), the
// account's home directory from the user database (on Windows the
// profile directory).
func HomeOrigin(lookup func(string) (string, bool)) (dir, origin string, err error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if h, ok := lookup("OCTET_HOME"); ok && h != "" {
		dir, err = filepath.Abs(h)
		return dir, HomeFromEnv, err
	}
	if u, err := os.UserHomeDir(); err == nil && u != "" {
		return filepath.Join(u, ".octet"), HomeFromHome, nil
	}
	u, err := user.Current()
	if err != nil || u.HomeDir == "" || !filepath.IsAbs(u.HomeDir) {
		if err == nil {
			err = errors.New("the user database names no home directory")
		}
		return "", "", fmt.Errorf("find home directory (set OCTET_HOME, or HOME): %w", err)
	}
	return filepath.Join(u.HomeDir, ".octet"), HomeFromAccount, nil
}

// Defaults returns the built-in configuration before any file, environment
// or flag is applied: full access (unsafe_host), every built-in tool.
func Defaults() Config {
	var c Config
	set(&c.Model, DefaultModel, SourceDefault)
	set(&c.Reasoning, DefaultReasoning, SourceDefault)
	set(&c.ReasoningSummary, "auto", SourceDefault)
	set(&c.ApplyPatch, "auto", SourceDefault)
	set(&c.BaseURL, DefaultBaseURL, SourceDefault)
	set(&c.EffectPolicy, UnsafeHost, SourceDefault)
	set(&c.AllowExternalPaths, true, SourceDefault)
	set(&c.AllowEdit, true, SourceDefault)
	set(&c.AllowWrite, true, SourceDefault)
	set(&c.AllowProcess, true, SourceDefault)
	set(&c.AllowShell, true, SourceDefault)
	set(&c.ShellPath, "", SourceDefault)
	set(&c.BashTimeout, DefaultBashTimeout, SourceDefault)
	set(&c.MaxOutputBytes, int64(DefaultMaxOutputBytes), SourceDefault)
	set(&c.Tools, slices.Clone(BuiltinTools), SourceDefault)
	set(&c.Sandbox, "", SourceDefault)
	set(&c.SandboxReadPaths, nil, SourceDefault)
	set(&c.SandboxWritePaths, nil, SourceDefault)
	set(&c.RuntimeProfile, "codex", SourceDefault)
	set(&c.Transport, TransportHTTP, SourceDefault)
	set(&c.Prewarm, false, SourceDefault)
	set(&c.Prices, nil, SourceDefault)
	set(&c.MaxSessionTokens, 0, SourceDefault)
	set(&c.MaxSessionCost, 0, SourceDefault)
	set(&c.MaxNetworkWait, 0, SourceDefault)
	set(&c.MaxRetryWait, 0, SourceDefault)
	set(&c.ModelProvider, DefaultProvider, SourceDefault)
	c.Providers = ProviderPresets()
	set(&c.ContextFiles, true, SourceDefault)
	set(&c.Offline, false, SourceDefault)
	return c
}

// Load resolves the configuration: defaults, then $OCTET_HOME/config.toml,
// then the environment, then flags, then the .octet/config.toml of each
// of the workspace's ProjectDirs (repository root first), which may only
// tighten the authority profile.
// A configuration file error names the file and line; a flag error is a
// *UsageError.
func Load(opts Options) (*Config, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	known := opts.KnownTools
	if known == nil {
		known = BuiltinTools
	}
	home := opts.Home
	if home == "" {
		h, err := HomeDir(lookup)
		if err != nil {
			return nil, err
		}
		home = h
	}
	if err := checkFlags(opts.Flags, lookup); err != nil {
		return nil, err
	}
	c := Defaults()
	c.Home = home
	global, err := readFile(filepath.Join(home, "config.toml"), known)
	if err != nil {
		return nil, err
	}
	if global != nil {
		if err := global.checkModelProvider(); err != nil {
			return nil, err
		}
		global.apply(&c, SourceConfig)
		if err := global.applyMCP(&c, lookup); err != nil {
			return nil, err
		}
	}
	if err := applyEnv(&c, lookup); err != nil {
		return nil, err
	}
	if err := applyFlags(&c, opts.Flags, known); err != nil {
		return nil, err
	}
	if opts.Workspace != "" {
		ws, err := filepath.Abs(opts.Workspace)
		if err != nil {
			return nil, fmt.Errorf("workspace %s: %w", opts.Workspace, err)
		}
		c.Workspace = ws
		if err := applyProjectFiles(&c, ws, known); err != nil {
			return nil, err
		}
	}
	if err := c.resolveProvider(); err != nil {
		return nil, err
	}
	enforceControlled(&c)
	if why := shellProblem(c.ShellPath.Value); c.ShellPath.Value != "" && why != "" && c.ShellPath.Source != SourceFlag {
		c.Warnings = append(c.Warnings, fmt.Sprintf("shell_path %s (from %s): %s, so every bash call will fail; fix shell_path or remove it", c.ShellPath.Value, c.ShellPath.Source, why))
	}
	return &c, nil
}

// applyProjectFiles tightens c with the .octet/config.toml of each of
// the workspace's ProjectDirs, the repository root's first and the
// workspace's last (a later file may only tighten further, and its model
// or reasoning wins).
func applyProjectFiles(c *Config, ws string, known []string) error {
	for _, dir := range ProjectDirs(ws) {
		if isHomeConfigDir(dir, c.Home) {
			continue
		}
		project, skipped, err := readProjectFile(dir, known)
		if err != nil {
			return err
		}
		if skipped != "" {
			c.Warnings = append(c.Warnings, skipped)
		}
		if project != nil {
			project.tighten(c)
		}
	}
	return nil
}

// checkFlags rejects flag combinations and retired switches before anything
// else is read.
func checkFlags(f Flags, lookup func(string) (string, bool)) error {
	if f.Yolo {
		return &UsageError{Msg: "--yolo is no longer accepted: full access (--effect-policy unsafe_host) is already the default; use --safe-mode for confirmed bash"}
	}
	if _, ok := lookup("OCTET_YOLO"); ok {
		return &UsageError{Msg: "OCTET_YOLO is no longer accepted: unset it; full access (unsafe_host) is already the default"}
	}
	if f.SafeMode && f.EffectPolicy != nil {
		return &UsageError{Msg: "--safe-mode conflicts with --effect-policy: --safe-mode already selects controlled_bash_approval; pass only one of them"}
	}
	return nil
}

func applyEnv(c *Config, lookup func(string) (string, bool)) error {
	if v, ok := lookup("OCTET_EFFECT_POLICY"); ok && v != "" {
		p, err := parseEffectPolicy(v)
		if err != nil {
			return &UsageError{Msg: fmt.Sprintf("OCTET_EFFECT_POLICY: %v", err)}
		}
		set(&c.EffectPolicy, p, SourceEnv)
	}
	if v, ok := lookup("OPENAI_BASE_URL"); ok && v != "" {
		if err := validateBaseURL(v); err != nil {
			return &UsageError{Msg: fmt.Sprintf("OPENAI_BASE_URL: %v", err)}
		}
		set(&c.BaseURL, strings.TrimRight(v, "/"), SourceEnv)
	}
	return nil
}

func applyFlags(c *Config, f Flags, known []string) error {
	if f.SafeMode {
		c.SafeMode = true
		set(&c.EffectPolicy, ControlledBashApproval, SourceFlag)
		set(&c.AllowExternalPaths, false, SourceFlag)
	}
	if f.EffectPolicy != nil {
		p, err := parseEffectPolicy(*f.EffectPolicy)
		if err != nil {
			return &UsageError{Msg: fmt.Sprintf("--effect-policy: %v", err)}
		}
		set(&c.EffectPolicy, p, SourceFlag)
	}
	if f.AllowShell != nil {
		set(&c.AllowShell, *f.AllowShell, SourceFlag)
	}
	if f.Tools != nil {
		names, err := ParseTools(*f.Tools, known)
		if err != nil {
			return &UsageError{Msg: fmt.Sprintf("--tools: %v", err)}
		}
		set(&c.Tools, names, SourceFlag)
	}
	if f.NoContextFiles {
		set(&c.ContextFiles, false, SourceFlag)
	}
	if f.Offline {
		set(&c.Offline, true, SourceFlag)
	}
	if f.ShellPath != nil {
		if !filepath.IsAbs(*f.ShellPath) {
			return &UsageError{Msg: fmt.Sprintf("--shell-path %q: must be an absolute path", *f.ShellPath)}
		}
		if why := shellProblem(*f.ShellPath); why != "" {
			return &UsageError{Msg: fmt.Sprintf("--shell-path %s: %s; name an executable shell such as /bin/bash", *f.ShellPath, why)}
		}
		set(&c.ShellPath, *f.ShellPath, SourceFlag)
	}
	if f.Model != nil {
		if strings.TrimSpace(*f.Model) == "" {
			return &UsageError{Msg: "--model: must not be empty"}
		}
		set(&c.Model, *f.Model, SourceFlag)
	}
	if f.Reasoning != nil {
		if !slices.Contains(ReasoningEfforts, *f.Reasoning) {
			return &UsageError{Msg: fmt.Sprintf("--reasoning %q: valid values are %s", *f.Reasoning, strings.Join(ReasoningEfforts, ", "))}
		}
		set(&c.Reasoning, *f.Reasoning, SourceFlag)
	}
	return nil
}

// shellProblem says why path cannot run bash's commands ("" when it can),
// by the test the bash tool's resolver applies to a configured shell
// (osfile.ExecutableFile).
func shellProblem(path string) string {
	if _, ok := osfile.ExecutableFile(path, runtime.GOOS == "windows"); ok {
		return ""
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return "no such file"
	}
	return "not an executable file"
}

// CheckFlags validates the command-line flags alone, as Load does, so a
// command can refuse a bad flag value before it reads or starts anything.
func CheckFlags(f Flags, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if err := checkFlags(f, lookup); err != nil {
		return err
	}
	c := Defaults()
	return applyFlags(&c, f, BuiltinTools)
}

// enforceControlled applies the product rule that controlled policies never
// reach outside the workspace with the built-in file tools.
func enforceControlled(c *Config) {
	if c.EffectPolicy.Value != UnsafeHost && c.AllowExternalPaths.Value {
		set(&c.AllowExternalPaths, false, c.EffectPolicy.Source)
	}
}

// ParseTools parses a comma-separated tool list against known names. It
// returns the names in BuiltinTools order (then known order), deduplicated.
func ParseTools(list string, known []string) ([]string, error) {
	var names []string
	for part := range strings.SplitSeq(list, ",") {
		n := strings.TrimSpace(part)
		if n == "" {
			continue
		}
		names = append(names, n)
	}
	return normalizeTools(names, known)
}

// normalizeTools checks names against known and the MCP tool shape
// mcp__<server>__<tool> (an MCP server's tools are only known once it
// runs), and returns them in known order, then MCP names in given order.
func normalizeTools(names, known []string) ([]string, error) {
	for _, n := range names {
		if !slices.Contains(known, n) && !isMCPToolName(n) {
			return nil, fmt.Errorf("unknown tool %q; valid tools are %s, or an MCP server's tool as mcp__<server>__<tool>", n, strings.Join(known, ", "))
		}
	}
	out := make([]string, 0, len(names))
	for _, k := range known {
		if slices.Contains(names, k) {
			out = append(out, k)
		}
	}
	for _, n := range names {
		if !slices.Contains(known, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func validateBaseURL(v string) error {
	if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
		return fmt.Errorf("must start with http:// or https://")
	}
	return nil
}
