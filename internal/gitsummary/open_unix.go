//go:build unix

package gitsummary

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openRegular opens p for reading when it is a regular file: a final
// symbolic link is not followed, and a FIFO cannot block the open.
func openRegular(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	return f, nil
}
