//go:build unix

package proc

import (
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/octet-agent/octet/internal/sandbox"
	"golang.org/x/sys/unix"
)

// A guard's own start — a Go program's runtime and package
// initialization — takes longer than a short command it then runs (about
// 4 ms of a bash `true` call's 8, BenchmarkBashTrue). A guard needs
// nothing of its command before the command's description arrives
// (environment, directory and standard descriptors come with it), so a
// caller that runs commands often starts one ahead, a spare (Warm): the
// next Prepare takes it. The bash tool warms one when it is made and
// after each call, once the call's result is made, so the spare starts
// while the model works and not beside a call. A command whose guard must
// be started in new namespaces (a sandbox's) gets a guard of its own. An
// idle spare holds a socket and /dev/null; it exits when octet closes the
// socket or dies (EOF), as a guard that never got its command does. A
// spare found dead when Prepare takes it is passed over; one that dies
// after (before Run sends the command) is replaced by Run.

// guardProc is a guard process started and waiting for its command.
type guardProc struct {
	cmd  *exec.Cmd
	conn *os.File // octet's end of the socket, non-blocking
}

// startGuard starts a guard, in the namespaces spec needs (nil: none).
func startGuard(spec *sandbox.Spec) (*guardProc, error) {
	exe, err := guardExecutable()
	if err != nil {
		return nil, err
	}
	fds, err := socketPair()
	if err != nil {
		return nil, err
	}
	// Our end is non-blocking, so the runtime poller serves it and read
	// deadlines work; the guard's end is a separate open file, unaffected.
	unix.SetNonblock(fds[0], true)
	ours := os.NewFile(uintptr(fds[0]), "proc-guard")
	theirs := os.NewFile(uintptr(fds[1]), "proc-guard-peer")
	cmd := &exec.Cmd{
		Path: exe, Args: []string{guardArgv0}, Dir: "/", Env: guardEnv,
		ExtraFiles: []*os.File{theirs},
		// The guard leads a process group of its own (on Linux the
		// command joins it): octet's fallback kill needs no report.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if spec != nil && spec.NeedsNamespace() {
		sandbox.NamespaceAttr(cmd.SysProcAttr)
	}
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		ours.Close()
		return nil, err
	}
	return &guardProc{cmd: cmd, conn: ours}, nil
}

// end kills g, closes its socket and reaps it.
func (g *guardProc) end() {
	g.cmd.Process.Kill()
	g.conn.Close()
	g.cmd.Wait()
}

// spare is a guard being started, or started, for the next Prepare.
type spare struct {
	ready chan struct{} // closed once g and err are set
	g     *guardProc
	err   error
}

var spares struct {
	mu   sync.Mutex
	next *spare // nil: none started
}

// Warm has a spare guard started if none is: the next Prepare (from any
// goroutine) takes it rather than start a guard.
func Warm() {
	spares.mu.Lock()
	defer spares.mu.Unlock()
	if spares.next == nil {
		spares.next = startSpare()
	}
}

// startSpare starts a guard in the background.
func startSpare() *spare {
	s := &spare{ready: make(chan struct{})}
	go func() {
		s.g, s.err = startGuard(nil)
		close(s.ready)
	}()
	return s
}

// takeSpare returns the spare guard, waiting for it when it is still
// starting (never longer than a new one would take), or nil.
func takeSpare() *guardProc {
	spares.mu.Lock()
	s := spares.next
	spares.next = nil
	spares.mu.Unlock()
	if s == nil {
		return nil
	}
	<-s.ready
	if s.err != nil {
		return nil
	}
	if !s.g.alive() {
		s.g.end()
		return nil
	}
	return s.g
}

// dupCloexec duplicates fd, close-on-exec.
func dupCloexec(fd int) (int, error) {
	return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
}

// StopSpares ends the spare guard, if one was started: for a caller
// that will run no more commands, and to measure a command with no spare
// ready.
func StopSpares() {
	spares.mu.Lock()
	s := spares.next
	spares.next = nil
	spares.mu.Unlock()
	if s != nil {
		<-s.ready
		if s.g != nil {
			s.g.end()
		}
	}
}
