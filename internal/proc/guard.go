//go:build unix

package proc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// init turns the process into a guard when it was started as one. It
// never returns in guard mode. A marker without the guard's socket on
// descriptor 3 (someone set the variable by hand) is removed and ignored.
func init() {
	if os.Getenv(markerEnv) != markerValue {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(guardFD, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		os.Unsetenv(markerEnv)
		return
	}
	code := runGuard()
	// syscall.Exit, not os.Exit: no exit hooks run, and a
	// race-instrumented binary skips its one-second exit sleep.
	syscall.Exit(code)
}

// stopTick is how often a stopping guard checks whether the tree is gone and
// signals processes that appeared since its last look.
const stopTick = 20 * time.Millisecond

// killGiveUp bounds how long a guard keeps killing processes that do not
// die (a setuid program it may not signal, a process stuck in the
// kernel) before it exits anyway.
const killGiveUp = 10 * time.Second

// guard is the state of a guard process.
type guard struct {
	self  int
	shell int // the command's pid and process group id
	grace time.Duration
	conn  *os.File
	r     *bufio.Reader // reads conn
	// events carries, in order, what the reaper, the socket reader and
	// the signal catcher observed.
	events chan event
}

type eventKind int

const (
	evExited     eventKind = iota // the command exited (status set)
	evTerminate                   // octet asked to stop the tree
	evParentGone                  // the socket reached EOF: octet died
)

type event struct {
	kind   eventKind
	status unix.WaitStatus
}

// runGuard is the guard's main. It returns the exit code.
func runGuard() int {
	unix.CloseOnExec(guardFD)
	conn := os.NewFile(guardFD, "octet")
	g := &guard{self: os.Getpid(), conn: conn, events: make(chan event, 16)}
	// What needs no command is done while octet prepares the call (a
	// guard is started ahead of its command): the command starts as soon
	// as its description arrives.
	catchStopSignals()
	if err := prepareGuard(); err != nil {
		g.send("failed", fmt.Sprintf("process guard: %v", err))
		return 1
	}
	spec, stdio, err := g.receive()
	if err != nil {
		g.send("failed", fmt.Sprintf("process guard: %v", err))
		return 2
	}
	g.grace = spec.Grace
	path, args := spec.Path, spec.Args
	if spec.Sandbox != nil {
		// From here on this goroutine stays on its thread, which starts
		// the command (see sandbox.Apply).
		if path, args, err = confine(spec.Sandbox, path, args); err != nil {
			g.send("failed", fmt.Sprintf("the sandbox could not be applied, so the command was not run: %v", err))
			return 1
		}
	}
	pid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   spec.Env,
		Files: stdio[:],
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pgid: commandGroup(g.self)},
	})
	// Only the command holds octet's pipes, so they reach EOF when its
	// tree is gone.
	for _, fd := range stdio {
		if fd > 2 {
			unix.Close(int(fd))
		}
	}
	if err != nil {
		g.send("failed", fmt.Sprintf("%s: %v", spec.Path, err))
		return 1
	}
	g.shell = pid
	g.send("started", strconv.Itoa(pid))
	go g.reap()
	go g.listen()
	g.supervise()
	return 0
}

// receive reads the command octet sends first — "spec N\n" with the
// command's standard descriptors attached, then N bytes of JSON — and
// returns it with the descriptors the command gets as 0, 1 and 2 (the
// guard's own /dev/null for those not passed). It sets g.r, which reads
// the rest of the socket.
func (g *guard) receive() (guardSpec, [3]uintptr, error) {
	stdio := [3]uintptr{0, 1, 2}
	// The descriptors come with the header's first bytes, which a plain
	// read would drop (closing them): the first read is a recvmsg.
	buf := make([]byte, maxLine)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := unix.Recvmsg(guardFD, buf, oob, 0)
	for err == unix.EINTR {
		n, oobn, _, _, err = unix.Recvmsg(guardFD, buf, oob, 0)
	}
	if err != nil {
		return guardSpec{}, stdio, fmt.Errorf("read command: %w", err)
	}
	fds, err := rights(oob[:oobn])
	if err != nil {
		return guardSpec{}, stdio, err
	}
	g.r = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(buf[:n]), g.conn), maxLine)
	spec, err := g.readSpec()
	if err != nil {
		return spec, stdio, err
	}
	for i, passed := range spec.Stdio {
		if !passed {
			continue
		}
		if len(fds) == 0 {
			return spec, stdio, errors.New("the command's standard descriptors are missing")
		}
		stdio[i], fds = uintptr(fds[0]), fds[1:]
	}
	if len(fds) > 0 {
		return spec, stdio, errors.New("more descriptors than the command has")
	}
	return spec, stdio, nil
}

// rights returns the descriptors passed in the control messages oob,
// each made close-on-exec (the command gets its own through dup2).
func rights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("read command: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			return nil, fmt.Errorf("read command: %w", err)
		}
		fds = append(fds, got...)
	}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
	}
	return fds, nil
}

