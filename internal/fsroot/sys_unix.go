//go:build unix

package fsroot

import "golang.org/x/sys/unix"

// The system calls whose failures and races tests inject (a file that
// grows after fstat, a short or failing write, a failing fsync, a file
// created between the compare and the rename of a commit). The code
// above them calls these, never unix directly.
var (
	sysOpenat = unix.Openat
	sysRead   = unix.Read
	sysWrite  = unix.Write
	sysFsync  = unix.Fsync
	sysLinkat = unix.Linkat
)
