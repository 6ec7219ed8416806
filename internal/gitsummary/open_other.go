//go:build !unix

package gitsummary

import (
	"fmt"
	"os"
)

// openRegular opens p for reading when it is a regular file (checked
// before and after the open, since a link is not refused here).
func openRegular(p string) (*os.File, error) {
	if fi, err := os.Lstat(p); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	return f, nil
}
