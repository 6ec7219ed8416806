package osfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// liveOffset is the byte the writer-presence lock covers: far past any
// file a caller keeps (sessions stop at 256 MiB), so it never meets a
// lock on the data, and an open-file-description lock, independent of
// the flock that Lock takes on Linux.
const liveOffset = 1 << 62

// LockLive advertises f's holder as a live writer of the file: a shared
// open-file-description lock (F_OFD_SETLK) on a byte past the data, held
// until f is closed (or the process dies, however it dies). It first
// tries the lock exclusively: alone reports that no other open
// description held it, so no other writer is live. The caller holds
// the file's exclusive Lock, so no other writer is between the two
// steps. Platforms without open-file-description locks return an error
// wrapping [errors.ErrUnsupported].
func LockLive(f *os.File) (alone bool, err error) {
	alone = true
	if err := ofdLock(f, unix.F_WRLCK); err != nil {
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) {
			return false, err
		}
		alone = false
	}
	// From exclusive to shared (or shared beside the others): other
	// writers take it too.
	return alone, ofdLock(f, unix.F_RDLCK)
}

func ofdLock(f *os.File, typ int16) error {
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: liveOffset, Len: 1}
	for {
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// LiveHeld reports whether a live writer holds f's file (its LockLive),
// through any open description other than f's own.
func LiveHeld(f *os.File) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: liveOffset, Len: 1}
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
