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
// budget: at most SpillStreamBytes per file and SpillTotalBytes /
// SpillMaxFiles across all files, active captures included. Storage
// pressure evicts the oldest retained (finished) files first; active
// captures are never evicted, so when they hold the whole allowance further
// bytes are simply not stored. Close removes everything.
type spillStore struct {
	base string // parent directory for the private dir ("" = os.TempDir())

	mu        sync.Mutex
	dir       string       // created lazily, 0700
	files     []*spillFile // creation order, oldest first
	used      int64        // bytes reserved by every file in files
	closed    bool
	perFile   int64
	total     int64
	maxFiles  int
	evictions int // for tests and diagnostics
}

// spillFile is one capture's file. Fields are guarded by the store's mu,
// except f, which only the capturing goroutine writes through.
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

// create opens a new active spill file, evicting retained files if the
// file budget is full. errSpillQuota means no slot could be freed.
func (s *spillStore) create() (*spillFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errSpillClosed
	}
	for len(s.files) >= s.maxFiles {
		if !s.evictOldestLocked() {
			return nil, errSpillQuota
		}
	}
	if s.dir == "" {
		dir, err := os.MkdirTemp(s.base, "octet-bash-")
		if err != nil {
			return nil, fmt.Errorf("create spill directory: %w", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			os.Remove(dir)
			return nil, fmt.Errorf("create spill directory: %w", err)
		}
		s.dir = dir
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	p := filepath.Join(s.dir, "output-"+hex.EncodeToString(rnd[:])+".log")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create spill file: %w", err)
	}
	sf := &spillFile{path: p, f: f, active: true}
	s.files = append(s.files, sf)
	return sf, nil
}

// reserve grants up to n more bytes to sf within its per-file limit and the
// total budget, evicting the oldest retained files when needed.
func (s *spillStore) reserve(sf *spillFile, n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || sf.expired {
		return 0
	}
	n = min(n, s.perFile-sf.size)
	for n > 0 && s.used+n > s.total && s.evictOldestLocked() {
	}
	n = max(0, min(n, s.total-s.used))
	sf.size += n
	s.used += n
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

// evictOldestLocked removes the oldest retained file. It reports false when
// every file is an active capture.
func (s *spillStore) evictOldestLocked() bool {
	for i, sf := range s.files {
		if sf.active {
			continue
		}
		s.removeLocked(i)
		s.evictions++
		return true
	}
	return false
}

func (s *spillStore) removeLocked(i int) {
	sf := s.files[i]
	os.Remove(sf.path)
	s.used -= sf.size
	sf.expired = true
	s.files = append(s.files[:i], s.files[i+1:]...)
}

// close closes the capture's descriptor.
func (s *spillFile) close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// spillFate is what became of a capture's file when it finished.
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
	closeErr := sf.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	sf.active = false
	if sf.expired {
		return spillExpired, 0
	}
	if discard || closeErr != nil || sf.size == 0 {
		for i, f := range s.files {
			if f == sf {
				s.removeLocked(i)
				break
			}
		}
		if closeErr != nil && !discard {
			return spillFailed, 0
		}
		return spillDropped, 0
	}
	return spillKept, sf.size
}

// Close removes every spill file and the private directory. Active
// captures see their file expire.
func (s *spillStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for len(s.files) > 0 {
		s.removeLocked(0)
	}
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
