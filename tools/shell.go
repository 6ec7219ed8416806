package tools

import (
	"os"
	"os/exec"
	"path/filepath"
)

// ShellSelection names how the bash tool's shell was chosen. Policy
// evidence records only this name, never the path.
type ShellSelection string

// The shell selections, in resolution order.
const (
	ShellConfigured  ShellSelection = "configured"
	ShellSystemBash  ShellSelection = "system_bash"
	ShellPathBash    ShellSelection = "path_bash"
	ShellShFallback  ShellSelection = "sh_fallback"
	ShellUnavailable ShellSelection = "unavailable"
)

// ResolveShell picks the shell that runs every bash command: the
// configured path when one is given (unavailable if it is not an
// executable file; an explicit choice never silently falls back), else
// /bin/bash, else bash on PATH, else sh (/bin/sh, then PATH). $SHELL is
// never read. The policy snapshot and the bash tool use this same
// resolver.
func ResolveShell(configured string) (path string, sel ShellSelection) {
	if configured != "" {
		if p, ok := executableFile(configured); ok {
			return p, ShellConfigured
		}
		return "", ShellUnavailable
	}
	if p, ok := executableFile("/bin/bash"); ok {
		return p, ShellSystemBash
	}
	if p, err := exec.LookPath("bash"); err == nil {
		if p, ok := executableFile(p); ok {
			return p, ShellPathBash
		}
	}
	if p, ok := executableFile("/bin/sh"); ok {
		return p, ShellShFallback
	}
	if p, err := exec.LookPath("sh"); err == nil {
		if p, ok := executableFile(p); ok {
			return p, ShellShFallback
		}
	}
	return "", ShellUnavailable
}

// executableFile reports whether p names an executable regular file
// (following links: the shell path is host configuration, not a model
// argument) and returns it made absolute.
func executableFile(p string) (string, bool) {
	if !filepath.IsAbs(p) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", false
		}
		p = abs
	}
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", false
	}
	return p, true
}
