//go:build !linux

package osfile

import (
	"errors"
	"os"
)

// RangeLockable reports whether RangeLock works on f: never here (macOS
// has no open-file-description locks, and its POSIX locks are dropped
// when the process closes any descriptor of the file).
func RangeLockable(f *os.File) bool { return false }

// RangeLock is not supported on this platform.
func RangeLock(f *os.File, exclusive bool) (ok bool, err error) {
	return false, errors.New("byte-range holder locks are not supported on this platform")
}
