package osfile

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// LockLive advertises f's holder as a live writer of the file: the same
// shared byte-range lock RangeLock takes (an open-file-description lock
// on a byte past the data, held until f is closed or the process dies,
// however it dies). It first tries the lock exclusively: alone reports
// that no other open description held it, so no other writer is live.
// The caller holds the file's exclusive Lock, so no other writer is
// between the two steps. Where RangeLock does not work beside Lock (not
// a local file system) it returns an error wrapping
// [errors.ErrUnsupported].
func LockLive(f *os.File) (alone bool, err error) {
	if !RangeLockable(f) {
		return false, fmt.Errorf("writer presence: %w", errors.ErrUnsupported)
	}
	if alone, err = RangeLock(f, true); err != nil {
		return false, err
	}
	// From exclusive to shared (or shared beside the others): other
	// writers take it too.
	_, err = RangeLock(f, false)
	return alone, err
}

// LiveHeld reports whether a live writer holds f's file (its LockLive or
// RangeLock), through any open description other than f's own.
func LiveHeld(f *os.File) (bool, error) {
	if !RangeLockable(f) {
		return false, fmt.Errorf("writer presence: %w", errors.ErrUnsupported)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: holdOffset, Len: 1}
	for {
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, err
		}
		return lk.Type != unix.F_UNLCK, nil
	}
}
