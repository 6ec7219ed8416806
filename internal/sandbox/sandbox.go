// Package sandbox turns a sandbox profile into kernel rules for the
// process a tool starts and everything below it.
//
// The broker decides which profile a call runs under (tools never build
// rules themselves); the tool describes the call's surroundings in a Spec
// (workspace, shell, private temporary directory, the user's extra
// paths); the per-call process guard (internal/proc) applies the Spec to
// the thread that starts the command just before it starts it, so the
// command and every descendant (grandchildren, setsid, double forks)
// inherit it and cannot shed it.
//
// On Linux the rules are Landlock's (github.com/landlock-lsm/go-landlock):
// files by path hierarchy (ABI 1 and later), TCP bind and connect (ABI 4),
// signals and abstract UNIX sockets scoped to the sandbox (ABI 6). No
// network is enforced twice: Landlock's TCP rules and a seccomp filter
// that refuses every socket but a UNIX one (so UDP, raw and MPTCP sockets,
// which Landlock ABI 7 does not cover, are refused too). Under
// workspace-write the workspace's .git and .octet are kept read-only by
// read-only bind mounts in a private mount namespace (a user namespace
// for an ordinary user), made before Landlock is applied. When run as
// root the command also gets no capabilities. On macOS the rules are a
// Seatbelt profile run through /usr/bin/sandbox-exec. Windows has no
// sandbox. Probe reports what this host enforces.
package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Profile names what a sandboxed command may do.
type Profile string

// The profiles, tightest first.
const (
	// ReadOnly reads the workspace and what programs need to run (system
	// programs, libraries, locale and configuration directories, the
	// shell, /dev/null and friends); it writes only a private temporary
	// directory; no network; no signals or abstract sockets outside the
	// sandbox.
	ReadOnly Profile = "read-only"
	// WorkspaceWrite is ReadOnly plus writing the workspace, except its
	// protected entries (.git, .octet), which stay read-only.
	WorkspaceWrite Profile = "workspace-write"
	// None is no sandbox: the user's own authority.
	None Profile = "none"
)

// rank orders profiles by what they allow: read-only < workspace-write <
// none.
func (p Profile) rank() int {
	switch p {
	case ReadOnly:
		return 0
	case WorkspaceWrite:
		return 1
	}
	return 2
}

// Valid reports whether p is one of the defined profiles.
func (p Profile) Valid() bool { return p == ReadOnly || p == WorkspaceWrite || p == None }

// NoLooserThan reports whether p allows at most what q allows.
func (p Profile) NoLooserThan(q Profile) bool { return p.rank() <= q.rank() }

// Tighter returns the tighter of p and q.
func Tighter(p, q Profile) Profile {
	if p.rank() <= q.rank() {
		return p
	}
	return q
}

// Default is the profile approved shell calls run under when the user's
// configuration names none: none under full access (the user's own
// authority is the point of it), workspace-write under the controlled
// policies.
func Default(fullAccess bool) Profile {
	if fullAccess {
		return None
	}
	return WorkspaceWrite
}

// ParseProfile parses a configuration value: "read-only",
// "workspace-write" or "none".
func ParseProfile(s string) (Profile, error) {
	p := Profile(strings.TrimSpace(s))
	if !p.Valid() {
		return "", fmt.Errorf("unknown sandbox profile %q (want read-only, workspace-write or none)", s)
	}
	return p, nil
}

// ProtectedNames are the workspace entries WorkspaceWrite keeps
// read-only unless the user's configuration opens them: the repository's
// metadata (hooks and config run code later, outside any sandbox) and
// octet's own project directory.
var ProtectedNames = []string{".git", ".octet"}

// Spec is everything a guard needs to confine one command. It is sent
// to the guard as JSON.
type Spec struct {
	// Profile is ReadOnly or WorkspaceWrite (None needs no Spec).
	Profile Profile `json:"profile"`
	// Network allows network access (an approved escalation).
	Network bool `json:"network,omitempty"`
	// Workspace is the workspace root, absolute.
	Workspace string `json:"workspace"`
	// Shell is the program that runs the command (readable and
	// executable wherever it is).
	Shell string `json:"shell,omitempty"`
	// TempDir is the command's private temporary directory (writable).
	TempDir string `json:"temp_dir,omitempty"`
	// ReadPaths and WritePaths are the user's additions
	// (sandbox_read_paths, sandbox_write_paths), absolute.
	ReadPaths  []string `json:"read_paths,omitempty"`
	WritePaths []string `json:"write_paths,omitempty"`
	// Protected are the workspace entries kept read-only under
	// WorkspaceWrite (ProtectedNames less those the user opened).
	Protected []string `json:"protected,omitempty"`
	// Namespace asks for the private mount namespace that makes
	// Protected read-only (Status.Namespaces reports whether this host
	// allows one). Without it a WorkspaceWrite command can write them.
	Namespace bool `json:"namespace,omitempty"`
}

