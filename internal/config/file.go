package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/octet-agent/octet/internal/fsroot"
	"github.com/octet-agent/octet/internal/price"
)

// MaxConfigBytes bounds a configuration file; larger files are refused.
const MaxConfigBytes = 1 << 20

// FileError is a problem in a configuration file, reported as
// "path:line: message" (line 0 when the position is unknown).
type FileError struct {
	Path string
	Line int
	Msg  string
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// fileConfig is one decoded config.toml. Nil fields were not set.
type fileConfig struct {
	path string
	data []byte

	Model              *string   `toml:"model"`
	Reasoning          *string   `toml:"reasoning"`
	ReasoningSummary   *string   `toml:"reasoning_summary"`
	ApplyPatch         *string   `toml:"apply_patch"`
	EffectPolicy       *string   `toml:"effect_policy"`
	AllowExternalPaths *bool     `toml:"allow_external_paths"`
	AllowEdit          *bool     `toml:"allow_edit"`
	AllowWrite         *bool     `toml:"allow_write"`
	AllowProcess       *bool     `toml:"allow_process"`
	AllowShell         *bool     `toml:"allow_shell"`
	ShellPath          *string   `toml:"shell_path"`
	BashTimeoutSecs    *int64    `toml:"bash_timeout_secs"`
	MaxOutputBytes     *int64    `toml:"max_output_bytes"`
	Tools              *[]string `toml:"tools"`
	Sandbox            *string   `toml:"sandbox"`
	SandboxReadPaths   *[]string `toml:"sandbox_read_paths"`
	SandboxWritePaths  *[]string `toml:"sandbox_write_paths"`
	BaseURL            *string   `toml:"base_url"`
	RuntimeProfile     *string   `toml:"runtime_profile"`

	Transport          *string               `toml:"transport"`
	Prewarm            *bool                 `toml:"prewarm"`
	Prices             map[string]price.Spec `toml:"prices"`
	MaxSessionTokens   *int64                `toml:"max_session_tokens"`
	MaxSessionCostUSD  *string               `toml:"max_session_cost_usd"`
	MaxNetworkWaitSecs *int64                `toml:"max_network_wait_secs"`
	MCPServers         map[string]mcpFile    `toml:"mcp_servers"`
	MaxRetryWaitSecs   *int64                `toml:"max_retry_wait_secs"`

	ModelProvider *string                  `toml:"model_provider"`
	Providers     map[string]*providerFile `toml:"model_providers"`
	Models        map[string]ModelSpec     `toml:"models"`

	// Parsed by validate.
	policy  *EffectPolicy
	prices  map[string]price.Spec
	maxCost price.Picodollars
}

// readFile reads and validates the user's own config file (the global
// $OCTET_HOME/config.toml). A missing file is not an error (nil, nil).
func readFile(path string, known []string) (*fileConfig, error) {
	data, truncated, err := fsroot.ReadHostPrefix(path, MaxConfigBytes)
	return parseRead(path, data, truncated, err, known)
}

// ProjectConfigPath is the project configuration's path inside a
// workspace.
const ProjectConfigPath = ".octet/config.toml"

// readProjectFile reads and validates the workspace's .octet/config.toml
// through the file tools' no-follow, regular-file-only, non-blocking path
// beneath the workspace root. A missing file is (nil, "", nil); a file
// that is a symbolic link (or lies behind one) or is not a regular file
// is skipped, returned as a warning naming it.
func readProjectFile(workspace string, known []string) (*fileConfig, string, error) {
	path := filepath.Join(workspace, ProjectConfigPath)
	data, truncated, err := readConfined(path, workspace, MaxConfigBytes)
	if _, skipped := errors.AsType[*skippedError](err); skipped {
		return nil, fmt.Sprintf("%s: %v", path, err), nil
	}
	fc, err := parseRead(path, data, truncated, err, known)
	return fc, "", err
}

// parseRead turns the outcome of reading a config file into a parsed
// file, nothing (missing) or a FileError.
func parseRead(path string, data []byte, truncated bool, err error, known []string) (*fileConfig, error) {
	switch {
	case fsroot.IsNotExist(err):
		return nil, nil
	case err != nil:
		return nil, &FileError{Path: path, Msg: err.Error()}
	case truncated:
		return nil, &FileError{Path: path, Msg: fmt.Sprintf("larger than %d bytes", MaxConfigBytes)}
	}
	return parseFile(path, data, known)
}

var tomlLineRE = regexp.MustCompile(`^toml: line (\d+) (?:\(last key "([^"]*)"\): )?`)

// parseFile decodes data strictly: syntax errors, wrong types, unknown keys
// and out-of-range values are FileErrors with the line.
func parseFile(path string, data []byte, known []string) (*fileConfig, error) {
	fc := &fileConfig{path: path, data: data}
	md, err := toml.Decode(string(data), fc)
	if err != nil {
		return nil, decodeError(path, data, err)
	}
	var errs []error
	for _, k := range md.Undecoded() {
		if len(k) > 1 && slices.ContainsFunc(md.Undecoded(), func(o toml.Key) bool { return len(o) < len(k) && slices.Equal(o, k[:len(o)]) }) {
			continue // reported through its table
		}
		msg := fmt.Sprintf("unknown key %q; valid keys are %s", k.String(), strings.Join(validKeys, ", "))
		if len(k) == 3 && k[0] == "mcp_servers" {
			msg = fmt.Sprintf("unknown key %q of an MCP server; valid keys are %s", k.String(), strings.Join(mcpKeys, ", "))
		}
		if len(k) == 3 && k[0] == "prices" {
			msg = fmt.Sprintf("unknown price field %q; valid fields are input, cached_input, output, cache_write", k.String())
		}
		if len(k) == 3 && k[0] == "model_providers" {
			msg = fmt.Sprintf("unknown key %q of a provider; valid keys are %s", k.String(), strings.Join(providerKeys, ", "))
			if advice, ok := providerKeyAdvice[k[2]]; ok {
				msg += " (" + advice + ")"
			}
		}
		if len(k) >= 3 && k[0] == "models" {
			msg = fmt.Sprintf("unknown key %q of a model; valid keys are %s", k.String(), strings.Join(modelKeys, ", "))
			if len(k) == 4 && k[2] == "price" {
				msg = fmt.Sprintf("unknown price field %q; valid fields are input, cached_input, output, cache_write", k.String())
			}
		}
		if k.String() == "yolo" {
			msg = `"yolo" is no longer accepted; full access is effect_policy = "unsafe_host" (the default)`
		}
		errs = append(errs, &FileError{Path: path, Line: keyLine(data, k), Msg: msg})
	}
	if err := fc.validate(known); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return fc, nil
}

var validKeys = []string{
	"model", "reasoning", "reasoning_summary", "apply_patch", "effect_policy", "allow_external_paths", "allow_edit",
	"allow_write", "allow_process", "allow_shell", "shell_path",
	"bash_timeout_secs", "max_output_bytes", "tools", "base_url", "runtime_profile",
	"sandbox", "sandbox_read_paths", "sandbox_write_paths",
	"transport", "prewarm", "prices", "max_session_tokens", "max_session_cost_usd", "max_network_wait_secs",
	"max_retry_wait_secs", "mcp_servers", "model_provider", "model_providers", "models",
}

// decodeError turns a decoder error into a FileError with its line; a
// value of the wrong type says what the key holds and what to write.
func decodeError(path string, data []byte, err error) error {
	if pe, ok := errors.AsType[toml.ParseError](err); ok {
		line := pe.Position.Line
		if line == 0 {
			line = pe.Line
		}
		return &FileError{Path: path, Line: line, Msg: keyMessage(data, line, pe.LastKey, pe.Message)}
	}
	msg := err.Error()
	if m := tomlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FileError{Path: path, Line: line, Msg: keyMessage(data, line, m[2], strings.TrimPrefix(msg, m[0]))}
	}
	return &FileError{Path: path, Msg: strings.TrimPrefix(msg, "toml: ")}
}

