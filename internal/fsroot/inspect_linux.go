//go:build linux

package fsroot

import "golang.org/x/sys/unix"

// inspect opens clean with O_PATH (open adds O_NOFOLLOW) through the
// resolver and fstats the descriptor. With openat2 and RESOLVE_NO_SYMLINKS
// a trailing symlink opened O_PATH|O_NOFOLLOW is returned as the link
// itself; the component walk's final openat does the same.
func (r *Root) inspect(clean string, st *unix.Stat_t) error {
	fd, err := r.open(clean, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fstat(fd, st)
}
