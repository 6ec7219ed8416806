//go:build linux || darwin

package tools

import (
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/octet-agent/octet/changes"
)

// statAt lstats name in the open directory dir (fstatat, no path walk),
// returning its entry and its link count.
func statAt(dir *os.File, _ string, name string) (snapEntry, uint64, bool) {
	var st unix.Stat_t
	if err := lstatAt(int(dir.Fd()), name, &st); err != nil {
		return snapEntry{}, 0, false
	}
	e, ok := statEntry(&st)
	return e, uint64(st.Nlink), ok
}

// typeAt reports what name in the open directory dir is: a directory, a
// special file (not a regular file nor a directory), or absent (!ok).
func typeAt(dir *os.File, name string) (isDir, special, ok bool) {
	var st unix.Stat_t
	if err := lstatAt(int(dir.Fd()), name, &st); err != nil {
		return false, false, false
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return true, false, true
	case unix.S_IFREG:
		return false, false, true
	}
	return false, true, true
}

// fstatEntry is the entry of the open file f.
func fstatEntry(f *os.File) (snapEntry, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return snapEntry{}, false
	}
	return statEntry(&st)
}

// statEntry is the snapEntry of a stat result; false for anything but a
// regular file or a directory. A directory's state is its mode (and
// inode): its size and times change with its entries.
func statEntry(st *unix.Stat_t) (snapEntry, bool) {
	e := snapEntry{mode: fs.FileMode(st.Mode) & changes.ModeBits, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: uint64(st.Ino)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		e.dir, e.size, e.mtime, e.ctime = true, 0, 0, 0
	case unix.S_IFREG:
	default:
		return snapEntry{}, false
	}
	return e, true
}

// readNoFollow reads the regular file name in the open directory dir,
// not following a symbolic link, if it holds at most limit bytes.
func readNoFollow(dir *os.File, name string, limit int64) ([]byte, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() || info.Size() > limit {
		return nil, fmt.Errorf("%s is not a regular file of at most %d bytes", name, limit)
	}
	buf := make([]byte, info.Size())
	n, err := f.ReadAt(buf, 0)
	if n < len(buf) {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return buf, nil
}
