package osfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// Sync flushes f's data (and the metadata needed to read it back) to
// stable storage with fdatasync.
func Sync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// RenameNoReplace renames oldpath to newpath, failing with an error for
// which errors.Is(err, fs.ErrExist) holds when newpath exists.
func RenameNoReplace(oldpath, newpath string) error {
	return exclusiveRename(oldpath, newpath, func(o, n string) error {
		return unix.Renameat2(unix.AT_FDCWD, o, unix.AT_FDCWD, n, unix.RENAME_NOREPLACE)
	})
}
