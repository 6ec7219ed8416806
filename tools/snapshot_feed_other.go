//go:build !linux

package tools

import "errors"

// feed is Linux's inotify change feed; elsewhere every snapshot walks the
// workspace (kqueue and ReadDirectoryChangesW are not wired up).
type feed struct{}

var errWatchLimit = errors.New("no change feed on this platform")

func newFeed(int) (*feed, error) { return nil, errors.New("no change feed on this platform") }

func (*feed) drain() (map[int32]map[string]struct{}, string)     { return nil, "no change feed" }
func (*feed) watchDir(*watchThread, int) (int32, error)          { return -1, errWatchLimit }
func (*feed) watchFile(*watchThread, int, string) (int32, error) { return -1, errWatchLimit }
func (*feed) unwatch(int32)                                      {}
func (*feed) reset()                                             {}
func (*feed) close()                                             {}

func feedFilesystem(int) (bool, string) { return false, "" }

// watchThread is Linux's walk worker thread with its own working
// directory.
type watchThread struct{}

func newWatchThread(int) *watchThread { return nil }
func instanceThread(int) *watchThread { return nil }
func (*watchThread) enter(int)        {}
func (*watchThread) leave()           {}
