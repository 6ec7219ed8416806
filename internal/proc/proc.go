//go:build unix

// Package proc supervises the processes octet's tools start, so that
// nothing a tool call started outlives the call or octet itself.
//
// Every command runs under a guard: octet re-executes its own binary
// (/proc/self/exe on Linux, which works even after the file on disk was
// replaced) in guard mode, one guard per command, as the leader of a new
// process group. The guard makes itself a child subreaper (so orphaned
// descendants, including ones that called setsid or double-forked, are
// reparented to it rather than to init), reads the command — its
// environment, directory and standard descriptors with it — from a
// socket inherited on file descriptor 3 (closed on exec, so the command
// never sees it), starts the command in the guard's process group and,
// over the same socket:
//
//   - it reports the command's start and its exit status (code or
//     signal);
//   - when the command exits, or octet asks it to terminate (timeout,
//     cancellation), it sends SIGTERM to every process whose parent chain
//     leads to it, then SIGKILL after the grace period, and reports that
//     the tree is gone;
//   - when the socket reaches EOF — octet died, by any signal — it
//     SIGKILLs every descendant at once, reaps them and exits.
//
// The guard catches (and drops) SIGTERM, SIGINT, SIGHUP and SIGQUIT, so a
// terminal hangup or a command's kill of its own group (which holds the
// guard) cannot stop it before it has cleaned up; it does not ignore
// them, because ignored dispositions would be inherited by the command. A command that
// deliberately kills its guard (kill -9 $PPID) has the user's authority
// and could equally escape through systemd-run or at(1): that is out of
// scope, but octet still kills the command's process group when it sees
// its guard die, and kills a guard that stops answering.
//
// A command with a sandbox Spec is confined by its guard: on Linux the
// guard makes the Spec's mounts and applies its Landlock rules, seccomp
// filter and capability limits to the thread that then starts the
// command (internal/sandbox), which inherits them with every descendant; on macOS the guard starts the
// command through sandbox-exec. A guard that cannot apply the Spec
// reports a failure and starts nothing.
//
// A guard needs nothing of its command until the command arrives, so
// one can be started before it is known: once asked (Warm), the package
// keeps one spare guard started and idle for the next command
// (spare.go).
//
// Guard mode is entered from this package's init when the environment
// holds the guard marker, so every binary that imports the package —
// octet, its test binaries, programs embedding octet's tools — serves as
// its own guard with no extra call. The package imports only the standard
// library, golang.org/x/sys and internal/sandbox (with its Landlock
// library), so its init runs before any other octet package's, and in
// guard mode it never returns. The guard removes the
// marker before starting the command, so nothing the command runs is
// turned into a guard.
//
// Outside Linux there is no subreaper and no /proc: the command leads a
// process group of its own, which the guard stops instead of its tree, so
// processes that left the group (setsid) escape. See
// docs/design/tools-builtins.md.
package proc

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/octet-agent/octet/internal/sandbox"
	"golang.org/x/sys/unix"
)

const (
	// markerEnv and markerValue put a process into guard mode.
	markerEnv   = "OCTET_PROC_GUARD"
	markerValue = "v1"
	// guardFD is the descriptor on which the guard finds its socket.
	guardFD = 3
	// guardArgv0 is how a guard shows in ps.
	guardArgv0 = "octet-guard"
	// startTimeout bounds how long Start waits for the guard's first
	// report (a race-instrumented binary on a loaded machine is slow).
	startTimeout = 30 * time.Second
	// guardSlack is how long, beyond the grace period, octet waits for a
	// stopping guard to report the tree gone before it kills the guard.
	guardSlack = 5 * time.Second
	// maxLine bounds one protocol line.
	maxLine = 4096
	// maxSpec bounds the command description octet sends its guard.
	maxSpec = 16 << 20
)

// guardSpec is what octet sends a new guard: the command to start.
type guardSpec struct {
	Path  string        `json:"path"`
	Args  []string      `json:"args"`
	Env   []string      `json:"env"`
	Grace time.Duration `json:"grace"`
	// Sandbox, when set, confines the command (see internal/sandbox).
	Sandbox *sandbox.Spec `json:"sandbox,omitempty"`
	// Dir is the command's working directory (absolute).
	Dir string `json:"dir"`
	// Stdio says which of the command's standard input, output and error
	// come with the description (descriptors passed over the socket, in
	// that order); the others are /dev/null.
	Stdio [3]bool `json:"stdio"`
}

