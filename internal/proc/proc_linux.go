package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/octet-agent/octet/internal/sandbox"
	"golang.org/x/sys/unix"
)

// guardExecutable is the running binary itself: /proc/self/exe resolves to
// the executing image even when the file on disk was replaced or removed.
func guardExecutable() (string, error) { return "/proc/self/exe", nil }

// socketPair returns a connected stream socket pair, close-on-exec, so no
// other child of octet inherits either end.
func socketPair() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
}

// commandGroup is the process group the command joins: the guard's own
// (octet made the guard its leader). Octet can then kill the command's
// group when the guard is lost without having heard the command's pid,
// and the group id stays reserved until octet reaps the guard. A
// command's kill 0 reaches the guard too, which catches such signals.
func commandGroup(self int) int { return self }

// fallbackGroup is the group octet kills when the guard is lost.
func fallbackGroup(guard, command int) int { return guard }

// prepareGuard makes the guard a child subreaper: descendants orphaned by
// their parent's exit (double forks, setsid'd daemons) become its children
// instead of init's, so it can find, kill and reap them.
func prepareGuard() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}

// treeGone reports whether the guard has no child left, living or zombie.
// Every descendant of a subreaper is a child or has a living ancestor
// that is one, so this means the whole tree is gone.
func (g *guard) treeGone() bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		return errors.Is(err, unix.ECHILD)
	}
}

// signalTree sends sig to every living descendant of the guard, found by
// following parent links in /proc; SIGTERM is followed by SIGCONT, so a
// stopped process gets to handle it too. With once non-nil a process that
// was already signalled (same pid and start time) is skipped and the
// others are recorded.
func (g *guard) signalTree(sig unix.Signal, once map[procKey]bool) {
	for _, p := range descendants(g.self) {
		if p.zombie {
			continue
		}
		k := procKey{p.pid, p.start}
		if once != nil {
			if once[k] {
				continue
			}
			once[k] = true
		}
		signalProcess(k, sig)
		if sig == unix.SIGTERM {
			signalProcess(k, unix.SIGCONT)
		}
	}
}

// procInfo is what /proc/PID/stat says about one process.
type procInfo struct {
	pid, ppid int
	start     uint64 // start time in clock ticks after boot
	zombie    bool
}

// descendants lists every process whose parent chain leads to root.
func descendants(root int) []procInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	children := map[int][]procInfo{}
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []procInfo
	queue := []int{root}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		for _, c := range children[parent] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// readStat parses /proc/PID/stat: "pid (comm) state ppid ... starttime".
func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22
	// (starttime).
	if len(f) < 20 || len(f[0]) == 0 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return procInfo{}, false
	}
	return procInfo{pid: pid, ppid: ppid, start: start, zombie: f[0][0] == 'Z' || f[0][0] == 'X'}, true
}

// signalProcess signals the process k names and no other: it opens a
// pidfd, then checks that the pid still carries k's start time, so a pid
// freed and reused since the scan is never signalled. (A pidfd cannot be
// retargeted; without pidfd support the check is made just before kill.)
func signalProcess(k procKey, sig unix.Signal) {
	fd, err := unix.PidfdOpen(k.pid, 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			if p, ok := readStat(k.pid); ok && p.start == k.start {
				unix.Kill(k.pid, sig)
			}
		}
		return
	}
	defer unix.Close(fd)
	if p, ok := readStat(k.pid); !ok || p.start != k.start {
		return
	}
	unix.PidfdSendSignal(fd, sig, nil, 0)
}

// confine applies the sandbox to the guard's current thread, which then
// starts the command (from the same goroutine, locked to it).
func confine(s *sandbox.Spec, path string, args []string) (string, []string, error) {
	return path, args, sandbox.Apply(s)
}

// alive reports whether g has not exited (a spare someone killed is not
// used).
func (g *guardProc) alive() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, g.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo == 0 // no state change to report
}
