//go:build !linux && !darwin

package tools

import (
	"os"
	"path/filepath"
)

// statAt lstats name in the directory dirPath: size, mtime and mode (no
// inode number or ctime here; they still detect a change).
func statAt(_ *os.File, dirPath, name string) (snapEntry, bool) {
	info, err := os.Lstat(filepath.Join(dirPath, name))
	if err != nil || !(info.Mode().IsRegular() || info.IsDir()) {
		return snapEntry{}, false
	}
	e := snapEntry{dir: info.IsDir(), mode: info.Mode().Perm(), size: info.Size(), mtime: info.ModTime().UnixNano()}
	if e.dir {
		e.size = 0
	}
	return e, true
}
