//go:build !linux

package osfile

import (
	"errors"
	"os"
)

// LockLive advertises f's holder as a live writer of the file and reports
// whether it is alone; it is implemented on Linux only (see live_linux.go):
// here it returns an error wrapping [errors.ErrUnsupported].
func LockLive(f *os.File) (alone bool, err error) {
	return false, errors.ErrUnsupported
}

// LiveHeld reports whether a live writer holds f's file; implemented on
// Linux only: here it returns an error wrapping [errors.ErrUnsupported].
func LiveHeld(f *os.File) (bool, error) {
	return false, errors.ErrUnsupported
}
