package osfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// holdOffset is the byte RangeLock locks: far beyond any session file's
// end, so it never overlaps data anyone reads.
const holdOffset = 1 << 62

// localFS are the file systems whose open-file-description byte-range
// locks (fcntl F_OFD_SETLK) are independent of flock locks on the same
// file. On NFS and SMB the kernel emulates flock with byte-range locks,
// so the two would conflict; every other file system is left out too.
var localFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:      true, // ext2, ext3 and ext4
	unix.XFS_SUPER_MAGIC:       true,
	unix.BTRFS_SUPER_MAGIC:     true,
	unix.TMPFS_MAGIC:           true,
	unix.OVERLAYFS_SUPER_MAGIC: true,
	unix.F2FS_SUPER_MAGIC:      true,
	unix.BCACHEFS_SUPER_MAGIC:  true,
	0x2fc12fc1:                 true, // zfs
}

// RangeLockable reports whether RangeLock works on f beside Lock (which
// it never conflicts with): on Linux, for a file on a local file system.
func RangeLockable(f *os.File) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return false
	}
	return localFS[int64(st.Type)]
}

// RangeLock takes a lock, independent of Lock's, held by f's open file
// description until it is closed: shared (waiting for an exclusive one to
// go) or exclusive (without waiting: ok is false when another open file
// holds it). Only where RangeLockable.
func RangeLock(f *os.File, exclusive bool) (ok bool, err error) {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: holdOffset, Len: 1}
	cmd := unix.F_OFD_SETLKW
	if exclusive {
		lk.Type, cmd = unix.F_WRLCK, unix.F_OFD_SETLK
	}
	for {
		err = unix.FcntlFlock(f.Fd(), cmd, &lk)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case exclusive && (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES)):
			return false, nil
		}
		return false, err
	}
}
