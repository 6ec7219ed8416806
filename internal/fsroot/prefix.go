//go:build unix

package fsroot

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ReadPrefix reads at most limit bytes of the regular file rel beneath the
// root, with the same no-follow resolution as ReadFile (a symbolic link in
// any component is ErrSymlink; a FIFO, socket or device is a
// *NotRegularError, detected without blocking). truncated reports that
// the file holds more than limit bytes; limit <= 0 means MaxFileBytes.
func (r *Root) ReadPrefix(rel string, limit int64) (data []byte, truncated bool, err error) {
	clean, err := CleanRel(rel)
	if err != nil {
		return nil, false, err
	}
	fd, err := r.open(clean, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", clean, err)
	}
	defer unix.Close(fd)
	return readPrefixFD(fd, clean, limit)
}

// ReadHostPrefix reads at most limit bytes of the regular file at path,
// an absolute path the user controls (their own configuration under
// $OCTET_HOME, never a workspace file): symbolic links are followed, but
// the file is opened non-blocking and must be a regular file by its
// descriptor's metadata, so a FIFO or device is a *NotRegularError, never
// a hang.
func ReadHostPrefix(path string, limit int64) (data []byte, truncated bool, err error) {
	var fd int
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	return readPrefixFD(fd, path, limit)
}

// readPrefixFD reads at most limit bytes of the regular file fd.
func readPrefixFD(fd int, name string, limit int64) ([]byte, bool, error) {
	if limit <= 0 {
		limit = MaxFileBytes
	}
	st, err := regularStat(fd, name)
	if err != nil {
		return nil, false, err
	}
	buf, err := readUpTo(fd, name, limit, st.Size)
	if err != nil {
		return nil, false, err
	}
	if int64(len(buf)) > limit {
		return buf[:limit], true, nil
	}
	return buf, false, nil
}
