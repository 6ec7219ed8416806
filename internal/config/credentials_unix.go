//go:build !windows

package config

import (
	"io/fs"
	"os"
)

// checkPrivate refuses a credentials file with any group or other
// permission bit.
func checkPrivate(_ *os.File, path string, fi fs.FileInfo) error {
	if fi.Mode().Perm()&0o077 != 0 {
		return &ModeError{Path: path, Mode: fi.Mode()}
	}
	return nil
}

// privateHint is the command that makes path private to the user.
func privateHint(path string) string { return "run chmod 600 " + path }
