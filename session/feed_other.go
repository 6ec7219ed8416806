//go:build !linux

package session

import (
	"errors"
	"os"
)

// changeFeed is Linux's inotify watch; elsewhere a Lister stats every
// file on each listing (kqueue and ReadDirectoryChangesW are not wired
// up yet).
type changeFeed struct{ dir *os.File }

var errFeedLost = errors.New("change feed lost")

func newChangeFeed(string) (*changeFeed, error) {
	return nil, errors.New("no change feed on this platform")
}

func (*changeFeed) drain(func(string)) error { return errFeedLost }

func (*changeFeed) close() {}
