//go:build linux && (amd64 || arm64 || riscv64)

package tools

import (
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lstatAt lstats name in the directory open as dirfd (newfstatat), with
// the name copied to the stack rather than the heap (unix.Fstatat
// allocates it: a walk stats every entry).
func lstatAt(dirfd int, name string, st *unix.Stat_t) error {
	var buf [256]byte // NAME_MAX and a NUL
	if len(name) >= len(buf) || strings.IndexByte(name, 0) >= 0 {
		return unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
	}
	copy(buf[:], name)
	for {
		_, _, errno := unix.Syscall6(unix.SYS_NEWFSTATAT, uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return errno
	}
}
