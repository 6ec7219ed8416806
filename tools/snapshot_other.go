//go:build !linux && !darwin

package tools

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// statAt lstats name in the directory dirPath: size, mtime and mode (no
// inode number, ctime or link count here; they still detect a change).
func statAt(_ *os.File, dirPath, name string) (snapEntry, uint64, bool) {
	info, err := os.Lstat(filepath.Join(dirPath, name))
	if err != nil {
		return snapEntry{}, 0, false
	}
	e, ok := infoEntry(info)
	return e, 1, ok
}

// typeAt reports what name in the directory dir is: a directory, a
// special file, or absent (!ok).
func typeAt(dir *os.File, name string) (isDir, special, ok bool) {
	info, err := os.Lstat(filepath.Join(dir.Name(), name))
	if err != nil {
		return false, false, false
	}
	return info.IsDir(), !info.IsDir() && !info.Mode().IsRegular(), true
}

// fstatEntry is the entry of the open file f.
func fstatEntry(f *os.File) (snapEntry, bool) {
	info, err := f.Stat()
	if err != nil {
		return snapEntry{}, false
	}
	return infoEntry(info)
}

func infoEntry(info fs.FileInfo) (snapEntry, bool) {
	if !(info.Mode().IsRegular() || info.IsDir()) {
		return snapEntry{}, false
	}
	e := snapEntry{dir: info.IsDir(), mode: info.Mode().Perm(), size: info.Size(), mtime: info.ModTime().UnixNano()}
	if e.dir {
		e.size, e.mtime = 0, 0
	}
	return e, true
}

// readNoFollow reads the regular file name in the directory dir if it
// holds at most limit bytes.
func readNoFollow(dir *os.File, name string, limit int64) ([]byte, error) {
	p := filepath.Join(dir.Name(), name)
	info, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() || info.Size() > limit {
		return nil, fmt.Errorf("%s is not a regular file of at most %d bytes", name, limit)
	}
	return os.ReadFile(p)
}