// guardEnv is a guard's whole environment: the marker and its one
// runtime setting. A guard is started before its command is known (a
// spare: spare.go), so it holds nothing of octet's environment, which may
// hold credentials, nor of the command's, which arrives over the socket:
// the command can read its guard's /proc/PID/environ, and a user's
// GODEBUG=inittrace=1 cannot make the guard write into the command's
// output.
var guardEnv = []string{markerEnv + "=" + markerValue, guardProcs}

// guardProcs is the one runtime setting a guard gets: a guard has little
// to run at once (it waits for its command, reaps and signals), and a
// runtime with one P starts with less work — no cgroup limits read, one
// P's caches made, fewer threads: ~6% less CPU per guard of the octet
// binary (BenchmarkGuardStartOctet in cmd/octet).
const guardProcs = "GOMAXPROCS=1"

// Process is a command running under its guard. Its methods are safe for
// concurrent use.
type Process struct {
	guard *exec.Cmd
	conn  *os.File
	pid   int
	grace time.Duration

	exited      chan struct{} // closed when the command exited (or the guard was lost)
	done        chan struct{} // closed when the guard reported the tree gone, or its socket closed
	terminating chan struct{}
	termOnce    sync.Once
	helpers     sync.WaitGroup

	// Written by the reader before it closes exited / done.
	status Status
	known  bool // an exit status was reported
	clean  bool // the guard reported the tree gone

	waitOnce sync.Once
	waitErr  error
}

// Start starts a guard for c and, through it, the command. It returns
// once the command runs, or an error when either could not be started
// (it never starts the command unguarded). An error wrapping ErrGuardLost
// means the guard ended before reporting the start, so the command may
// have run; its process group has been killed.
func Start(c Command) (*Process, error) {
	q, err := Prepare(c)
	if err != nil {
		return nil, err
	}
	return q.Run()
}

// errGuardGone reports that a guard ended before it had its command
// (the command was not sent), so the command never started.
var errGuardGone = errors.New("process guard ended before it had the command")

// A Pending is a guard ready for its command: the command starts when
// Run is called, and never once Abandon is.
type Pending struct {
	p       *Process
	spec    []byte
	sandbox *sandbox.Spec // for a guard started in place of one that ended
	stdio   []*os.File    // the command's, passed with spec; closed by Run or Abandon
	lines   *bufio.Reader
	used    bool
}

// Prepare readies a guard for c, which waits for the command: a spare
// when one is ready (see Warm), else one started now, whose own start (a
// process of its own) overlaps what the caller does before it calls Run
// — a checkpoint, say. An error means nothing was started. The caller
// calls Run or Abandon, and may close its copies of c's files once
// Prepare returned.
func Prepare(c Command) (*Pending, error) {
	spec, stdio, err := describe(c)
	if err != nil {
		return nil, fmt.Errorf("start process guard: %w", err)
	}
	var g *guardProc
	if c.Sandbox == nil || !c.Sandbox.NeedsNamespace() {
		g = takeSpare()
	}
	if g == nil {
		if g, err = startGuard(c.Sandbox); err != nil {
			closeAll(stdio)
			return nil, fmt.Errorf("start process guard: %w", err)
		}
	}
	p := &Process{
		guard: g.cmd, conn: g.conn, grace: c.Grace,
		exited: make(chan struct{}), done: make(chan struct{}), terminating: make(chan struct{}),
	}
	return &Pending{p: p, spec: spec, sandbox: c.Sandbox, stdio: stdio, lines: bufio.NewReaderSize(g.conn, maxLine)}, nil
}

// describe returns c's description for its guard and the files passed
// with it: duplicates of c's, which the caller may close.
func describe(c Command) ([]byte, []*os.File, error) {
	if c.Path == "" || len(c.Args) == 0 {
		return nil, nil, errors.New("no command")
	}
	if c.Sandbox != nil {
		if err := c.Sandbox.Validate(); err != nil {
			return nil, nil, err
		}
	}
	dir := c.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, nil, fmt.Errorf("working directory: %w", err)
		}
		dir = wd
	}
	gs := guardSpec{Path: c.Path, Args: c.Args, Env: withoutMarker(c.Env), Grace: c.Grace, Sandbox: c.Sandbox, Dir: dir}
	var stdio []*os.File
	for i, f := range []*os.File{c.Stdin, c.Stdout, c.Stderr} {
		if f == nil {
			continue
		}
		fd, err := dupCloexec(int(f.Fd()))
		if err != nil {
			closeAll(stdio)
			return nil, nil, fmt.Errorf("duplicate the command's standard descriptor %d: %w", i, err)
		}
		stdio = append(stdio, os.NewFile(uintptr(fd), f.Name()))
		gs.Stdio[i] = true
	}
	spec, err := json.Marshal(gs)
	if err != nil || len(spec) > maxSpec {
		closeAll(stdio)
		return nil, nil, fmt.Errorf("command description too large (%d bytes)", len(spec))
	}
	return spec, stdio, nil
}

