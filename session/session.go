package session

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/octet-agent/octet/internal/osfile"
)

// limits are the bounds in force; tests lower them to exercise the limit
// errors cheaply.
var limits = struct {
	fileBytes   int64
	records     int
	recordBytes int
}{MaxFileBytes, MaxRecords, MaxRecordBytes}

// writeAt and syncData are the two durability steps of an append; tests
// replace them to inject short writes and sync failures.
var (
	writeAt  = func(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }
	syncData = osfile.Sync
)

// Session is an open session file. Methods are safe for concurrent use.
type Session struct {
	mu       sync.Mutex
	path     string
	dir      sessionDir // the file's directory, for its listing cache
	f        *os.File
	holder   *os.File // the shared holder lock of a writer (hold.go)
	readOnly bool
	alone    bool // a writer that found no other live writer at open
	closed   bool
	hdr      Header
	size     int64 // end of the last complete record folded
	lines    int   // lines folded, header included
	torn     int64 // bytes of an unrepaired torn tail at size (Inspect)
	tornLine int   // its first line, for the repair's log
	tornWhy  string
	ix       *index
	alloc    strAlloc
	foreign  int64
	hook     func(ForeignAppend)
	ino      uint64  // the file's inode, named in the listing cache
	listed   listing // what this writer last wrote to the listing cache
	// listingWarned is set once a listing cache write failed (logged
	// once, cleared by the next success).
	listingWarned bool
	wbuf          []byte // reused encoding buffer
	wends         []int
	// specOK lets the first fold type entries speculatively (spec) while
	// it indexes them; only open sets it.
	specOK bool
	spec   *specTyper
	// broken is set once the file was found changed behind the session
	// (a released branch typed again did not match what was folded):
	// appends are refused with it.
	broken *ChangedError
}

// Home returns octet's state directory: $OCTET_HOME, or ~/.octet.
func Home() string {
	if h := os.Getenv("OCTET_HOME"); h != "" {
		return h
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".octet"
	}
	return filepath.Join(home, ".octet")
}

// Dir returns the sessions directory under home.
func Dir(home string) string { return filepath.Join(home, "sessions") }

// NewID returns a fresh random entry id (16 hex digits).
func NewID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newSessionID returns a sortable, unique session id.
func newSessionID(now time.Time) string {
	var b [6]byte
	rand.Read(b[:])
	return now.UTC().Format("20060102-150405-") + hex.EncodeToString(b[:])
}

func validID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return false
	}
	for _, c := range []byte(id) {
		ok := c == '-' || c == '_' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !ok {
			return false
		}
	}
	return true
}

// Create creates a new session file <dir>/<id>.jsonl (mode 0600, dir 0700)
// holding only the header, and opens it for writing. An empty ID or
// Created is assigned. The header is written to a temporary file, synced
// and renamed into place, so a session file never lacks its header.
func Create(dir string, h Header) (*Session, error) {
	h, err := newHeader(h)
	if err != nil {
		return nil, err
	}
	if err := ensureDir(dir); err != nil {
		return nil, fmt.Errorf("create session %s: %w", h.ID, err)
	}
	return create(pathDir(dir), h)
}

// CreateIn is [Create] in a directory the caller holds open as root (dir
// is its path, for [Session.Path] and messages). The file is created and
// opened, and its listing cache written, through root, never by path, so a
// directory replaced by a link after root was opened is not followed. The
// session keeps a handle of its own on the directory until Close.
func CreateIn(root *os.Root, dir string, h Header) (*Session, error) {
	h, err := newHeader(h)
	if err != nil {
		return nil, err
	}
	own, err := root.OpenRoot(".")
	if err != nil {
		return nil, fmt.Errorf("create session %s: %w", h.ID, err)
	}
	s, err := create(rootDir{root: own, dir: dir}, h)
	if err != nil {
		own.Close()
	}
	return s, err
}

// newHeader completes and checks the header of a new session.
func newHeader(h Header) (Header, error) {
	if h.Created.IsZero() {
		h.Created = time.Now().UTC()
	}
	if h.ID == "" {
		h.ID = newSessionID(h.Created)
	}
	if !validID(h.ID) {
		return h, fmt.Errorf("create session: invalid session id %q", h.ID)
	}
	h.Version = FormatVersion
	return h, nil
}

