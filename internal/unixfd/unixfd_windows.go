package unixfd

import (
	"errors"
	"syscall"
)

// ErrUnsupported is every call's error on Windows.
var ErrUnsupported = errors.New("descriptor-relative no-follow file access is not supported on windows yet")

// Stat_t holds the fields the walkers read.
type Stat_t struct {
	Mode uint32
	Size int64
}

// Flags and modes with the Unix values (never passed to Windows).
const (
	O_RDONLY    = 0x0
	O_DIRECTORY = 0x10000
	O_NOFOLLOW  = 0x20000
	O_CLOEXEC   = 0x80000
	O_NONBLOCK  = 0x800
	O_NOCTTY    = 0x100
	S_IFMT      = 0xf000
	S_IFREG     = 0x8000
)

// The errors the walkers compare against.
const (
	ENOTDIR = syscall.ENOTDIR
	EINTR   = syscall.EINTR
)

// Openat fails with ErrUnsupported.
func Openat(dirfd int, path string, flags int, mode uint32) (int, error) {
	return -1, ErrUnsupported
}

// Close does nothing.
func Close(fd int) error { return nil }

// Dup fails with ErrUnsupported.
func Dup(fd int) (int, error) { return -1, ErrUnsupported }

// Fstat fails with ErrUnsupported.
func Fstat(fd int, st *Stat_t) error { return ErrUnsupported }

// Read fails with ErrUnsupported.
func Read(fd int, p []byte) (int, error) { return 0, ErrUnsupported }
