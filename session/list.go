package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/octet-agent/octet/internal/osfile"
)

// maxListHeader bounds how much of a file List reads to find its header.
const maxListHeader = 1 << 20

// List describes the sessions in dir, most recently updated first. It reads
// each file's header line and metadata, and its listing cache for usage
// uncertainty and known usage: only the records the cache does not vouch
// for are read (all of them when the cache is missing or could not be
// written). Files that cannot be described are skipped and reported in the
// joined error next to the sessions that could be.
func List(dir string) ([]Info, error) {
	return (&Lister{oneShot: true}).List(dir)
}

// A Lister lists sessions directories again and again, as a long-lived
// editor backend does. It keeps what it read of each session file and
// reads a file again only when its inode, size, modification or change
// time differ from when it was read (an append changes the size; a
// repair's truncate the size and times). On Linux it also watches the
// directory (inotify), so a listing costs only the names that changed
// since the last one, not a directory read and one stat per session; when
// the kernel's queue overflows or the directory is replaced it scans in
// full again. Its results are those of [List]. The zero Lister is ready to
// use; it is safe for concurrent use. [Lister.Close] releases the watch
// (it is also released when the Lister is garbage collected).
type Lister struct {
	mu  sync.Mutex
	dir string
	gen uint64
	// known holds the description of each session file by name, with
	// the metadata it was read at.
	known map[string]*describedFile
	// sidecars holds the base names that have a legacy ".uncertain"
	// sidecar; failed the session files that could not be described,
	// tried again at each listing.
	sidecars map[string]bool
	failed   map[string]error
	// sorted is the last listing; it is returned again (copied) when no
	// file changed.
	sorted []Info
	// feed, when not nil, names what changed in dir since known,
	// sidecars and failed were last brought up to date.
	feed *changeFeed
	// oneShot: this Lister lists once ([List]); it sets up no watch.
	oneShot bool
	// scans counts full scans (for tests).
	scans int
}

// describedFile is a session file's description and the metadata (from
// the fstat of the descriptor it was read through) it is valid for.
type describedFile struct {
	stamp fileStamp
	info  Info   // without the legacy sidecar's uncertainty
	seen  uint64 // the Lister's gen when last listed
}

// fileStamp identifies one state of an append-only file.
type fileStamp struct {
	ino          uint64
	size         int64
	mtime, ctime int64 // ns
}

// List describes the sessions in dir as [List] does, reading again only
// the files that changed since this Lister last read them.
func (l *Lister) List(dir string) ([]Info, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if dir != l.dir || l.known == nil {
		l.reset(dir)
	}
	if l.feed != nil {
		changed, err := l.catchUp()
		if err == nil {
			return l.result(changed)
		}
		l.dropFeed()
	}
	if !l.oneShot {
		// The watch starts before the scan: what changes during or
		// after it is in the feed.
		l.feed, _ = newChangeFeed(dir)
	}
	l.scans++
	changed, err := l.scan(dir)
	if err != nil {
		l.dropFeed()
		if errors.Is(err, os.ErrNotExist) {
			clear(l.known)
			clear(l.failed)
			l.sorted = nil
			return nil, nil
		}
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return l.result(changed)
}

// Close releases the Lister's directory watch. The Lister stays usable;
// its next listing scans in full and watches again.
func (l *Lister) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropFeed()
	l.known = nil
	return nil
}

func (l *Lister) reset(dir string) {
	l.dropFeed()
	l.dir, l.sorted = dir, nil
	l.known, l.sidecars, l.failed = map[string]*describedFile{}, map[string]bool{}, map[string]error{}
}

func (l *Lister) dropFeed() {
	if l.feed != nil {
		l.feed.close()
		l.feed = nil
	}
}

// scan brings the Lister up to date with a full read of dir, reporting
// whether any description changed.
func (l *Lister) scan(dir string) (changed bool, err error) {
	d, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	des, err := d.ReadDir(-1)
	if err != nil {
		return false, err
	}
	sidecars := map[string]bool{}
	for _, de := range des {
		if name := de.Name(); strings.HasSuffix(name, ".uncertain") {
			sidecars[strings.TrimSuffix(name, ".uncertain")] = true
		}
	}
	changed = l.sorted == nil || !maps.Equal(sidecars, l.sidecars)
	l.sidecars = sidecars
	clear(l.failed)
	l.gen++
	for _, de := range des {
		name := de.Name()
		if !isSessionName(name) || !de.Type().IsRegular() {
			continue
		}
		if l.refresh(d, name) {
			changed = true
		}
		if df := l.known[name]; df != nil {
			df.seen = l.gen
		}
	}
	n := len(l.known)
	maps.DeleteFunc(l.known, func(_ string, df *describedFile) bool { return df.seen != l.gen })
	return changed || n != len(l.known) || len(l.failed) > 0, nil
}

