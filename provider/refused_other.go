//go:build !windows

package provider

import (
	"errors"
	"syscall"
)

// isRefused reports a connection the peer refused (nothing listens on
// the port).
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
