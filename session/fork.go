package session

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/octet-agent/octet/internal/osfile"
)

// CreateFrom creates a new session file like [Create] whose tree already
// holds entries, a chain from a root (each entry's Parent the previous
// entry's ID, the first a root), and opens it for writing. The entries
// keep their IDs, parents, times and runs; nothing else (usage,
// checkpoints, dispatches, recovered output, titles of the source) is
// written. The file is written to a temporary file, synced and renamed
// into place, so it appears whole or not at all. It is how a session is
// forked: h.ForkOf and h.ForkEntry name the origin.
func CreateFrom(dir string, h Header, entries []Entry) (*Session, error) {
	if h.Created.IsZero() {
		h.Created = time.Now().UTC()
	}
	if h.ID == "" {
		h.ID = newSessionID(h.Created)
	}
	if !validID(h.ID) {
		return nil, fmt.Errorf("create session: invalid session id %q", h.ID)
	}
	h.Version = FormatVersion
	for i, e := range entries {
		want := ""
		if i > 0 {
			want = entries[i-1].ID
		}
		if e.ID == "" || e.Parent != want || e.Type == "" {
			return nil, fmt.Errorf("create session %s: entry %d (%q) does not continue the chain", h.ID, i, e.ID)
		}
	}
	if err := ensureDir(dir); err != nil {
		return nil, fmt.Errorf("create session %s: %w", h.ID, err)
	}
	name := h.ID + ".jsonl"
	err := writeNewWith(pathDir(dir), name, func(w *bufio.Writer) error {
		return writeChain(w, h, entries)
	})
	if err != nil {
		return nil, fmt.Errorf("create session %s: %w", h.ID, err)
	}
	return open(filepath.Join(dir, name), false, true)
}

// writeChain writes the header and entries (one record each) within the
// file bounds.
func writeChain(w *bufio.Writer, h Header, entries []Entry) error {
	buf := appendHeader(nil, h)
	if len(buf) > limits.recordBytes {
		return &LimitError{Path: h.ID, Limit: "record bytes", Max: int64(limits.recordBytes), Got: int64(len(buf)), Line: 1}
	}
	total := int64(len(buf))
	if _, err := w.Write(buf); err != nil {
		return err
	}
	if got := len(entries) + 1; got > limits.records {
		return &LimitError{Path: h.ID, Limit: "records", Max: int64(limits.records), Got: int64(got), Line: got}
	}
	for i := range entries {
		var err error
		buf, err = appendRecord(buf[:0], Record{Kind: KindEntry, Entry: &entries[i]}, 0, 1)
		if err != nil {
			return fmt.Errorf("entry %q: %w", entries[i].ID, err)
		}
		if len(buf) > limits.recordBytes {
			return &LimitError{Path: h.ID, Limit: "record bytes", Max: int64(limits.recordBytes), Got: int64(len(buf)), Line: i + 2}
		}
		if total += int64(len(buf)); total > limits.fileBytes {
			return &LimitError{Path: h.ID, Limit: "file bytes", Max: limits.fileBytes, Got: total}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// writeNewWith atomically creates name in d (mode 0600) with what fill
// writes; it fails if name exists.
func writeNewWith(d sessionDir, name string, fill func(*bufio.Writer) error) error {
	tmp, tmpName, err := d.createTemp("." + name + ".tmp-*")
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(tmp, 1<<20)
	err = fill(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = syncData(tmp)
	}
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = d.renameNoReplace(tmpName, name)
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("%s: %w", filepath.Join(d.path(), name), fs.ErrExist)
		}
	}
	if err != nil {
		d.remove(tmpName)
		return err
	}
	return d.sync()
}

// Remove deletes the session file at path with its listing cache, its
// holder file (and the marker file older versions wrote). A session that
// a writer (in any process, this one included) has open is not removed:
// the error is an *[InUseError]. Close the session before removing it.
// Remove also takes the file's exclusive lock, so an append under way
// completes before the file goes.
func Remove(path string) error {
	return remove(pathDir(filepath.Dir(path)), filepath.Base(path))
}

// RemoveIn is [Remove] for the session file name (<id>.jsonl) in a
// directory the caller holds open as root: nothing is reached by path.
func RemoveIn(root *os.Root, name string) error {
	return remove(rootDir{root: root, dir: root.Name()}, name)
}

func remove(d sessionDir, name string) error {
	path := filepath.Join(d.path(), name)
	f, err := d.openFile(name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("remove session: %w", err)
	}
	defer f.Close()
	h, err := claim(d, name, f)
	if err != nil {
		return fmt.Errorf("remove session: %w", err)
	}
	if h != nil {
		defer h.Close()
	}
	if err := osfile.Lock(f, true); err != nil {
		return fmt.Errorf("remove session %s: lock: %w", path, err)
	}
	if err := d.remove(name); err != nil {
		return fmt.Errorf("remove session: %w", err)
	}
	var errs []error
	for _, p := range []string{listingPath(name), legacySidecarPath(name), holderName(name)} {
		if err := d.remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, d.sync())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove session %s: %w", path, err)
	}
	return nil
}