// catchUp applies what the feed says changed since the last listing,
// and tries the files that could not be described again.
func (l *Lister) catchUp() (changed bool, err error) {
	dirty := map[string]bool{}
	if err := l.feed.drain(func(name string) {
		dirty[name] = true
	}); err != nil {
		return false, err
	}
	for name := range l.failed {
		dirty[name] = true
	}
	for name := range dirty {
		switch {
		case strings.HasSuffix(name, ".uncertain"):
			base := strings.TrimSuffix(name, ".uncertain")
			_, err := os.Lstat(filepath.Join(l.dir, name))
			if has := err == nil; has != l.sidecars[base] {
				l.sidecars[base], changed = has, true
				if !has {
					delete(l.sidecars, base)
				}
			}
		case isSessionName(name):
			if _, ok := stampAt(l.feed.dir, name); !ok {
				// Gone, or no longer a regular file.
				_, was := l.known[name]
				_, failed := l.failed[name]
				delete(l.known, name)
				delete(l.failed, name)
				changed = changed || was || failed
			} else if l.refresh(l.feed.dir, name) {
				changed = true
			}
		}
	}
	return changed || len(l.failed) > 0, nil
}

// refresh describes the session file name in the directory d again if
// it changed since it was described, reporting whether it did.
func (l *Lister) refresh(d *os.File, name string) bool {
	delete(l.failed, name)
	if df := l.known[name]; df != nil {
		if st, ok := stampAt(d, name); ok && st == df.stamp {
			return false
		}
	}
	fresh, err := describe(filepath.Join(l.dir, name))
	if err != nil {
		delete(l.known, name)
		l.failed[name] = err
		return true
	}
	l.known[name] = &fresh
	return true
}

// result is the listing: the last one again if nothing changed.
func (l *Lister) result(changed bool) ([]Info, error) {
	if !changed && l.sorted != nil {
		return slices.Clone(l.sorted), nil
	}
	infos := make([]Info, 0, len(l.known))
	for name, df := range l.known {
		info := df.info
		info.UsageUncertain = info.UsageUncertain || l.sidecars[strings.TrimSuffix(name, ".jsonl")]
		infos = append(infos, info)
	}
	slices.SortFunc(infos, func(a, b Info) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	l.sorted = slices.Clone(infos)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(l.failed)) {
		errs = append(errs, l.failed[name])
	}
	return infos, errors.Join(errs...)
}

// isSessionName reports whether a directory entry's name is a session
// file's.
func isSessionName(name string) bool {
	return strings.HasSuffix(name, ".jsonl") && !strings.HasPrefix(name, ".")
}

// describe reads the header line and metadata of one session file. The
// legacy sidecar is the caller's to consult.
func describe(path string) (describedFile, error) {
	f, err := osfile.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return describedFile{}, fmt.Errorf("list session %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return describedFile{}, fmt.Errorf("list session %s: %w", path, err)
	}
	// The description is of the state the stamp names: its size and
	// time, not fi's (an append between the two stats would otherwise be
	// vouched for and never read).
	stamp, err := stampOf(f, fi)
	if err != nil {
		return describedFile{}, fmt.Errorf("list session %s: %w", path, err)
	}
	size, modTime := stamp.size, time.Unix(0, stamp.mtime)
	line, err := firstLine(f)
	if err != nil {
		return describedFile{}, fmt.Errorf("list session %s: %w", path, err)
	}
	h, err := decodeHeader(line)
	if err != nil {
		return describedFile{}, &CorruptError{Path: path, Line: 1, Err: err}
	}
	l, err := listed(path, f, stamp.ino, size)
	if err != nil {
		return describedFile{}, fmt.Errorf("list session %s: %w", path, err)
	}
	title := h.Title
	if l.titleOff > 0 {
		t, ok := readTitleAt(path, f, l.titleOff)
		if !ok {
			// The cache names no title record there: read the file.
			var whole listing
			if err := scanListing(f, &whole, size); err == nil && whole.titleOff > 0 {
				t, ok = readTitleAt(path, f, whole.titleOff)
			}
		}
		if ok {
			title = t
		}
	}
	return describedFile{stamp: stamp, info: Info{
		ID: h.ID, Title: title, Cwd: h.Cwd,
		Created: h.Created, Updated: modTime,
		UsageUncertain:  l.uncertain || l.unsettled(),
		UsageRecords:    int(l.records),
		UnpricedRecords: int(l.unpriced),
		Known:           l.known,
		Path:            path,
		Version:         h.Version,
	}}, nil
}

// firstLine reads the header line, growing its buffer up to maxListHeader.
func firstLine(f *os.File) ([]byte, error) {
	buf := make([]byte, 0, 4096)
	for len(buf) < maxListHeader {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, len(buf))
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			return buf[:i], nil
		}
		if err == io.EOF {
			return nil, errors.New("header line without newline")
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("header line longer than %d bytes", maxListHeader)
}
