package tools

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe enlarges a pipe's kernel buffer to 1 MiB (the unprivileged
// maximum) so draining needs fewer wakeups; failure is harmless.
func growPipe(f *os.File) {
	if sc, err := f.SyscallConn(); err == nil {
		sc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
	}
}
