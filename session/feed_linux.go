//go:build linux

package session

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A changeFeed reports which names in a directory changed since it was
// last drained: an inotify watch on the directory. The kernel queues an
// event inside the system call that changes a name (a write, truncate,
// attribute change, creation, removal or rename), so every change that
// completed before drain is in what drain returns.
type changeFeed struct {
	fd  *os.File // the inotify instance; closed with the feed (or when collected)
	dir *os.File // the watched directory, for descriptor-relative stats
}

// feedMask is what a feed watches: every change to a name's content,
// metadata or existence, and the directory itself going away.
const feedMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// newChangeFeed watches dir. The watch starts before the caller's full
// scan, so nothing that changes after that scan is missed.
func newChangeFeed(dir string) (*changeFeed, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("inotify: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	if _, err := unix.InotifyAddWatch(fd, dir, feedMask); err != nil {
		f.Close()
		d.Close()
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	// The watch was placed by path: it must be on the directory d is.
	var byPath, byFD unix.Stat_t
	if unix.Fstat(int(d.Fd()), &byFD) != nil || unix.Stat(dir, &byPath) != nil ||
		byFD.Ino != byPath.Ino || byFD.Dev != byPath.Dev {
		f.Close()
		d.Close()
		return nil, fmt.Errorf("watch %s: the directory was replaced", dir)
	}
	return &changeFeed{fd: f, dir: d}, nil
}

// errFeedLost is returned by drain when the feed can no longer vouch for
// the directory: the kernel's queue overflowed, or the directory was
// removed, moved or unmounted. The caller scans in full and starts a new
// feed.
var errFeedLost = errors.New("change feed lost")

// drain calls changed for each name that changed since the last drain
// (possibly more than once per name).
func (c *changeFeed) drain(changed func(name string)) error {
	rc, err := c.fd.SyscallConn()
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf)
			return true // never wait: only what is queued now
		}); err != nil {
			return err
		}
		if errors.Is(rerr, syscall.EAGAIN) {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("read change feed: %w", rerr)
		}
		if n <= 0 {
			return nil
		}
		if err := parseEvents(buf[:n], changed); err != nil {
			return err
		}
	}
}

// parseEvents walks the inotify events in b.
func parseEvents(b []byte, changed func(name string)) error {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			return fmt.Errorf("read change feed: %w (truncated event)", errFeedLost)
		}
		if ev.Mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0 {
			return errFeedLost
		}
		if name := bytes.TrimRight(b[unix.SizeofInotifyEvent:end], "\x00"); len(name) > 0 {
			changed(string(name))
		}
		b = b[end:]
	}
	return nil
}

// close releases the feed.
func (c *changeFeed) close() {
	c.fd.Close()
	c.dir.Close()
}
