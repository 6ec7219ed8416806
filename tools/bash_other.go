//go:build !linux

package tools

import (
	"os"
	"os/exec"
	"syscall"
)

// groupAlive reports whether process group pgid still has a member.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// growPipe is a no-op where pipe buffers cannot be resized.
func growPipe(*os.File) {}

// watchExit reaps the shell in the background and closes the returned
// channel when it exited; reap returns its wait error.
func watchExit(cmd *exec.Cmd) (<-chan struct{}, func() error) {
	done := make(chan struct{})
	var err error
	go func() { err = cmd.Wait(); close(done) }()
	return done, func() error { <-done; return err }
}
