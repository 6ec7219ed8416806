//go:build unix && !linux

package proc

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/octet-agent/octet/internal/sandbox"
	"golang.org/x/sys/unix"
)

// guardExecutable is the running binary's path. Unlike /proc/self/exe it
// fails (closed) when the file was removed since octet started.
func guardExecutable() (string, error) { return os.Executable() }

// socketPair returns a connected stream socket pair, close-on-exec. The
// flags are set under syscall.ForkLock, so no concurrent fork inherits
// either end.
func socketPair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	return fds, nil
}

// commandGroup is 0: the command leads a new process group, the one the
// guard stops (it must not signal itself).
func commandGroup(self int) int { return 0 }

// fallbackGroup is the group octet kills when the guard is lost: the
// command's, once its pid was reported.
func fallbackGroup(guard, command int) int { return command }

// prepareGuard does nothing: without a child subreaper, orphans go to
// init and only the command's process group can be stopped.
func prepareGuard() error { return nil }

// treeGone reports whether the command's process group has no member
// left. Processes that left the group (setsid) are not seen.
func (g *guard) treeGone() bool {
	return unix.Kill(-g.shell, 0) == unix.ESRCH
}

// signalTree sends sig to the command's process group (SIGTERM followed
// by SIGCONT, so stopped members handle it too); with once non-nil only
// the first time.
func (g *guard) signalTree(sig unix.Signal, once map[procKey]bool) {
	k := procKey{pid: -g.shell}
	if unix.Kill(-g.shell, 0) == unix.ESRCH {
		return // never signal an emptied group's id: it may be reused
	}
	if once != nil {
		if once[k] {
			return
		}
		once[k] = true
	}
	unix.Kill(-g.shell, sig)
	if sig == unix.SIGTERM {
		unix.Kill(-g.shell, unix.SIGCONT)
	}
}

// confine runs the command through sandbox-exec on macOS; other systems
// have no sandbox, so a sandboxed command is refused.
func confine(s *sandbox.Spec, path string, args []string) (string, []string, error) {
	if runtime.GOOS != "darwin" {
		return "", nil, fmt.Errorf("no sandbox on %s", runtime.GOOS)
	}
	argv := sandbox.SeatbeltArgs(s, path, args)
	return argv[0], argv, nil
}

// alive reports true: a spare that died is found when its command is
// sent, and Run starts another guard in its place.
func (g *guardProc) alive() bool { return true }
