package sandbox

import (
	"fmt"
	"strings"
)

// SeatbeltExec is macOS's sandbox-exec, always by its absolute path.
const SeatbeltExec = "/usr/bin/sandbox-exec"

// seatbeltSystemRead are the macOS hierarchies programs need to read.
var seatbeltSystemRead = []string{
	"/usr", "/bin", "/sbin", "/System", "/Library", "/Applications", "/opt/homebrew",
	"/usr/local", "/private/etc", "/etc", "/private/var/db/timezone", "/dev",
}

// SeatbeltArgs returns the sandbox-exec argument vector that runs path
// with args confined to s. Paths are passed as -D parameters, never
// spliced into the profile, so no path can change the profile's meaning.
// The profile allows nothing by default and then: reading the system
// hierarchies, the workspace, the shell and the user's read paths;
// writing the private temporary directory, the user's write paths and,
// under workspace-write, the workspace except its protected entries;
// processes and signals within the sandbox; network only with
// s.Network. (Built and unit-tested on every platform; run only on
// macOS, where it is untested by octet's CI.)
func SeatbeltArgs(s *Spec, path string, args []string) []string {
	var params []string
	param := func(prefix string, i int, v string) string {
		name := fmt.Sprintf("%s_%d", prefix, i)
		params = append(params, "-D", name+"="+v)
		return fmt.Sprintf("(param %q)", name)
	}
	var b strings.Builder
	subpaths := func(prefix string, paths []string) {
		for i, p := range paths {
			fmt.Fprintf(&b, " (subpath %s)", param(prefix, i, p))
		}
	}
	b.WriteString("(version 1)\n(deny default)\n")
	b.WriteString("(allow process-exec process-fork)\n")
	b.WriteString("(allow signal (target same-sandbox))\n")
	b.WriteString("(allow process-info* (target same-sandbox))\n")
	b.WriteString("(allow sysctl-read)\n(allow ipc-posix-sem ipc-posix-shm*)\n")
	b.WriteString("(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\") (global-name \"com.apple.trustd\"))\n")
	b.WriteString("(allow file-read-metadata)\n")
	read := append(append([]string{}, seatbeltSystemRead...), s.Workspace)
	if s.Shell != "" {
		read = append(read, s.Shell)
	}
	read = append(read, s.ReadPaths...)
	b.WriteString("(allow file-read*")
	subpaths("READ", read)
	b.WriteString(")\n")
	write := []string{"/dev/null", "/dev/zero", "/dev/tty"}
	if s.TempDir != "" {
		write = append(write, s.TempDir)
	}
	write = append(write, s.WritePaths...)
	b.WriteString("(allow file-write*")
	subpaths("WRITE", write)
	if s.writable() {
		b.WriteString(" (require-all (subpath " + param("WS", 0, s.Workspace) + ")")
		for i, p := range s.protectedPaths() {
			fmt.Fprintf(&b, " (require-not (subpath %s))", param("PROTECTED", i, p))
		}
		b.WriteString(")")
	}
	b.WriteString(")\n")
	if s.Network {
		b.WriteString("(allow network*)\n")
	} else {
		b.WriteString("(allow network* (remote unix-socket))\n")
	}
	out := append([]string{SeatbeltExec, "-p", b.String()}, params...)
	out = append(out, "--", path)
	return append(out, args[1:]...)
}