// closeAll closes files.
func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// Run sends the guard its command and returns once the command runs, as
// Start does.
func (q *Pending) Run() (*Process, error) {
	if q.used {
		return nil, errors.New("process guard: used twice")
	}
	q.used = true
	p := q.p
	pid, err := p.hello(q.spec, q.stdio, q.lines)
	if errors.Is(err, errGuardGone) {
		// The guard ended before it had the command — a spare killed
		// after Prepare took it, by a command or by hand — so the
		// command never started: a guard started now runs it.
		if err = q.replaceGuard(); err == nil {
			pid, err = p.hello(q.spec, q.stdio, q.lines)
		}
	}
	closeAll(q.stdio)
	if errors.Is(err, errGuardGone) {
		// No command started, so no group to kill (the first guard is
		// reaped: its pid may be another's now).
		p.endGuard()
		return nil, err
	}
	if err != nil {
		p.killGroup()
		p.endGuard()
		return nil, err
	}
	p.pid = pid
	p.helpers.Add(2)
	go p.read(q.lines)
	go p.watchdog()
	return p, nil
}

// replaceGuard reaps q's guard, which ended before it had the command,
// and starts another in its place. An error wraps errGuardGone.
func (q *Pending) replaceGuard() error {
	q.p.endGuard()
	g, err := startGuard(q.sandbox)
	if err != nil {
		return fmt.Errorf("%w; start another: %w", errGuardGone, err)
	}
	q.p.guard, q.p.conn = g.cmd, g.conn
	q.lines = bufio.NewReaderSize(g.conn, maxLine)
	return nil
}

// Abandon ends the guard without its command, which never starts.
func (q *Pending) Abandon() {
	if q.used {
		return
	}
	q.used = true
	closeAll(q.stdio)
	q.p.endGuard()
}

// endGuard kills the guard, closes its socket and reaps it.
func (p *Process) endGuard() {
	p.guard.Process.Kill()
	p.conn.Close()
	p.guard.Wait()
}

// hello sends the guard its command, with the command's standard
// descriptors, and reads its first report: the command's pid, or why it
// could not be started.
func (p *Process) hello(spec []byte, stdio []*os.File, lines *bufio.Reader) (int, error) {
	p.conn.SetDeadline(time.Now().Add(startTimeout))
	defer p.conn.SetDeadline(time.Time{})
	if err := sendSpec(p.conn, spec, stdio); err != nil {
		if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
			return 0, fmt.Errorf("%w: %w", errGuardGone, err)
		}
		return 0, fmt.Errorf("process guard: send command: %w", err)
	}
	verb, arg, err := readLine(lines)
	if err != nil {
		// The guard may have started the command and died (or been
		// stopped) before reporting it: the command may have run.
		return 0, fmt.Errorf("%w before reporting the command's start (%v): the command may have run", ErrGuardLost, err)
	}
	switch verb {
	case "started":
		pid, err := strconv.Atoi(arg)
		if err != nil || pid <= 0 {
			return 0, fmt.Errorf("process guard: bad report %q", verb+" "+arg)
		}
		return pid, nil
	case "failed":
		return 0, errors.New(arg)
	}
	return 0, fmt.Errorf("process guard: unexpected report %q", verb)
}

// sendSpec writes "spec N\n", with the descriptors of stdio attached,
// then the N bytes of spec to conn.
func sendSpec(conn *os.File, spec []byte, stdio []*os.File) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	header := []byte("spec " + strconv.Itoa(len(spec)) + "\n")
	fds := make([]int, len(stdio))
	for i, f := range stdio {
		fds[i] = int(f.Fd())
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	var serr error
	werr := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), header, oob, nil, 0)
		return serr != unix.EAGAIN
	})
	if err := cmp.Or(werr, serr); err != nil {
		return err
	}
	_, err = conn.Write(spec)
	return err
}

