//go:build unix

package session

import (
	"os"

	"golang.org/x/sys/unix"
)

// stampOf is the stamp of the open file f (fi is its Stat).
func stampOf(f *os.File, _ os.FileInfo) (fileStamp, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileStamp{}, err
	}
	return stampOfStat(&st), nil
}

// stampAt returns the stamp of the regular file name in the directory d,
// without following a link; ok is false for anything else.
func stampAt(d *os.File, name string) (fileStamp, bool) {
	var st unix.Stat_t
	if unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fileStamp{}, false
	}
	return stampOfStat(&st), true
}

func stampOfStat(st *unix.Stat_t) fileStamp {
	return fileStamp{ino: uint64(st.Ino), size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}
