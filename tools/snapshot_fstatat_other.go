//go:build darwin || (linux && !(amd64 || arm64 || riscv64))

package tools

import "golang.org/x/sys/unix"

// lstatAt lstats name in the directory open as dirfd.
func lstatAt(dirfd int, name string, st *unix.Stat_t) error {
	return unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
}