// keyMessage prefixes msg with the key it is about, or replaces it with
// advice when the key's value has the wrong type.
func keyMessage(data []byte, line int, key, msg string) string {
	if key == "" {
		return msg
	}
	if advice := typeAdvice(key, msg, lineText(data, line)); advice != "" {
		return advice
	}
	return key + ": " + msg
}

// lineText returns line n (from 1) of data, or "".
func lineText(data []byte, n int) string {
	for i, l := range strings.Split(string(data), "\n") {
		if i+1 == n {
			return l
		}
	}
	return ""
}

// keyLine finds the line where the top-level key key[0] is defined, or 0.
// octet's config files are flat, so every key of interest is top-level:
// "key = value", a dotted "key.x = value", or a [key] / [[key]] header.
func keyLine(data []byte, key toml.Key) int {
	if len(key) == 0 {
		return 0
	}
	first := key[0]
	inRoot := true
	for i, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "[") {
			inRoot = false
			name := strings.TrimSpace(strings.Trim(strings.SplitN(line, "#", 2)[0], "[] \t"))
			if matchesKey(name, first) {
				return i + 1
			}
			continue
		}
		if !inRoot {
			continue
		}
		if k, _, ok := strings.Cut(line, "="); ok && matchesKey(strings.TrimSpace(k), first) {
			return i + 1
		}
	}
	return 0
}

func matchesKey(name, first string) bool {
	name = strings.Trim(name, `"'`)
	return name == first || strings.HasPrefix(name, first+".") || strings.HasPrefix(name, first+" .")
}

func (fc *fileConfig) errAt(key, format string, args ...any) error {
	return &FileError{Path: fc.path, Line: keyLine(fc.data, toml.Key{key}), Msg: key + ": " + fmt.Sprintf(format, args...)}
}

