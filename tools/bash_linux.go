package tools

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// growPipe enlarges a pipe's kernel buffer to 1 MiB (the unprivileged
// maximum) so draining needs fewer wakeups; failure is harmless.
func growPipe(f *os.File) {
	if sc, err := f.SyscallConn(); err == nil {
		sc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
	}
}

// groupAlive reports whether process group pgid still has a member that
// is not a zombie. Zombies are ignored because a reparented grandchild may
// wait for an init process that reaps lazily; it no longer runs.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	d, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return true
	}
	want := []byte(strconv.Itoa(pgid))
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) >= 3 && bytes.Equal(f[2], want) && f[0][0] != 'Z' {
			return true
		}
	}
	return false
}

// watchExit closes the returned channel when the started shell exits,
// without reaping it (waitid with WNOWAIT): until reap (cmd.Wait) runs,
// the zombie keeps its pid, so the process group id cannot be reused by
// an unrelated group while stopGroup signals it. If waitid itself fails,
// the watcher falls back to reaping with cmd.Wait.
func watchExit(cmd *exec.Cmd) (<-chan struct{}, func() error) {
	done := make(chan struct{})
	pid := cmd.Process.Pid
	var (
		reaped  bool
		waitErr error
	)
	go func() {
		defer close(done)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				reaped, waitErr = true, cmd.Wait()
			}
			return
		}
	}()
	return done, func() error {
		<-done
		if reaped {
			return waitErr
		}
		return cmd.Wait()
	}
}
