package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// spillStore owns one bash tool instance's private spill directory and its
// budget: at most SpillStreamBytes per file (one file holds one stream of
// one command) and SpillTotalBytes / SpillMaxFiles across all files,
// active captures included. Storage pressure evicts the oldest retained
// (finished) files first; active captures are never evicted, so when they
// hold the whole allowance further bytes are simply not stored. Close
// removes everything.
//
// Its methods are called by capture workers, never by the drain
// goroutines: they do file I/O (creating, closing and removing files), but
// never while holding mu, which guards only the budget bookkeeping.
type spillStore struct {
	base string // parent directory for the private dir ("" = os.TempDir())

	// dirMu serializes creating the directory and files in it with Close
	// removing it, so Close never misses a file being created.
	dirMu     sync.Mutex
	dir       string // created lazily, 0700
	dirClosed bool

	mu        sync.Mutex
	files     []*spillFile // creation order, oldest first
	used      int64        // bytes reserved by every file in files
	closed    bool
	perFile   int64
	total     int64
	maxFiles  int
	evictions int // for tests and diagnostics

	// writeHook, when set (tests), runs in the spill worker before each
	// write to a spill file.
	writeHook func(streamID)
}

// spillFile is one stream's file. Fields are guarded by the store's mu,
// except f, which only the stream's spill worker uses.
type spillFile struct {
	path    string
	f       *os.File
	size    int64 // bytes reserved (and written, unless the write failed)
	active  bool
	expired bool
}

var (
	errSpillQuota  = errors.New("spill quota exhausted")
	errSpillClosed = errors.New("spill store closed")
)

func newSpillStore(base string) *spillStore {
	return &spillStore{base: base, perFile: SpillStreamBytes, total: SpillTotalBytes, maxFiles: SpillMaxFiles}
}

// create opens a new active spill file for stream id, evicting retained
// files if the file budget is full. errSpillQuota means no slot could be
// freed; errSpillClosed that the store is (or was meanwhile) closed.
func (s *spillStore) create(id streamID) (*spillFile, error) {
	sf := &spillFile{active: true}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errSpillClosed
	}
	var evicted []string
	for len(s.files) >= s.maxFiles {
		p, ok := s.evictOldestLocked()
		if !ok {
			s.mu.Unlock()
			removeFiles(evicted)
			return nil, errSpillQuota
		}
		evicted = append(evicted, p)
	}
	s.files = append(s.files, sf) // holds the slot while the file is created
	s.mu.Unlock()
	removeFiles(evicted)

	f, path, err := s.openFile(id)
	s.mu.Lock()
	if err != nil {
		s.dropLocked(sf)
		s.mu.Unlock()
		return nil, err
	}
	sf.path, sf.f = path, f
	expired := sf.expired // Close ran meanwhile
	s.mu.Unlock()
	if expired {
		f.Close()
		os.Remove(path)
		return nil, errSpillClosed
	}
	return sf, nil
}

// openFile creates the private directory if needed and a new file in it.
func (s *spillStore) openFile(id streamID) (*os.File, string, error) {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	if s.dirClosed {
		return nil, "", errSpillClosed
	}
	if s.dir == "" {
		dir, err := os.MkdirTemp(s.base, "octet-bash-")
		if err != nil {
			return nil, "", fmt.Errorf("create spill directory: %w", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			os.Remove(dir)
			return nil, "", fmt.Errorf("create spill directory: %w", err)
		}
		s.dir = dir
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	p := filepath.Join(s.dir, id.String()+"-"+hex.EncodeToString(rnd[:])+".log")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("create spill file: %w", err)
	}
	return f, p, nil
}

// reserve grants up to n more bytes to sf within its per-file limit and the
// total budget, evicting the oldest retained files when needed.
func (s *spillStore) reserve(sf *spillFile, n int64) int64 {
	s.mu.Lock()
	if s.closed || sf.expired {
		s.mu.Unlock()
		return 0
	}
	n = min(n, s.perFile-sf.size)
	var evicted []string
	for n > 0 && s.used+n > s.total {
		p, ok := s.evictOldestLocked()
		if !ok {
			break
		}
		evicted = append(evicted, p)
	}
	n = max(0, min(n, s.total-s.used))
	sf.size += n
	s.used += n
	s.mu.Unlock()
	removeFiles(evicted)
	return n
}

// unreserve returns n reserved but unwritten bytes (after a write error).
func (s *spillStore) unreserve(sf *spillFile, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sf.expired {
		return
	}
	sf.size -= n
	s.used -= n
}

// evictOldestLocked drops the oldest retained file from the budget and
// returns its path for the caller to remove once mu is released. It
// reports false when every file is an active capture.
func (s *spillStore) evictOldestLocked() (string, bool) {
	for i, sf := range s.files {
		if sf.active {
			continue
		}
		s.files = append(s.files[:i], s.files[i+1:]...)
		s.used -= sf.size
		sf.expired = true
		s.evictions++
		return sf.path, true
	}
	return "", false
}

// dropLocked removes sf from the budget (its file is the caller's).
func (s *spillStore) dropLocked(sf *spillFile) {
	for i, f := range s.files {
		if f == sf {
			s.files = append(s.files[:i], s.files[i+1:]...)
			s.used -= sf.size
			sf.expired = true
			return
		}
	}
}

// removeFiles removes files outside any lock; a file that is already gone
// is fine.
func removeFiles(paths []string) {
	for _, p := range paths {
		if p != "" {
			os.Remove(p)
		}
	}
}

// spillFate is what became of a stream's file when its capture finished.
type spillFate int

const (
	spillKept    spillFate = iota // retained; its path may be advertised
	spillExpired                  // evicted or removed by Close during capture
	spillDropped                  // removed: empty or discarded
	spillFailed                   // removed: closing the file failed
)

// finish ends sf's capture: the file becomes retained (evictable), or is
// removed when discard is set, it holds nothing or closing failed (a
// storage failure: spillFailed). It returns the file's fate and final size.
func (s *spillStore) finish(sf *spillFile, discard bool) (spillFate, int64) {
	var closeErr error
	if sf.f != nil {
		closeErr = sf.f.Close()
		sf.f = nil
	}
	s.mu.Lock()
	sf.active = false
	if sf.expired {
		s.mu.Unlock()
		return spillExpired, 0
	}
	if discard || closeErr != nil || sf.size == 0 {
		s.dropLocked(sf)
		s.mu.Unlock()
		os.Remove(sf.path)
		if closeErr != nil && !discard {
			return spillFailed, 0
		}
		return spillDropped, 0
	}
	size := sf.size
	s.mu.Unlock()
	return spillKept, size
}

// Close removes every spill file and the private directory. Active
// captures see their file expire.
func (s *spillStore) Close() error {
	s.mu.Lock()
	s.closed = true
	var paths []string
	for _, sf := range s.files {
		sf.expired = true
		paths = append(paths, sf.path)
	}
	s.files, s.used = nil, 0
	s.mu.Unlock()
	removeFiles(paths)

	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	s.dirClosed = true
	if s.dir == "" {
		return nil
	}
	err := os.RemoveAll(s.dir)
	s.dir = ""
	if err != nil {
		return fmt.Errorf("remove bash spill directory: %w", err)
	}
	return nil
}

// stats returns the retained file count and reserved bytes (tests).
func (s *spillStore) stats() (files int, used int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.files), s.used
}