// readSpec reads "spec N\n" and N bytes of JSON through g.r.
func (g *guard) readSpec() (guardSpec, error) {
	var spec guardSpec
	verb, arg, err := readLine(g.r)
	if err != nil {
		return spec, fmt.Errorf("read command: %w", err)
	}
	n, err := strconv.Atoi(arg)
	if verb != "spec" || err != nil || n < 0 || n > maxSpec {
		return spec, fmt.Errorf("bad command header %q", verb)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(g.r, buf); err != nil {
		return spec, fmt.Errorf("read command: %w", err)
	}
	if err := json.Unmarshal(buf, &spec); err != nil {
		return spec, fmt.Errorf("decode command: %w", err)
	}
	if spec.Path == "" || len(spec.Args) == 0 || spec.Grace < 0 || spec.Dir == "" {
		return spec, errors.New("incomplete command")
	}
	return spec, nil
}

// catchStopSignals catches and drops SIGTERM, SIGINT, SIGHUP and SIGQUIT:
// the signals a terminal, an editor or a command's kill of its group
// (kill 0, kill -HUP 0) sends, which would otherwise end the guard before
// it cleans up. A signal octet itself ignored stays ignored (the command
// inherits that, as it would without a guard); a caught one is reset to
// its default in the command by exec. Other signals sent to the guard on
// purpose (SIGKILL, SIGSTOP, which cannot be caught, or SIGUSR1) are the
// out-of-scope "command kills its guard" case: each caught signal costs
// the guard about 0.1 ms (a round trip to the runtime's signal thread),
// before its command arrives when it was started ahead, so the list is
// kept to these four.
func catchStopSignals() {
	ch := make(chan os.Signal, 4)
	for _, s := range []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		if !signal.Ignored(s) {
			signal.Notify(ch, s)
		}
	}
	go func() {
		for range ch {
		}
	}()
}

// send writes one report line to octet; a dead octet is noticed by the
// reader, so write errors are ignored.
func (g *guard) send(verb, arg string) {
	line := verb
	if arg != "" {
		line += " " + strings.ReplaceAll(arg, "\n", " ")
	}
	if len(line) >= maxLine {
		line = line[:maxLine-1]
	}
	g.conn.Write([]byte(line + "\n"))
}

// reap collects every child: the command, and every orphan reparented to
// the guard. Once the guard has no child left no process can become one
// (only descendants are reparented to a subreaper), so it returns.
func (g *guard) reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		if pid == g.shell {
			g.events <- event{kind: evExited, status: ws}
		}
	}
}

// listen turns octet's requests into events; EOF means octet died.
func (g *guard) listen() {
	for {
		verb, _, err := readLine(g.r)
		if err != nil {
			g.events <- event{kind: evParentGone}
			return
		}
		if verb == "terminate" {
			g.events <- event{kind: evTerminate}
		}
	}
}

// supervise runs until the command's tree is gone: stopped after the
// command exited or octet asked, or killed at once when octet died.
func (g *guard) supervise() {
	var (
		stopping bool
		reported bool
		deadline <-chan time.Time
		tick     <-chan time.Time
	)
	termed := map[procKey]bool{}
	stop := func() {
		stopping = true
		g.signalTree(unix.SIGTERM, termed)
		deadline = time.After(g.grace)
		t := time.NewTicker(stopTick)
		tick = t.C
	}
	for done := false; !done; {
		select {
		case ev := <-g.events:
			switch ev.kind {
			case evExited:
				g.reportExit(ev.status)
				reported = true
				if !stopping {
					if g.treeGone() {
						done = true
						break
					}
					stop()
				}
			case evTerminate:
				if !stopping {
					stop()
				}
			case evParentGone:
				g.killTree()
				return
			}
		case <-tick:
			if g.treeGone() {
				done = true
				break
			}
			g.signalTree(unix.SIGTERM, termed)
		case <-deadline:
			if !g.killTree() {
				return // octet sees no "done": ErrGuardLost
			}
			done = true
		}
	}
	// The tree is gone, so the command was reaped; its status is on its
	// way if it was not reported yet.
	for !reported {
		ev := <-g.events
		switch ev.kind {
		case evExited:
			g.reportExit(ev.status)
			reported = true
		case evParentGone:
			return
		}
	}
	g.send("done", "")
}

// reportExit sends the command's exit status.
func (g *guard) reportExit(ws unix.WaitStatus) {
	code, sig := ws.ExitStatus(), 0
	if ws.Signaled() {
		code, sig = -1, int(ws.Signal())
	}
	g.send("exited", strconv.Itoa(code)+" "+strconv.Itoa(sig))
}

// killTree SIGKILLs every process of the tree until none is left (a
// process that forks meanwhile has its children reparented to the guard
// and killed in the next round). It reports false when it gave up after
// killGiveUp.
func (g *guard) killTree() bool {
	giveUp := time.Now().Add(killGiveUp)
	pause := time.Millisecond
	for !g.treeGone() {
		if time.Now().After(giveUp) {
			return false
		}
		g.signalTree(unix.SIGKILL, nil)
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	return true
}

// procKey identifies one process across pid reuse.
type procKey struct {
	pid   int
	start uint64
}
