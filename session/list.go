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
	return new(Lister).List(dir)
}

// A Lister lists sessions directories again and again, as a long-lived
// editor backend does, for the cost of reading the directory and one
// lstat per session: it keeps what it read of each session file and reads
// a file again only when its inode, size, modification or change time
// differ from when it was read (an append changes the size; a repair's
// truncate the size and times). Its results are those of [List]. The zero
// Lister is ready to use; it is safe for concurrent use.
type Lister struct {
	mu  sync.Mutex
	dir string
	gen uint64
	// known holds the description of each session file by name, with
	// the metadata it was read at.
	known map[string]*describedFile
	// sorted is the last listing; it is returned again (copied) when no
	// file changed.
	sorted []Info
}

// describedFile is a session file's description and the metadata (from
// the fstat of the descriptor it was read through) it is valid for.
type describedFile struct {
	stamp   fileStamp
	info    Info   // without the legacy sidecar's uncertainty
	sidecar bool   // a legacy sidecar marked it uncertain when last listed
	seen    uint64 // the Lister's gen when last listed
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
		l.dir, l.known, l.sorted = dir, map[string]*describedFile{}, nil
	}
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		clear(l.known)
		l.sorted = nil
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer d.Close()
	des, err := d.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	sidecars := map[string]bool{}
	for _, de := range des {
		if name := de.Name(); strings.HasSuffix(name, ".uncertain") {
			sidecars[strings.TrimSuffix(name, ".uncertain")] = true
		}
	}
	l.gen++
	infos := make([]Info, 0, len(l.known))
	var errs []error
	changed := l.sorted == nil
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, ".jsonl") || strings.HasPrefix(name, ".") || !de.Type().IsRegular() {
			continue
		}
		df := l.known[name]
		if df != nil && !l.unchanged(d, name, df.stamp) {
			df = nil
		}
		if df == nil {
			changed = true
			fresh, err := describe(filepath.Join(dir, name))
			if err != nil {
				delete(l.known, name)
				errs = append(errs, err)
				continue
			}
			df = &fresh
			l.known[name] = df
		}
		df.seen = l.gen
		if sc := sidecars[strings.TrimSuffix(name, ".jsonl")]; sc != df.sidecar {
			df.sidecar, changed = sc, true
		}
		info := df.info
		info.UsageUncertain = info.UsageUncertain || df.sidecar
		infos = append(infos, info)
	}
	if n := len(l.known); n != len(infos) {
		maps.DeleteFunc(l.known, func(_ string, df *describedFile) bool { return df.seen != l.gen })
		changed = true
	}
	if !changed && len(errs) == 0 {
		return slices.Clone(l.sorted), nil
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
	return infos, errors.Join(errs...)
}

// unchanged reports whether the regular file name in the directory d
// still has the given stamp.
func (l *Lister) unchanged(d *os.File, name string, stamp fileStamp) bool {
	st, ok := stampAt(d, name)
	return ok && st == stamp
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
	stamp, err := stampOf(f, fi)
	if err != nil {
		return describedFile{}, fmt.Errorf("list session %s: %w", path, err)
	}
	line, err := firstLine(f)
	if err != nil {
		return describedFile{}, fmt.Errorf("list session %s: %w", path, err)
	}
	h, err := decodeHeader(line)
	if err != nil {
		return describedFile{}, &CorruptError{Path: path, Line: 1, Err: err}
	}
	l, err := listed(path, f, stamp.ino, fi.Size())
	if err != nil {
		return describedFile{}, fmt.Errorf("list session %s: %w", path, err)
	}
	title := h.Title
	if l.titleOff > 0 {
		t, ok := readTitleAt(path, f, l.titleOff)
		if !ok {
			// The cache names no title record there: read the file.
			var whole listing
			if err := scanListing(f, &whole, fi.Size()); err == nil && whole.titleOff > 0 {
				t, ok = readTitleAt(path, f, whole.titleOff)
			}
		}
		if ok {
			title = t
		}
	}
	return describedFile{stamp: stamp, info: Info{
		ID: h.ID, Title: title, Cwd: h.Cwd,
		Created: h.Created, Updated: fi.ModTime(),
		UsageUncertain: l.uncertain,
		UsageRecords:   int(l.records),
		Known:          l.known,
		Path:           path,
		Version:        h.Version,
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