// create writes the session file of header h in d and opens it; the
// session owns d from then on.
func create(d sessionDir, h Header) (*Session, error) {
	buf := appendHeader(nil, h)
	if len(buf) > limits.recordBytes {
		return nil, &LimitError{Path: h.ID, Limit: "record bytes", Max: int64(limits.recordBytes), Got: int64(len(buf)), Line: 1}
	}
	name := h.ID + ".jsonl"
	if err := writeNew(d, name, buf); err != nil {
		return nil, fmt.Errorf("create session %s: %w", h.ID, err)
	}
	f, err := d.openFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	s, err := openOn(f, d, name, false, true)
	if err != nil {
		return nil, err
	}
	// No listing cache yet: List reads a file this small itself, and a
	// session removed before anything was appended leaves nothing behind.
	s.listed = listing{ino: s.ino, size: s.size}
	return s, nil
}

func ensureDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// writeNew atomically creates name in d with content buf (mode 0600); it
// fails if name exists.
func writeNew(d sessionDir, name string, buf []byte) error {
	return writeNewWith(d, name, func(w *bufio.Writer) error {
		_, err := w.Write(buf)
		return err
	})
}

// Open opens a session file for reading and appending. Under the exclusive
// lock it repairs a torn final record (or torn final batch) left by a
// writer that died mid-append, truncating it; damage anywhere else is a
// [CorruptError] naming the line, and the file is left untouched.
func Open(path string) (*Session, error) { return open(path, false, true) }

// Inspect opens a session read-only under a shared lock. It never repairs,
// truncates or writes anything; a torn tail is ignored and reported by
// [Session.TornBytes]. Append methods return [ErrReadOnly].
func Inspect(path string) (*Session, error) { return open(path, true, true) }

// open opens a session; typed=false skips typing the active branch (for
// callers that only stream the file, like Export). A writer rebuilds the
// listing cache from the ledger just read (it may be missing, stale or
// another file's).
func open(path string, ro, typed bool) (*Session, error) {
	s, err := openFile(path, ro, typed)
	if err == nil && !ro {
		s.writeListing()
	}
	return s, err
}

