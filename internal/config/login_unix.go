//go:build !windows

package config

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// createPrivate creates name, which must not exist (a stale one left by
// a crash is removed first; a link is never followed), with mode 0600.
func createPrivate(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		if err := os.Remove(name); err != nil {
			return nil, err
		}
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	}
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
