//go:build unix && !linux

package fsroot

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// inspect opens the parent directory of clean through the no-follow
// resolver and lstats the final component relative to it (there is no
// O_PATH here).
func (r *Root) inspect(clean string, st *unix.Stat_t) error {
	if clean == "." {
		return unix.Fstat(r.fd, st)
	}
	dir, name := filepath.Split(clean)
	if dir == "" {
		dir = "."
	}
	pfd, err := r.open(filepath.Clean(dir), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return unix.Fstatat(pfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
}