// openFile is open without touching the listing cache.
func openFile(path string, ro, typed bool) (*Session, error) {
	flag := os.O_RDWR
	if ro {
		flag = os.O_RDONLY
	}
	d, name := pathDir(filepath.Dir(path)), filepath.Base(path)
	f, err := d.openFile(name, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	return openOn(f, d, name, ro, typed)
}

// openOn reads the session file f, name in d, opened read-write unless ro;
// it closes f and d on failure.
func openOn(f *os.File, d sessionDir, name string, ro, typed bool) (*Session, error) {
	how := lockEx
	if ro {
		how = lockSh
	}
	s := &Session{path: filepath.Join(d.path(), name), dir: d, f: f, readOnly: ro, ix: newIndex(), specOK: typed}
	var err error
	if s.ino, err = osfile.FileID(f); err != nil {
		f.Close()
		d.close()
		return nil, fmt.Errorf("open session: %w", err)
	}
	if !ro {
		if s.holder, err = hold(d, name, f); err != nil {
			f.Close()
			d.close()
			return nil, err
		}
	}
	err = s.withLock(how, func() error {
		_, err := s.catchUp()
		sp := s.spec
		s.spec, s.specOK = nil, false
		if sp != nil {
			sp.finish(s.ix.ents)
		}
		s.ix.trim()
		if err != nil {
			return err
		}
		if typed {
			if err := s.syncBranchFrom(sp); err != nil {
				return err
			}
		} else {
			s.ix.cold = true
			s.ix.branchIdx = s.ix.idxTo(s.ix.head)
		}
		if ro {
			return nil
		}
		// Only once everything before the tail has been validated (and the
		// branch typed) may the torn tail be cut: a damaged file is left
		// untouched.
		return s.repairAndSettle()
	})
	if err == nil && !ro && !s.alone && s.needsSettling() {
		err = s.awaitAlone()
	}
	if err != nil {
		f.Close()
		s.closeHolder()
		d.close()
		return nil, err
	}
	return s, nil
}

// closeHolder releases a writer's holder lock.
func (s *Session) closeHolder() error {
	if s.holder == nil {
		return nil
	}
	return s.holder.Close()
}

// repairAndSettle cuts a torn tail and, when this writer is alone
// (claimWriter), settles what other writers left unsettled. The caller
// holds the exclusive lock and has folded and validated the whole file.
func (s *Session) repairAndSettle() error {
	if err := s.repairTail(); err != nil {
		return err
	}
	if s.alone = s.claimWriter(); !s.alone {
		return nil
	}
	return s.settleUnsettled()
}

// aloneWait is the first wait of a writable open that finds another
// writer, and something to settle, for it to go away; each next wait
// doubles, up to aloneMaxWait, for aloneTries tries (about 1 s in all:
// on a loaded machine the lingering child below may wait that long for
// a CPU).
const (
	aloneWait    = 10 * time.Millisecond
	aloneMaxWait = 400 * time.Millisecond
	aloneTries   = 7
)

// needsSettling reports whether a writer alone would record anything:
// another writer's unsettled dispatch or a run without its checkpoint.
func (s *Session) needsSettling() bool {
	return len(s.ix.unsettled()) > 0 || len(s.ix.openRuns) > 0
}

// awaitAlone retries claimWriter for a while, without holding the file
// lock in between, before it leaves what it found unsettled to the
// writer it saw: the "writer" may be a killed process's child between
// fork and exec, which still holds the session's descriptor for a few
// milliseconds after its parent's death, longer on a loaded machine (a
// resume right after a crash).
// Once alone, it settles as open does.
func (s *Session) awaitAlone() error {
	wait := aloneWait
	for range aloneTries {
		time.Sleep(wait)
		wait = min(2*wait, aloneMaxWait)
		err := s.withLock(lockEx, func() error {
			if _, err := s.catchUpForeign(); err != nil {
				return err
			}
			return s.repairAndSettle()
		})
		if err != nil || s.alone {
			return err // open rewrites the listing cache
		}
	}
	slog.Info("session: another writer has the session open; what it left unsettled is left to it", "path", s.path)
	return nil
}

// claimWriter advertises this writable Session as a live writer of the
// file for as long as it is open (osfile.LockLive) and reports whether
// it is the only one: then a dispatch another writer left unsettled was
// left by a writer that is gone, and may be recorded as uncertain. With
// another writer live, its requests in flight are its own to settle, so
// nothing is recorded (they still count in Totals until settled). Where
// the platform cannot tell, every other writer is taken for gone, as
// before writers advertised themselves. The caller holds the exclusive
// lock.
func (s *Session) claimWriter() (alone bool) {
	alone, err := osfile.LockLive(s.f)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return true
	case err != nil:
		// Without the lock this writer cannot tell the others' liveness,
		// nor show its own: leave their dispatches alone.
		slog.Warn("session: writer presence lock not taken; unsettled requests of other writers are left unrecorded", "path", s.path, "err", err)
		return false
	}
	return alone
}

// Alone reports whether this writable Session found no other live
// writer of the file when it was opened (see claimWriter): whatever
// another process left unsettled then was left by one that is gone. It
// is false for [Inspect].
func (s *Session) Alone() bool { return s.alone }

// WriterLive reports whether another Session (in any process) has the
// file open for writing now. Where the platform cannot tell, it returns
// an error wrapping [errors.ErrUnsupported].
func (s *Session) WriterLive() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, ErrClosed
	}
	return osfile.LiveHeld(s.f)
}

// The two lock modes withLock takes.
const (
	lockEx = true
	lockSh = false
)

func (s *Session) withLock(exclusive bool, fn func() error) error {
	if err := osfile.Lock(s.f, exclusive); err != nil {
		return fmt.Errorf("lock session %s: %w", s.path, err)
	}
	err := fn()
	return errors.Join(err, osfile.Unlock(s.f))
}

// catchUp folds every complete record past s.size. The caller holds the
// file lock.
func (s *Session) catchUp() (foldStats, error) {
	st, err := s.f.Stat()
	if err != nil {
		return foldStats{}, fmt.Errorf("stat session %s: %w", s.path, err)
	}
	size := st.Size()
	if size > limits.fileBytes {
		return foldStats{}, &LimitError{Path: s.path, Limit: "file bytes", Max: limits.fileBytes, Got: size}
	}
	if size < s.size {
		return foldStats{}, fmt.Errorf("session %s: file shrank from %d to %d bytes behind this writer", s.path, s.size, size)
	}
	if size == 0 {
		return foldStats{}, &CorruptError{Path: s.path, Line: 1, Err: errors.New("empty file: no header")}
	}
	if size == s.size && s.torn == 0 {
		return foldStats{}, nil
	}
	return s.fold(size)
}