// validate checks value ranges that TOML types cannot express.
func (fc *fileConfig) validate(known []string) error {
	var errs []error
	if fc.Model != nil && strings.TrimSpace(*fc.Model) == "" {
		errs = append(errs, fc.errAt("model", "must not be empty"))
	}
	if fc.EffectPolicy != nil {
		if p, err := parseEffectPolicy(*fc.EffectPolicy); err != nil {
			errs = append(errs, fc.errAt("effect_policy", "%v", err))
		} else {
			fc.policy = &p
		}
	}
	if fc.Reasoning != nil && !slices.Contains(ReasoningEfforts, *fc.Reasoning) {
		errs = append(errs, fc.errAt("reasoning", "%q is not one of %s", *fc.Reasoning, strings.Join(ReasoningEfforts, ", ")))
	}
	if fc.ReasoningSummary != nil && !slices.Contains(ReasoningSummaries, *fc.ReasoningSummary) {
		errs = append(errs, fc.errAt("reasoning_summary", "%q is not one of %s", *fc.ReasoningSummary, strings.Join(ReasoningSummaries, ", ")))
	}
	if fc.ApplyPatch != nil && !slices.Contains(ApplyPatchModes, *fc.ApplyPatch) {
		errs = append(errs, fc.errAt("apply_patch", "%q is not one of %s", *fc.ApplyPatch, strings.Join(ApplyPatchModes, ", ")))
	}
	errs = append(errs, fc.validateSandbox()...)
	if fc.ShellPath != nil && !strings.HasPrefix(*fc.ShellPath, "/") {
		errs = append(errs, fc.errAt("shell_path", "must be an absolute path"))
	}
	if fc.BashTimeoutSecs != nil && (*fc.BashTimeoutSecs < 1 || time.Duration(*fc.BashTimeoutSecs)*time.Second > MaxBashTimeout) {
		errs = append(errs, fc.errAt("bash_timeout_secs", "%d is out of range 1..%d", *fc.BashTimeoutSecs, int(MaxBashTimeout.Seconds())))
	}
	if fc.MaxOutputBytes != nil && (*fc.MaxOutputBytes < MinMaxOutputBytes || *fc.MaxOutputBytes > MaxMaxOutputBytes) {
		errs = append(errs, fc.errAt("max_output_bytes", "%d is out of range %d..%d", *fc.MaxOutputBytes, MinMaxOutputBytes, MaxMaxOutputBytes))
	}
	if fc.Tools != nil {
		names, err := normalizeTools(*fc.Tools, known)
		if err != nil {
			errs = append(errs, fc.errAt("tools", "%v", err))
		} else {
			*fc.Tools = names
		}
	}
	if fc.RuntimeProfile != nil && !slices.Contains(RuntimeProfiles, *fc.RuntimeProfile) {
		errs = append(errs, fc.errAt("runtime_profile", "%q is not one of %s", *fc.RuntimeProfile, strings.Join(RuntimeProfiles, ", ")))
	}
	if fc.BaseURL != nil {
		if err := validateBaseURL(*fc.BaseURL); err != nil {
			errs = append(errs, fc.errAt("base_url", "%v", err))
		}
	}
	errs = append(errs, fc.validateAccounting()...)
	errs = append(errs, fc.validateProviders()...)
	if err := fc.validateMCP(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// apply overlays every set field onto c with the given source.
func (fc *fileConfig) apply(c *Config, src Source) {
	setIf(&c.Model, fc.Model, src)
	setIf(&c.Reasoning, fc.Reasoning, src)
	setIf(&c.ReasoningSummary, fc.ReasoningSummary, src)
	setIf(&c.ApplyPatch, fc.ApplyPatch, src)
	setIf(&c.EffectPolicy, fc.policy, src)
	setIf(&c.AllowExternalPaths, fc.AllowExternalPaths, src)
	setIf(&c.AllowEdit, fc.AllowEdit, src)
	setIf(&c.AllowWrite, fc.AllowWrite, src)
	setIf(&c.AllowProcess, fc.AllowProcess, src)
	setIf(&c.AllowShell, fc.AllowShell, src)
	setIf(&c.ShellPath, fc.ShellPath, src)
	setIf(&c.Sandbox, fc.Sandbox, src)
	setIf(&c.SandboxReadPaths, fc.SandboxReadPaths, src)
	setIf(&c.SandboxWritePaths, fc.SandboxWritePaths, src)
	if fc.BashTimeoutSecs != nil {
		set(&c.BashTimeout, time.Duration(*fc.BashTimeoutSecs)*time.Second, src)
	}
	setIf(&c.MaxOutputBytes, fc.MaxOutputBytes, src)
	if fc.Tools != nil {
		set(&c.Tools, slices.Clone(*fc.Tools), src)
	}
	if fc.BaseURL != nil {
		set(&c.BaseURL, strings.TrimRight(*fc.BaseURL, "/"), src)
	}
	setIf(&c.RuntimeProfile, fc.RuntimeProfile, src)
	fc.applyAccounting(c, src)
	fc.applyProviders(c, src)
}

func setIf[T any](s *Setting[T], v *T, src Source) {
	if v != nil {
		set(s, *v, src)
	}
}
