//go:build linux

package fsroot

import (
	"time"

	"golang.org/x/sys/unix"
)

// openat2 opens rel beneath the root with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS, retrying when a concurrent rename raced the lookup.
func (r *Root) openat2(rel string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	}
	if flags&unix.O_CREAT == 0 {
		how.Mode = 0
	}
	for range 8 {
		fd, err := openat2(r.fd, rel, &how)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue // a concurrent rename raced the lookup; retry
		}
		return fd, err
	}
	return -1, unix.EAGAIN
}

// openat2 is the openat2 system call; tests replace it to simulate a
// kernel or seccomp filter that refuses it.
var openat2 = unix.Openat2

// renameNoReplace renames tmp to name within pfd, failing with EEXIST
// when name exists: renameat2(RENAME_NOREPLACE), or link+unlink on file
// systems that refuse it.
func renameNoReplace(pfd int, tmp, name string) error {
	return exclusiveRenameAt(pfd, tmp, name, func() error {
		return unix.Renameat2(pfd, tmp, pfd, name, unix.RENAME_NOREPLACE)
	})
}

// modTime is the descriptor's modification time.
func modTime(st *unix.Stat_t) time.Time { return time.Unix(st.Mtim.Unix()) }