// fold reads the records in [s.size, end) into memory. s.size and s.lines
// advance record by record (batch by batch), so memory always matches a
// prefix of the file. A torn final record or batch is remembered in s.torn
// (never cut here: see repairTail).
func (s *Session) fold(end int64) (foldStats, error) {
	var st foldStats
	lr := newLineReader(s.f.ReadAt, s.size, end, limits.recordBytes)
	if s.ix.ents == nil {
		// Reserve for the whole file up front (records are rarely under
		// 128 bytes); untouched capacity costs address space, not memory.
		s.ix.ents = make([]entMeta, 0, (end-s.size)/128+16)
		if s.specOK && end-s.size >= specMinBytes {
			s.spec = newSpecTyper(s, end-s.size)
		}
	}
	s.torn = 0
	type pending struct {
		off   int64
		n, no int
		m     meta
	}
	var batch []pending
	var want int64 // records still missing from the batch
	lineNo := s.lines
	for {
		line, off, complete, ok, err := lr.next()
		if errors.Is(err, errRecordTooBig) {
			return st, &LimitError{Path: s.path, Limit: "record bytes", Max: int64(limits.recordBytes), Got: int64(len(line)), Line: lineNo + 1}
		}
		if err != nil {
			return st, fmt.Errorf("read session %s: %w", s.path, err)
		}
		if !ok {
			break
		}
		lineNo++
		final := lr.pos == end
		if lineNo > limits.records {
			return st, &LimitError{Path: s.path, Limit: "records", Max: int64(limits.records), Got: int64(lineNo), Line: lineNo}
		}
		tornAt := off
		if len(batch) > 0 {
			tornAt = batch[0].off
		}
		if !complete {
			if lineNo == 1 {
				return st, &CorruptError{Path: s.path, Line: 1, Offset: off, Err: errors.New("header without newline")}
			}
			return st, s.tornTail(tornAt, end, lineNo, "record without newline")
		}
		if lineNo == 1 {
			if err := s.readHeader(line); err != nil {
				return st, err
			}
			s.lines, s.size = 1, lr.pos
			continue
		}
		var m meta
		if err := scanMeta(line, &m, final); err != nil {
			if final && errors.Is(err, errSyntax) {
				return st, s.tornTail(tornAt, end, lineNo, err.Error())
			}
			return st, &CorruptError{Path: s.path, Line: lineNo, Offset: off, Err: err}
		}
		switch {
		case len(batch) > 0:
			// Every later member names its batch and place: a record that
			// does not means the batch mark is damaged (or a member is
			// missing), which is refused rather than taken for a torn tail.
			n := batch[0].m.batch
			if m.batchOf != n || m.batchIndex != int64(len(batch))+1 {
				return st, &CorruptError{Path: s.path, Line: lineNo, Offset: off, Err: fmt.Errorf("not record %d of the batch of %d opened at line %d", len(batch)+1, n, batch[0].no)}
			}
			batch = append(batch, pending{off: off, n: len(line), no: lineNo, m: m})
			want--
		case m.batchOf > 0:
			return st, &CorruptError{Path: s.path, Line: lineNo, Offset: off, Err: fmt.Errorf("record %d of a batch of %d without the batch's first record", m.batchIndex, m.batchOf)}
		case m.batch > 1:
			// Fold a batch only once all of it is in the file: keep its
			// lines buffered until then.
			lr.keep = off
			batch = append(batch, pending{off: off, n: len(line), no: lineNo, m: m})
			want = m.batch - 1
		default:
			if err := s.ix.add(&m, line, off, lineNo, &st); err != nil {
				return st, &CorruptError{Path: s.path, Line: lineNo, Offset: off, Err: err}
			}
			s.lines, s.size = lineNo, lr.pos
			if s.spec != nil {
				s.spec.offer(s.ix.ents)
			}
			continue
		}
		if want > 0 {
			if final {
				return st, s.tornTail(tornAt, end, lineNo, "incomplete batch")
			}
			continue
		}
		for i := range batch {
			p := &batch[i]
			// Meta slices may point into the buffer, which may have moved:
			// scan again from the kept bytes.
			l := lr.at(p.off, p.n)
			if err := scanMeta(l, &p.m, false); err != nil {
				return st, &CorruptError{Path: s.path, Line: p.no, Offset: p.off, Err: err}
			}
			if err := s.ix.add(&p.m, l, p.off, p.no, &st); err != nil {
				return st, &CorruptError{Path: s.path, Line: p.no, Offset: p.off, Err: err}
			}
		}
		batch, lr.keep = batch[:0], -1
		s.lines, s.size = lineNo, lr.pos
		if s.spec != nil {
			s.spec.offer(s.ix.ents)
		}
	}
	return st, nil
}

