//go:build unix

package main

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ttyPath is the controlling terminal.
const ttyPath = "/dev/tty"

// isTerminal reports whether f is an interactive terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	return err == nil
}

// noEcho turns off tty's echo (keeping line editing) and returns what
// turns it back on.
func noEcho(tty io.ReadWriteCloser) (restore func(), err error) {
	f, ok := tty.(*os.File)
	if !ok {
		return nil, errors.New("not a terminal")
	}
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &quiet); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, ioctlSetTermios, old) }, nil
}
