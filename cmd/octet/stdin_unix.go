//go:build unix

package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// interruptibleStdin returns in unchanged unless it is os.Stdin on a pipe
// or socket (how editors start `octet lsp`). Then it returns a new *os.File
// for descriptor 0 in non-blocking mode, which the Go runtime poller
// serves: closing it interrupts a blocked Read, so the server ends as soon
// as the editor sends exit even when the editor keeps its end of the pipe
// open. (os.Stdin itself is in blocking mode; its Read cannot be
// interrupted and the server would wait out its close timeout.) Terminals
// and files are left alone: their mode is shared with other processes.
func interruptibleStdin(in io.Reader) io.Reader {
	f, ok := in.(*os.File)
	if !ok || f != os.Stdin {
		return in
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return in
	}
	fd := int(f.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		return in
	}
	return os.NewFile(uintptr(fd), "/dev/stdin")
}