func (s *Session) readHeader(line []byte) error {
	h, err := decodeHeader(line)
	if err != nil {
		return &CorruptError{Path: s.path, Line: 1, Err: err}
	}
	if h.Version > FormatVersion {
		return &VersionError{Path: s.path, Version: h.Version}
	}
	s.hdr = h
	return nil
}

// tornTail notes an incomplete final record or batch starting at off,
// which is where the folded prefix ends.
func (s *Session) tornTail(off, end int64, lineNo int, why string) error {
	if off != s.size {
		return fmt.Errorf("session %s: torn tail at %d does not follow the folded prefix ending at %d", s.path, off, s.size)
	}
	s.torn, s.tornLine, s.tornWhy = end-off, lineNo, why
	return nil
}

// repairTail truncates a torn tail noted by fold and syncs. The caller holds
// the exclusive lock and has validated everything before the tail.
func (s *Session) repairTail() error {
	if s.torn == 0 {
		return nil
	}
	slog.Warn("session: repairing torn final record", "path", s.path, "line", s.tornLine, "offset", s.size, "bytes", s.torn, "reason", s.tornWhy)
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("repair torn tail of session %s: %w", s.path, err)
	}
	if err := syncData(s.f); err != nil {
		return fmt.Errorf("repair torn tail of session %s: %w", s.path, err)
	}
	s.torn = 0
	return nil
}

// syncBranchFrom makes the branch match the head, taking the entries sp
// typed speculatively if it has all of them.
func (s *Session) syncBranchFrom(sp *specTyper) error {
	if sp != nil {
		if b, idx, ok := sp.branch(s.ix, s.ix.head); ok {
			s.ix.branch, s.ix.branchIdx, s.ix.cold = b, idx, false
			return nil
		}
	}
	return s.syncBranch()
}

// syncBranch makes the branch match the head: the entry indices always,
// the typed entries while they are kept.
func (s *Session) syncBranch() error {
	if s.ix.cold {
		s.ix.branchIdx = s.ix.idxTo(s.ix.head)
		return nil
	}
	b, idx, err := s.branchTo(s.ix.head)
	if err != nil {
		return err
	}
	s.ix.branch, s.ix.branchIdx = b, idx
	return nil
}

// idxTo returns the entry indices of the branch root→x, sharing the
// current branch's where they agree; the result never overwrites
// elements callers hold.
func (ix *index) idxTo(x int32) []int32 {
	p, up := ix.above(x)
	return slices.Concat(ix.branchIdx[:p+1], up)
}

// above returns the position p on the current branch of the nearest
// ancestor of x (or x) that is on it (-1: none), and the indices of the
// entries between it and x, root first.
func (ix *index) above(x int32) (p int, up []int32) {
	p = -1
	for j := x; j >= 0; j = ix.ents[j].parent {
		if k, found := slices.BinarySearch(ix.branchIdx, j); found {
			p = k
			break
		}
		up = append(up, j)
	}
	slices.Reverse(up)
	return p, up
}

// branchTo returns the typed branch root→x, reusing the kept branch (the
// caller has made sure it is kept: keepBranch). The result never
// overwrites elements callers of Branch may hold.
func (s *Session) branchTo(x int32) ([]Entry, []int32, error) {
	ix := s.ix
	p, up := ix.above(x)
	typed, err := s.readEntries(up, &s.alloc)
	if err != nil {
		return nil, nil, err
	}
	if p < 0 {
		return typed, up, nil
	}
	if p+1 == len(ix.branch) {
		return append(ix.branch, typed...), append(ix.branchIdx, up...), nil
	}
	return slices.Concat(ix.branch[:p+1], typed), slices.Concat(ix.branchIdx[:p+1], up), nil
}

