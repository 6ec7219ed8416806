//go:build unix

package main

import (
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