// readLine reads one protocol line and splits off its verb.
func readLine(r *bufio.Reader) (verb, arg string, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", "", errors.New("protocol line too long")
		}
		return "", "", err
	}
	verb, arg, _ = strings.Cut(strings.TrimSuffix(string(line), "\n"), " ")
	return verb, arg, nil
}

// read consumes the guard's reports until it reports the tree gone
// ("done" after the status) or its socket closes.
func (p *Process) read(lines *bufio.Reader) {
	defer p.helpers.Done()
	exitedClosed := false
	for {
		verb, arg, err := readLine(lines)
		if err != nil {
			break
		}
		switch verb {
		case "exited":
			if st, ok := parseStatus(arg); ok && !exitedClosed {
				p.status, p.known = st, true
				close(p.exited)
				exitedClosed = true
			}
		case "done":
			p.clean = p.known
		}
		if p.clean {
			break // the guard's last word: it is exiting
		}
	}
	if !exitedClosed {
		p.status = Status{Code: -1}
		close(p.exited)
	}
	close(p.done)
}

// parseStatus decodes "CODE SIGNAL".
func parseStatus(s string) (Status, bool) {
	a, b, ok := strings.Cut(s, " ")
	code, err1 := strconv.Atoi(a)
	sig, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || sig < 0 {
		return Status{}, false
	}
	return Status{Code: code, Signal: syscall.Signal(sig)}, true
}

// watchdog kills a guard that has been asked to stop the tree (or whose
// command exited) but has not reported the tree gone within the grace
// period and a slack: a guard the command stopped (kill -STOP $PPID) must
// not hang octet.
func (p *Process) watchdog() {
	defer p.helpers.Done()
	select {
	case <-p.exited:
	case <-p.terminating:
	case <-p.done:
		return
	}
	t := time.NewTimer(p.grace + guardSlack)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.guard.Process.Kill()
	}
}

// Pid returns the command's process id (also its process group id).
func (p *Process) Pid() int { return p.pid }

// Exited is closed when the command has exited (its descendants may still
// run until the guard has stopped them; see Wait), or when the guard was
// lost.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Terminate asks the guard to stop the command's whole process tree:
// SIGTERM to every process, SIGKILL after the grace period. It does not
// wait; call Wait. Calling it again has no further effect.
func (p *Process) Terminate() {
	p.termOnce.Do(func() {
		close(p.terminating)
		p.conn.Write([]byte("terminate\n")) // EPIPE: the guard is gone already
	})
}

// Wait waits until the command has exited and the guard has stopped every
// process the command left behind (after the command exits by itself the
// guard stops them too: nothing outlives the call). It returns the
// command's status; an error wrapping ErrGuardLost means the guard ended
// without confirming that (see ErrGuardLost). A guard that confirmed it is
// reaped in the background — its own exit, a Go program's, takes about a
// tenth of a short command's call — and a lost one before Wait returns.
func (p *Process) Wait() (Status, error) {
	p.waitOnce.Do(func() {
		<-p.done
		p.helpers.Wait()
		p.conn.Close()
		if p.clean {
			reaping.Go(func() { p.guard.Wait() })
			return
		}
		p.killGroup() // before the guard is reaped: see killGroup
		gerr := p.guard.Wait()
		p.waitErr = fmt.Errorf("%w (%v)", ErrGuardLost, gerr)
	})
	return p.status, p.waitErr
}

// reaping counts the guards being reaped in the background.
var reaping sync.WaitGroup

// WaitReaped waits until every guard whose Wait has returned is reaped:
// for a measurement of the CPU time of a process's children, which
// counts a child only once it is reaped. No Wait may return meanwhile
// (sync.WaitGroup's rule), so it is for a caller that runs its commands
// one at a time.
func WaitReaped() { reaping.Wait() }

// killGroup SIGKILLs the command's process group when its guard is lost.
// On Linux that group is the guard's own, whose id cannot be reused while
// the guard is not reaped (the id is the guard's pid); elsewhere it is
// the command's group, signalled only if it still exists.
func (p *Process) killGroup() {
	pgid := fallbackGroup(p.guard.Process.Pid, p.pid)
	if pgid > 0 && unix.Kill(-pgid, 0) == nil {
		unix.Kill(-pgid, unix.SIGKILL)
	}
}

// withoutMarker returns env without the guard marker, so nothing the
// command runs is turned into a guard.
func withoutMarker(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, markerEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}
