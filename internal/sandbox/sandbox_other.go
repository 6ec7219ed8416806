//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"syscall"
)

var (
	probeOnce sync.Once
	probed    Status
)

// Probe reports what this host enforces: Seatbelt on macOS when
// sandbox-exec is present, nothing elsewhere.
func Probe() Status {
	probeOnce.Do(func() {
		switch runtime.GOOS {
		case "darwin":
			if _, err := os.Stat(SeatbeltExec); err != nil {
				probed = Status{Mechanism: "unavailable", Reason: SeatbeltExec + " is missing: commands are not sandboxed, only admitted"}
				return
			}
			probed = Status{Mechanism: "seatbelt", Network: true, Scoped: true, Namespaces: true}
		case "windows":
			probed = Status{Mechanism: "unavailable", Reason: "Windows: commands are not sandboxed, only admitted"}
		default:
			probed = Status{Mechanism: "unavailable", Reason: runtime.GOOS + ": commands are not sandboxed, only admitted"}
		}
	})
	return probed
}

// NamespaceAttr does nothing: only Linux uses namespaces.
func NamespaceAttr(attr *syscall.SysProcAttr) {}

// Apply is not how this platform confines a command (macOS runs it
// through sandbox-exec: SeatbeltArgs); it refuses.
func Apply(s *Spec) error {
	return errors.New("sandbox: the guard cannot confine itself on " + runtime.GOOS)
}
