//go:build linux || darwin

package tools

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// statAt lstats name in the open directory dir (fstatat, no path walk).
func statAt(dir *os.File, _ string, name string) (snapEntry, bool) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return snapEntry{}, false
	}
	return statEntry(uint32(st.Mode), st.Size, st.Mtim.Nano(), st.Ctim.Nano(), uint64(st.Ino))
}

// statEntry is the snapEntry of a stat result; false for anything but a
// regular file or a directory.
func statEntry(mode uint32, size, mtime, ctime int64, ino uint64) (snapEntry, bool) {
	e := snapEntry{mode: fs.FileMode(mode & 0o777), size: size, mtime: mtime, ctime: ctime, ino: ino}
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		e.dir, e.size = true, 0
	case unix.S_IFREG:
	default:
		return snapEntry{}, false
	}
	return e, true
}
