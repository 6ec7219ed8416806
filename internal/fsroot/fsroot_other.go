//go:build unix && !linux

package fsroot

import (
	"time"

	"golang.org/x/sys/unix"
)

// openat2 does not exist outside Linux: reporting ENOSYS makes the Root
// switch to the O_NOFOLLOW component walk on first use.
func (r *Root) openat2(string, int, uint32) (int, error) { return -1, unix.ENOSYS }

// modTime is the descriptor's modification time.
func modTime(st *unix.Stat_t) time.Time { return time.Unix(st.Mtim.Unix()) }
