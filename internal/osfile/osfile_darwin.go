package osfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Sync flushes f to stable storage with fcntl(F_FULLFSYNC): on macOS
// fsync only reaches the drive's cache. File systems that do not support
// F_FULLFSYNC (some network mounts) get fsync.
func Sync(f *os.File) error {
	for {
		_, err := unix.FcntlInt(f.Fd(), unix.F_FULLFSYNC, 0)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EINVAL):
			return f.Sync()
		}
		return err
	}
}

// RenameNoReplace renames oldpath to newpath, failing with an error for
// which errors.Is(err, fs.ErrExist) holds when newpath exists.
func RenameNoReplace(oldpath, newpath string) error {
	return exclusiveRename(oldpath, newpath, func(o, n string) error {
		return unix.RenamexNp(o, n, unix.RENAME_EXCL)
	})
}
