package session

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/octet-agent/octet/internal/osfile"
)

// Every writer of a session (Create, CreateIn, CreateFrom, Open) holds a
// shared holder lock from open to Close; [Remove] takes it exclusively
// without waiting, so it refuses a session any process (this one too)
// has open for writing instead of deleting a file a writer would go on
// appending to unseen. Readers ([Inspect]) hold none.
//
// The holder lock cannot be the session file's flock: that is the short
// exclusive lock of every append, which a long-lived shared lock would
// block. On a local Linux file system it is a byte-range lock of the
// session file's own open file description (osfile.RangeLock, independent
// of flock), so an open session still costs one descriptor. Elsewhere
// (macOS, Windows, network file systems) it is the flock of a holder
// file, <id>.lock beside the session, opened for the session's lifetime:
// a second descriptor. The holder file stays until the session is
// removed.

// rangeLockable reports whether the holder lock is a byte-range lock of
// the session file (osfile.RangeLockable); tests turn it off to exercise
// holder files.
var rangeLockable = osfile.RangeLockable

// holderName is the holder file of the session file named name.
func holderName(name string) string { return strings.TrimSuffix(name, ".jsonl") + ".lock" }

// InUseError refuses to remove a session a writer has open.
type InUseError struct {
	// Path is the session file.
	Path string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("session %s is open in another process (an editor, or a running octet exec); close it there, or wait for the run to end", e.Path)
}

// hold takes the shared holder lock of the session file name in d, which
// f has open read-write, and checks that name still is f: a session
// removed while it was being opened is reported as not existing. It
// returns the holder file the session keeps open (nil: none needed, or
// one that cannot be created, as in a read-only directory, where nothing
// can be removed either: the ledger never depends on it).
func hold(d sessionDir, name string, f *os.File) (*os.File, error) {
	var h *os.File
	if rangeLockable(f) {
		if _, err := osfile.RangeLock(f, false); err != nil {
			return nil, fmt.Errorf("open session: holder lock: %w", err)
		}
	} else {
		var err error
		if h, err = d.openFile(holderName(name), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			slog.Debug("session: no holder file", "path", d.path(), "name", name, "err", err)
			return nil, nil
		}
		if err := osfile.Lock(h, false); err != nil {
			h.Close()
			return nil, fmt.Errorf("open session: holder lock: %w", err)
		}
	}
	if same, err := sameFile(d, name, f); err != nil || !same {
		if h != nil {
			h.Close()
		}
		if err == nil {
			err = fs.ErrNotExist
		}
		return nil, fmt.Errorf("open session: it was removed meanwhile: %w", err)
	}
	return h, nil
}

// sameFile reports whether name in d is the file f has open.
func sameFile(d sessionDir, name string, f *os.File) (bool, error) {
	g, err := d.openFile(name, os.O_RDONLY, 0)
	if err != nil {
		return false, err
	}
	defer g.Close()
	a, err := osfile.FileID(f)
	if err != nil {
		return false, err
	}
	b, err := osfile.FileID(g)
	return err == nil && a == b, err
}

// claim takes the holder lock of the session file name in d, which f has
// open read-write, exclusively and without waiting: an *InUseError when a
// writer holds it. The lock lasts until f and the returned holder file
// (nil when none) are closed.
func claim(d sessionDir, name string, f *os.File) (*os.File, error) {
	inUse := &InUseError{Path: d.path() + string(os.PathSeparator) + name}
	if rangeLockable(f) {
		ok, err := osfile.RangeLock(f, true)
		if err == nil && !ok {
			err = inUse
		}
		return nil, err
	}
	h, err := d.openFile(holderName(name), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	ok, err := osfile.TryLock(h, true)
	if err != nil || !ok {
		h.Close()
		if err == nil {
			err = inUse
		}
		return nil, err
	}
	return h, nil
}