// readEntries decodes the entries at the given indices, which must be in
// increasing order, reading the file sequentially in large chunks; one
// goroutine carves their strings from a.
func (s *Session) readEntries(idx []int32, a *strAlloc) ([]Entry, error) {
	if len(idx) == 0 {
		return nil, nil
	}
	out := make([]Entry, len(idx))
	workers := min(runtime.GOMAXPROCS(0), 4, len(idx)/parallelTypingMin)
	if workers < 2 {
		return out, s.typeEntries(idx, out, a)
	}
	// Long branches (opening a big session) are typed by several
	// goroutines, each over a contiguous part with its own allocator.
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := len(idx)*w/workers, len(idx)*(w+1)/workers
		wg.Go(func() { errs[w] = s.typeEntries(idx[lo:hi], out[lo:hi], new(strAlloc)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parallelTypingMin is the number of entries per goroutine below which
// typing stays on one goroutine.
const parallelTypingMin = 20000

// typeEntries decodes the entries at idx (increasing) into out.
func (s *Session) typeEntries(idx []int32, out []Entry, a *strAlloc) error {
	var buf []byte
	var bufOff int64
	for k, i := range idx {
		em := s.ix.ents[i]
		if em.off < bufOff || em.off+int64(em.n) > bufOff+int64(len(buf)) {
			// Read up to the last entry asked for (the rest of a branch
			// of a big file in chunks), not past it.
			last := s.ix.ents[idx[len(idx)-1]]
			n := max(int64(em.n), min(readChunk*4, last.off+int64(last.n)-em.off))
			if int64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			got, err := s.f.ReadAt(buf, em.off)
			if int64(got) < int64(em.n) {
				return s.unreadable(em, err)
			}
			buf, bufOff = buf[:got], em.off
		}
		line := buf[em.off-bufOff : em.off-bufOff+int64(em.n)]
		if lineSum(line) != em.sum {
			return &ChangedError{Path: s.path, Line: int(em.line()), Why: "the entry's line no longer holds the bytes that were folded"}
		}
		e, err := decodeEntry(line, a)
		if err == nil {
			err = s.checkLinks(&e, i, idx, out, k)
		}
		if err != nil {
			return &CorruptError{Path: s.path, Line: int(em.line()), Offset: em.off, Err: err}
		}
		out[k] = e
	}
	return nil
}

// checkLinks checks that the typed entry e (index i, out[k] to be) has the
// id and parent the opening scanner indexed it under. The scanner reads only
// the first members of a canonical line; a line whose id or parent come
// later (or twice) would otherwise sit in the tree under links its body
// contradicts. On success e.Parent shares the parent's string.
func (s *Session) checkLinks(e *Entry, i int32, idx []int32, out []Entry, k int) error {
	if !s.ix.sameID(i, e.ID) {
		return fmt.Errorf("entry id %q differs from the id indexed for the line (members out of canonical order)", e.ID)
	}
	p := s.ix.ents[i].parent
	switch {
	case p < 0:
		if e.Parent != "" {
			return fmt.Errorf("entry %q: parent %q differs from the indexed root (members out of canonical order)", e.ID, e.Parent)
		}
	case k > 0 && idx[k-1] == p:
		if e.Parent != out[k-1].ID {
			return fmt.Errorf("entry %q: parent %q differs from the indexed parent %q (members out of canonical order)", e.ID, e.Parent, out[k-1].ID)
		}
		e.Parent = out[k-1].ID // share the string
	default:
		if !s.ix.sameID(p, e.Parent) {
			return fmt.Errorf("entry %q: parent %q differs from the indexed parent (members out of canonical order)", e.ID, e.Parent)
		}
	}
	return nil
}

// Path returns the session file path.
func (s *Session) Path() string { return s.path }

// Header returns the session header.
func (s *Session) Header() Header { return s.hdr }

// Head returns the active head entry id ("" for a session without entries).
func (s *Session) Head() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ix.head < 0 {
		return ""
	}
	return string(s.ix.headID)
}

// Entry returns the entry with the given id.
func (s *Session) Entry(id string) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.ix.ids.getString(id)
	if !ok {
		return Entry{}, false
	}
	if k, found := slices.BinarySearch(s.ix.branchIdx, i); found && !s.ix.cold {
		return s.ix.branch[k], true
	}
	es, err := s.readEntries([]int32{i}, new(strAlloc))
	if err != nil {
		slog.Error("session: reading entry", "path", s.path, "id", id, "err", err)
		return Entry{}, false
	}
	return es[0], true
}

// EntryIDs returns the ids of every entry in the tree (all branches), in
// the order they were appended: what a command resolving an id prefix
// matches against.
func (s *Session) EntryIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, len(s.ix.ents))
	for k, i := range s.ix.ids.hex {
		ids[i] = fmt.Sprintf("%016x", k)
	}
	for id, i := range s.ix.ids.str {
		ids[i] = id
	}
	return slices.DeleteFunc(ids, func(id string) bool { return id == "" })
}