// Validate checks that s can be applied: a confining profile and
// absolute paths.
func (s *Spec) Validate() error {
	if s.Profile != ReadOnly && s.Profile != WorkspaceWrite {
		return fmt.Errorf("sandbox: profile %q cannot be applied", s.Profile)
	}
	paths := append([]string{s.Workspace}, s.ReadPaths...)
	paths = append(paths, s.WritePaths...)
	if s.Shell != "" {
		paths = append(paths, s.Shell)
	}
	if s.TempDir != "" {
		paths = append(paths, s.TempDir)
	}
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("sandbox: path %q is not absolute", p)
		}
	}
	for _, n := range s.Protected {
		if !filepath.IsLocal(n) || strings.ContainsRune(n, filepath.Separator) {
			return fmt.Errorf("sandbox: protected entry %q is not a name in the workspace", n)
		}
	}
	return nil
}

// NeedsNamespace reports whether the guard must start in a private mount
// namespace (NamespaceAttr) to keep the protected entries read-only.
func (s *Spec) NeedsNamespace() bool { return s.Namespace && s.writable() && len(s.Protected) > 0 }

// writable reports whether s lets the command write the workspace.
func (s *Spec) writable() bool { return s.Profile == WorkspaceWrite }

// protectedPaths are the absolute paths of Protected under WorkspaceWrite.
func (s *Spec) protectedPaths() []string {
	if !s.writable() {
		return nil
	}
	out := make([]string, 0, len(s.Protected))
	for _, n := range s.Protected {
		out = append(out, filepath.Join(s.Workspace, n))
	}
	return out
}

// Status is what this host's sandbox enforces.
type Status struct {
	// Mechanism is "landlock", "seatbelt", or "unavailable".
	Mechanism string
	// ABI is the Landlock ABI version in use (0 elsewhere).
	ABI int
	// Network reports that no-network is enforced.
	Network bool
	// Scoped reports that signals and abstract UNIX sockets are scoped
	// to the sandbox.
	Scoped bool
	// Namespaces reports that .git and .octet can be kept read-only under
	// workspace-write.
	Namespaces bool
	// Reason says why the sandbox is unavailable, or what it does not
	// enforce here; "" when everything above is enforced.
	Reason string
}

// Available reports whether commands can be sandboxed at all.
func (s Status) Available() bool { return s.Mechanism != "unavailable" && s.Mechanism != "" }

// String is a one-line summary of st ("landlock ABI 7").
func (st Status) String() string {
	s := st.Mechanism
	if st.ABI > 0 {
		s += fmt.Sprintf(" ABI %d", st.ABI)
	}
	if st.Reason != "" {
		s += " (" + st.Reason + ")"
	}
	return s
}

// systemReadDirs are what programs need to run: programs, libraries,
// locale and configuration, kernel interfaces. Missing ones are skipped.
var systemReadDirs = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
	"/nix/store", "/proc", "/sys", "/run/systemd/resolve", "/run/resolvconf",
}

// devReadFiles and devWriteFiles are the device files every profile may
// use.
var (
	devReadFiles  = []string{"/dev/zero", "/dev/random", "/dev/urandom"}
	devWriteFiles = []string{"/dev/null", "/dev/full"}
)

// readPaths are the hierarchies s may read (and execute).
func (s *Spec) readPaths() []string {
	out := slices.Clone(systemReadDirs)
	out = append(out, devReadFiles...)
	out = append(out, s.Workspace)
	if s.Shell != "" {
		out = append(out, s.Shell)
	}
	return append(out, s.ReadPaths...)
}

// writePaths are the hierarchies s may write.
func (s *Spec) writePaths() []string {
	out := slices.Clone(devWriteFiles)
	if s.TempDir != "" {
		out = append(out, s.TempDir)
	}
	if s.writable() {
		out = append(out, s.Workspace)
	}
	return append(out, s.WritePaths...)
}
