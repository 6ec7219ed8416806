package unixfd

import (
	"syscall"

	"github.com/octet-agent/octet/internal/winat"
	"golang.org/x/sys/windows"
)

// On Windows a descriptor is a handle (as os.File.Fd returns it) and
// Openat is winat.Open: one component opened with NtCreateFile relative to
// the directory handle, FILE_OPEN_REPARSE_POINT, and a reparse point
// refused (so O_NOFOLLOW always holds).

// Stat_t holds the fields the walkers read.
type Stat_t struct {
	Mode uint32
	Size int64
}

// Flags and modes with the Unix values; Openat reads O_DIRECTORY, the
// rest hold on Windows by construction (no-follow, no inheritance, never
// a controlling terminal; a regular file never blocks).
const (
	O_RDONLY    = 0x0
	O_DIRECTORY = 0x10000
	O_NOFOLLOW  = 0x20000
	O_CLOEXEC   = 0x80000
	O_NONBLOCK  = 0x800
	O_NOCTTY    = 0x100
	S_IFMT      = 0xf000
	S_IFREG     = 0x8000
	s_IFDIR     = 0x4000
	s_IFLNK     = 0xa000
	s_IFCHR     = 0x2000
	s_IFIFO     = 0x1000
)

// The errors the walkers compare against.
const (
	ENOTDIR = syscall.ENOTDIR
	EINTR   = syscall.EINTR
)

// Openat opens the single component name relative to the directory
// handle dirfd, never through a reparse point: for reading, or as a
// directory (FILE_LIST_DIRECTORY) with O_DIRECTORY.
func Openat(dirfd int, path string, flags int, mode uint32) (int, error) {
	access := uint32(windows.FILE_GENERIC_READ)
	if flags&O_DIRECTORY != 0 {
		access = windows.FILE_LIST_DIRECTORY | windows.FILE_TRAVERSE
	}
	h, info, err := winat.Open(windows.Handle(dirfd), path, access, windows.FILE_OPEN, 0, 0)
	if err != nil {
		return -1, err
	}
	if flags&O_DIRECTORY != 0 && !winat.IsDir(info) {
		windows.CloseHandle(h)
		return -1, ENOTDIR
	}
	return int(h), nil
}

// Close closes the handle fd.
func Close(fd int) error { return windows.CloseHandle(windows.Handle(fd)) }

// Dup duplicates the handle fd.
func Dup(fd int) (int, error) {
	h, err := winat.Dup(windows.Handle(fd))
	if err != nil {
		return -1, err
	}
	return int(h), nil
}

// Fstat fills st from the handle's own metadata: a reparse point is
// S_IFLNK, a directory S_IFDIR, a disk file S_IFREG, a console or other
// character device S_IFCHR, a pipe S_IFIFO.
func Fstat(fd int, st *Stat_t) error {
	h := windows.Handle(fd)
	var info winat.Info
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return err
	}
	st.Size = winat.Size(&info)
	switch t, _ := windows.GetFileType(h); {
	case winat.IsReparse(&info):
		st.Mode = s_IFLNK
	case winat.IsDir(&info):
		st.Mode = s_IFDIR
	case t == windows.FILE_TYPE_DISK:
		st.Mode = S_IFREG
	case t == windows.FILE_TYPE_PIPE:
		st.Mode = s_IFIFO
	default:
		st.Mode = s_IFCHR
	}
	return nil
}

// Read reads from the handle fd; end of file is 0, nil.
func Read(fd int, p []byte) (int, error) { return winat.Read(windows.Handle(fd), p) }
