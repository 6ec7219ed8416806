package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/octet-agent/octet/internal/osfile"
)

// maxListHeader bounds how much of a file List reads to find its header.
const maxListHeader = 1 << 20

// List describes the sessions in dir, most recently updated first. It reads
// each file's header line and metadata, and its listing cache for usage
// uncertainty and known usage: only the records the cache does not vouch for are read (all
// of them when the cache is missing or could not be written). Files that cannot be described are skipped and
// reported in the joined error next to the sessions that could be.
func List(dir string) ([]Info, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var infos []Info
	var errs []error
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, ".jsonl") || strings.HasPrefix(name, ".") || !de.Type().IsRegular() {
			continue
		}
		info, err := describe(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		infos = append(infos, info)
	}
	slices.SortFunc(infos, func(a, b Info) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return infos, errors.Join(errs...)
}

// describe reads the header line and metadata of one session file.
func describe(path string) (Info, error) {
	f, err := osfile.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return Info{}, fmt.Errorf("list session %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Info{}, fmt.Errorf("list session %s: %w", path, err)
	}
	line, err := firstLine(f)
	if err != nil {
		return Info{}, fmt.Errorf("list session %s: %w", path, err)
	}
	h, err := decodeHeader(line)
	if err != nil {
		return Info{}, &CorruptError{Path: path, Line: 1, Err: err}
	}
	ino, err := osfile.FileID(f)
	if err != nil {
		return Info{}, fmt.Errorf("list session %s: %w", path, err)
	}
	l, err := listed(path, f, ino, fi.Size())
	if err != nil {
		return Info{}, fmt.Errorf("list session %s: %w", path, err)
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
	return Info{
		ID: h.ID, Title: title, Cwd: h.Cwd,
		Created: h.Created, Updated: fi.ModTime(),
		UsageUncertain: l.uncertain,
		UsageRecords:   int(l.records),
		Known:          l.known,
		Path:           path,
		Version:        h.Version,
	}, nil
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
