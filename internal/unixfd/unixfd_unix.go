//go:build unix

package unixfd

import "golang.org/x/sys/unix"

// Stat_t is unix.Stat_t.
type Stat_t = unix.Stat_t

// The flags, modes and errors of golang.org/x/sys/unix.
const (
	O_RDONLY    = unix.O_RDONLY
	O_DIRECTORY = unix.O_DIRECTORY
	O_NOFOLLOW  = unix.O_NOFOLLOW
	O_CLOEXEC   = unix.O_CLOEXEC
	O_NONBLOCK  = unix.O_NONBLOCK
	O_NOCTTY    = unix.O_NOCTTY
	S_IFMT      = unix.S_IFMT
	S_IFREG     = unix.S_IFREG
	ENOTDIR     = unix.ENOTDIR
	EINTR       = unix.EINTR
)

// Openat is unix.Openat.
func Openat(dirfd int, path string, flags int, mode uint32) (int, error) {
	return unix.Openat(dirfd, path, flags, mode)
}

// Close is unix.Close.
func Close(fd int) error { return unix.Close(fd) }

// Dup is unix.Dup.
func Dup(fd int) (int, error) { return unix.Dup(fd) }

// Fstat is unix.Fstat.
func Fstat(fd int, st *Stat_t) error { return unix.Fstat(fd, st) }

// Read is unix.Read.
func Read(fd int, p []byte) (int, error) { return unix.Read(fd, p) }
