package tools

import (
	"os/exec"
	"runtime"

	"github.com/octet-agent/octet/internal/osfile"
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
// /bin/bash, else bash on PATH, else sh (/bin/sh, then PATH). On Windows
// it is the configured path, else bash on PATH (Git for Windows installs
// one), else unavailable (see ShellUnavailableReason). $SHELL is never
// read. The policy snapshot and the bash tool use this same resolver.
func ResolveShell(configured string) (path string, sel ShellSelection) {
	return resolveShell(configured, runtime.GOOS == "windows", exec.LookPath)
}

// ShellUnavailableReason is the bash tool's answer when ResolveShell found
// no shell: it says what to configure or install on this platform.
func ShellUnavailableReason() string { return shellUnavailableReason(runtime.GOOS == "windows") }

func shellUnavailableReason(windows bool) string {
	if windows {
		return "no shell is available: install Git for Windows (https://gitforwindows.org), which puts bash on PATH, or set shell_path to a bash.exe"
	}
	return "no shell is available (configured shell_path is not an executable file, or no bash/sh found)"
}

// resolveShell is ResolveShell with the platform rules selected by
// windows and PATH searched by lookPath, so both rule sets are tested
// everywhere.
func resolveShell(configured string, windows bool, lookPath func(string) (string, error)) (string, ShellSelection) {
	if configured != "" {
		if p, ok := executableFile(configured, windows); ok {
			return p, ShellConfigured
		}
		return "", ShellUnavailable
	}
	if windows {
		// No /bin and no sh fallback: a POSIX sh on Windows comes with
		// bash (Git for Windows, MSYS2), and cmd.exe is not a substitute.
		if p, err := lookPath("bash"); err == nil {
			if p, ok := executableFile(p, true); ok {
				return p, ShellPathBash
			}
		}
		return "", ShellUnavailable
	}
	if p, ok := executableFile("/bin/bash", false); ok {
		return p, ShellSystemBash
	}
	if p, err := lookPath("bash"); err == nil {
		if p, ok := executableFile(p, false); ok {
			return p, ShellPathBash
		}
	}
	if p, ok := executableFile("/bin/sh", false); ok {
		return p, ShellShFallback
	}
	if p, err := lookPath("sh"); err == nil {
		if p, ok := executableFile(p, false); ok {
			return p, ShellShFallback
		}
	}
	return "", ShellUnavailable
}

// executableFile reports whether p names an executable regular file
// (following links: the shell path is host configuration, not a model
// argument) and returns it made absolute. On Unix that means an execute
// permission bit; on Windows, which has none, an ".exe" name.
func executableFile(p string, windows bool) (string, bool) { return osfile.ExecutableFile(p, windows) }
