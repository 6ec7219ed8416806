// On Windows there is no guard process: each command runs in a job object
// of its own, created with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, so the
// whole tree dies when octet closes the job's only handle — on Wait, and
// when octet dies by any means, since the kernel closes its handles. The
// command is assigned to the job right after it starts: a process it
// starts in that first instant (before the assignment) is not in the job.
// Terminate kills the tree at once (TerminateJobObject); Windows has no
// SIGTERM to give it a grace period first.

package proc

import (
	"fmt"
	"os/exec"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Process is a command running in its job object. Its methods are safe
// for concurrent use.
type Process struct {
	cmd    *exec.Cmd
	job    windows.Handle
	exited chan struct{}

	status  Status
	waitErr error

	mu       sync.Mutex // guards closed (the job handle's lifetime)
	closed   bool
	waitOnce sync.Once
}

// A Pending is a command not started yet (Windows has no guard process
// to start ahead of it).
type Pending struct{ c Command }

// Prepare returns c to be started by Run (or never, by Abandon).
func Prepare(c Command) (*Pending, error) { return &Pending{c: c}, nil }

// Run starts the command, as Start does.
func (q *Pending) Run() (*Process, error) { return Start(q.c) }

// Abandon gives up the command, which never starts.
func (q *Pending) Abandon() {}

// Start starts c in a new job object that kills every process in it when
// it is closed. It never runs the command outside a job: if the job
// cannot be created or the process not assigned, the process is killed
// and Start fails.
func Start(c Command) (*Process, error) {
	if c.Path == "" || len(c.Args) == 0 {
		return nil, fmt.Errorf("start command: no command")
	}
	if c.Sandbox != nil {
		return nil, fmt.Errorf("start command: Windows has no sandbox; the command was not run")
	}
	job, err := newKillOnCloseJob()
	if err != nil {
		return nil, fmt.Errorf("start command: job object: %w", err)
	}
	cmd := &exec.Cmd{Path: c.Path, Args: c.Args, Dir: c.Dir, Env: withoutMarker(c.Env)}
	if c.Stdin != nil {
		cmd.Stdin = c.Stdin
	}
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	}
	if c.Stderr != nil {
		cmd.Stderr = c.Stderr
	}
	if err := cmd.Start(); err != nil {
		windows.CloseHandle(job)
		return nil, fmt.Errorf("start command: %w", err)
	}
	if err := assign(job, cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		windows.CloseHandle(job)
		return nil, fmt.Errorf("start command: assign to job object: %w", err)
	}
	p := &Process{cmd: cmd, job: job, exited: make(chan struct{})}
	go p.wait()
	return p, nil
}

func newKillOnCloseJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, err
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return 0, err
	}
	return job, nil
}

func assign(job windows.Handle, pid int) error {
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	return windows.AssignProcessToJobObject(job, h)
}

// wait reaps the command, then kills whatever it left in the job.
func (p *Process) wait() {
	err := p.cmd.Wait()
	p.status = Status{Code: p.cmd.ProcessState.ExitCode()}
	if _, ok := err.(*exec.ExitError); !ok && err != nil {
		p.waitErr = fmt.Errorf("wait for command: %w", err)
	}
	close(p.exited)
}

// Pid returns the command's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the command has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Terminate kills every process in the command's job at once. It does not
// wait; call Wait.
func (p *Process) Terminate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		windows.TerminateJobObject(p.job, 1)
	}
}

// Wait waits until the command has exited, kills every process it left in
// its job and closes the job. It returns the command's status.
func (p *Process) Wait() (Status, error) {
	p.waitOnce.Do(func() {
		<-p.exited
		p.Terminate()
		p.mu.Lock()
		p.closed = true
		windows.CloseHandle(p.job)
		p.mu.Unlock()
	})
	return p.status, p.waitErr
}

// withoutMarker returns env unchanged: there is no guard mode on Windows.
func withoutMarker(env []string) []string { return env }

// Warm does nothing: Windows starts no guard.
func Warm() {}

// StopSpares does nothing: Windows starts no guard.
func StopSpares() {}
