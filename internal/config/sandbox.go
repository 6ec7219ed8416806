package config

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/octet-agent/octet/internal/sandbox"
)

// SandboxProfile is the profile approved shell calls run under: the
// sandbox key, or the effect policy's default (workspace-write under the
// controlled policies, none under unsafe_host).
func (c *Config) SandboxProfile() sandbox.Profile {
	if p, err := sandbox.ParseProfile(c.Sandbox.Value); err == nil {
		return p
	}
	return sandbox.Default(c.EffectPolicy.Value == UnsafeHost)
}

// validateSandbox checks sandbox, sandbox_read_paths and
// sandbox_write_paths.
func (fc *fileConfig) validateSandbox() []error {
	var errs []error
	if fc.Sandbox != nil {
		if _, err := sandbox.ParseProfile(*fc.Sandbox); err != nil {
			errs = append(errs, fc.errAt("sandbox", "%v", err))
		}
	}
	if fc.SandboxReadPaths != nil {
		for _, p := range *fc.SandboxReadPaths {
			if !filepath.IsAbs(p) {
				errs = append(errs, fc.errAt("sandbox_read_paths", "%q is not an absolute path", p))
			}
		}
	}
	if fc.SandboxWritePaths != nil {
		for _, p := range *fc.SandboxWritePaths {
			if !filepath.IsAbs(p) && (!filepath.IsLocal(p) || strings.ContainsRune(filepath.Clean(p), filepath.Separator)) {
				errs = append(errs, fc.errAt("sandbox_write_paths", "%q is neither an absolute path nor a workspace entry such as \".git\"", p))
			}
		}
	}
	return errs
}

// tightenSandbox applies a project's sandbox keys: a profile no looser
// than the one in force, and path lists that only remove paths the
// user's configuration added.
func (fc *fileConfig) tightenSandbox(c *Config, warn func(key, format string, args ...any)) {
	const src = SourceProjectConfig
	if fc.Sandbox != nil {
		p, _ := sandbox.ParseProfile(*fc.Sandbox)
		switch cur := c.SandboxProfile(); {
		case p == cur:
		case p.NoLooserThan(cur):
			set(&c.Sandbox, string(p), src)
		default:
			warn("sandbox", "a project may only tighten the sandbox (now %s from %s)", cur, c.Sandbox.Source)
		}
	}
	onlyRemove := func(s *Setting[[]string], v *[]string, key string) {
		if v == nil {
			return
		}
		var kept, extra []string
		for _, p := range *v {
			if slices.Contains(s.Value, p) {
				kept = append(kept, p)
			} else {
				extra = append(extra, p)
			}
		}
		if len(extra) > 0 {
			warn(key, "a project may only remove paths, not add %s", strings.Join(extra, ", "))
		}
		if len(kept) < len(s.Value) {
			set(s, kept, src)
		}
	}
	onlyRemove(&c.SandboxReadPaths, fc.SandboxReadPaths, "sandbox_read_paths")
	onlyRemove(&c.SandboxWritePaths, fc.SandboxWritePaths, "sandbox_write_paths")
}
