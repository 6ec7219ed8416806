package tools

import (
	"io/fs"
	"syscall"
)

// statIDs returns the inode number and ctime (ns) of info.
func statIDs(info fs.FileInfo) (ino uint64, ctime int64) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return st.Ino, st.Ctim.Nano()
}
