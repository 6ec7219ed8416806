//go:build unix

package main

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// editorStdio gives an editor protocol (octet lsp, octet acp) its standard
// streams in the form the Go runtime poller serves, wherever they are
// pipes or sockets (how editors start octet); terminals and files are left
// alone, their mode being shared with other processes.
//
//   - stdin: closing a pollable file interrupts a blocked Read, so the
//     server ends as soon as the editor sends exit even when the editor
//     keeps its end of the pipe open.
//   - stdout: a pollable file takes write deadlines, which let the server
//     write a delta straight from the run without ever waiting on a slow
//     editor (server's direct writes).
//   - A descriptor that shares its open file description with one of those
//     (one socket as stdin and stdout, as socat's EXEC gives; stderr on
//     the same pipe) is in non-blocking mode with it, and a file the
//     runtime does not poll would fail its writes with EAGAIN when the
//     buffer is full: each such stream is made pollable too.
//
// restore puts back the blocking mode of the descriptors it changed (the
// editor may share their file descriptions); call it when the protocol
// has ended.
func editorStdio(e env) (_ env, restore func()) {
	var changed []int
	if f, ok := e.stdin.(*os.File); ok {
		if p := pollableStdio(f, 0, "/dev/stdin"); p != f {
			e.stdin, changed = p, append(changed, 0)
		}
	}
	if f, ok := e.stdout.(*os.File); ok {
		if p := pollableStdio(f, 1, "/dev/stdout"); p != f {
			e.stdout, changed = p, append(changed, 1)
		}
	}
	if f, ok := e.stderr.(*os.File); ok && f == os.Stderr && !polled(f) {
		if fl, err := unix.FcntlInt(2, unix.F_GETFL, 0); err == nil && fl&unix.O_NONBLOCK != 0 {
			e.stderr = os.NewFile(2, "/dev/stderr")
		}
	}
	return e, func() {
		for _, fd := range changed {
			_ = unix.SetNonblock(fd, false)
		}
	}
}

// pollableStdio returns, for f being standard stream fd on a pipe or
// socket, a new *os.File for fd in non-blocking mode; f otherwise.
func pollableStdio(f *os.File, fd int, name string) *os.File {
	if polled(f) || int(f.Fd()) != fd { // (Fd leaves an unpolled file as it is)
		return f
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return f
	}
	return os.NewFile(uintptr(fd), name)
}

// polled reports whether the runtime poller serves f already (it takes a
// deadline).
func polled(f *os.File) bool { return f.SetDeadline(time.Time{}) == nil }
