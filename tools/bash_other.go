//go:build !linux

package tools

import (
	"os"
	"syscall"
)

// groupAlive reports whether process group pgid still has a member.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// growPipe is a no-op where pipe buffers cannot be resized.
func growPipe(*os.File) {}
