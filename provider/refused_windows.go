//go:build windows

package provider

import (
	"errors"

	"golang.org/x/sys/windows"
)

// isRefused reports a connection the peer refused (nothing listens on
// the port): Winsock's WSAECONNREFUSED.
func isRefused(err error) bool { return errors.Is(err, windows.WSAECONNREFUSED) }