// Len returns the number of entries in the tree (all branches).
func (s *Session) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ix.ents)
}

// Records returns the number of lines folded, header included.
func (s *Session) Records() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lines
}

// Size returns the byte length of the complete records folded.
func (s *Session) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// UnknownRecords counts records of kinds this version does not know; they
// stay in the file and are skipped.
func (s *Session) UnknownRecords() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ix.unknown
}

// TornBytes reports the length of a torn tail that a read-only session
// ignored (always 0 for writable sessions, which repair it).
func (s *Session) TornBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.torn
}

// Totals returns the session's accounting totals.
func (s *Session) Totals() Totals {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totalsLocked()
}

// Checkpoints returns every run checkpoint in file order.
func (s *Session) Checkpoints() []Checkpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return readRecords(s, KindCheckpoint, s.ix.checkpoints, func(r Record) Checkpoint { return *r.Checkpoint })
}

// Delegated returns every delegated_usage record (the children's usage
// mirrored into this session) in file order.
func (s *Session) Delegated() []DelegatedUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return readRecords(s, KindDelegatedUsage, s.ix.delegated, func(r Record) DelegatedUsage { return *r.Delegated })
}

// readRecords decodes the records of one kind at locs. The caller holds
// s.mu.
func readRecords[T any](s *Session, kind string, locs []recLoc, val func(Record) T) []T {
	out := make([]T, 0, len(locs))
	var sc bodyScratch
	var buf []byte
	for _, loc := range locs {
		buf = slices.Grow(buf[:0], int(loc.n))[:loc.n]
		_, err := s.f.ReadAt(buf, loc.off)
		var r Record
		if err == nil {
			r, err = decodeBody(kind, buf, &s.alloc, &sc)
		}
		if err != nil {
			// The line was checked when folded; only I/O can fail here.
			slog.Error("session: reading "+kind, "path", s.path, "line", loc.line, "err", err)
			break
		}
		out = append(out, val(r))
	}
	return out
}

// SetForeignAppendHook installs fn to be told when another writer appended
// to the file since this session last looked. It is called by the
// appending goroutine after the append finished (successfully or not),
// never while any lock is held, so fn may call back into the session.
func (s *Session) SetForeignAppendHook(fn func(ForeignAppend)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = fn
}

// ForeignAppends counts the records other writers appended that this
// session folded in since it was opened.
func (s *Session) ForeignAppends() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.foreign
}

// Refresh folds records other writers appended, under a shared lock,
// without repairing anything. It is how a reader follows a live session.
func (s *Session) Refresh() (ForeignAppend, error) {
	s.mu.Lock()
	var fa ForeignAppend
	if s.closed {
		s.mu.Unlock()
		return fa, ErrClosed
	}
	err := s.withLock(lockSh, func() error {
		var err error
		fa, err = s.catchUpForeign()
		return err
	})
	s.mu.Unlock()
	return fa, err
}

// catchUpForeign folds foreign records and resyncs the branch. A torn tail
// is noted, not cut.
func (s *Session) catchUpForeign() (ForeignAppend, error) {
	before := s.size
	st, err := s.catchUp()
	fa := ForeignAppend{Records: st.records, Entries: st.entries, Bytes: s.size - before, HeadMoved: st.headMoved}
	s.foreign += int64(st.records)
	if st.records > 0 {
		err = errors.Join(err, s.syncBranch())
	}
	return fa, err
}

// Close releases the file.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.readOnly && s.listed.size != s.size {
		s.writeListing()
	}
	return errors.Join(s.f.Close(), s.closeHolder(), s.dir.close())
}
