package session

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"
)

// AppendEntry appends one entry and makes it the head. A missing ID or
// Time is filled in; an empty Parent defaults to the head at the moment of
// the write (after folding any foreign appends). It returns the entry as
// written.
func (s *Session) AppendEntry(e Entry) (Entry, error) {
	out, err := s.append([]Record{EntryRecord(e)})
	if err != nil {
		return Entry{}, err
	}
	return *out[0].Entry, nil
}

// Append appends a batch of records with one write and one fdatasync. The
// batch is atomic: after a crash either all of it is in the file or none.
// Entries are completed as in [Session.AppendEntry]; an entry whose Parent
// is empty follows the entry before it in the batch, or the head. The last
// entry or head record of the batch becomes the head.
func (s *Session) Append(recs ...Record) error {
	_, err := s.append(recs)
	return err
}

// AppendRecords is [Session.Append] returning the records as written, so
// callers learn the ids and times filled in.
func (s *Session) AppendRecords(recs ...Record) ([]Record, error) {
	return s.append(recs)
}

// SetHead moves the active head to an existing entry (branching). It
// appends a durable head record.
func (s *Session) SetHead(entryID string) error {
	_, err := s.append([]Record{HeadRecord(entryID)})
	return err
}

// append is the write path: lock, fold foreign records, validate, one
// write, fdatasync, then update memory.
func (s *Session) append(in []Record) ([]Record, error) {
	if len(in) == 0 {
		return nil, nil
	}
	recs := make([]Record, len(in))
	now := time.Now().UTC()
	for i, r := range in {
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("append to session: record %d: %w", i, err)
		}
		if r.Kind == KindEntry {
			e := *r.Entry
			if e.ID == "" {
				e.ID = NewID()
			}
			if e.Time.IsZero() {
				e.Time = now
			}
			r.Entry = &e
		}
		recs[i] = r
	}

	s.mu.Lock()
	var fa ForeignAppend
	err := s.appendLocked(recs, &fa)
	hook := s.hook
	s.mu.Unlock()
	if fa.Records > 0 && hook != nil {
		hook(fa)
	}
	if err != nil {
		if strings.Contains(err.Error(), s.path) { // named once is enough
			return nil, fmt.Errorf("append to session: %w", err)
		}
		return nil, fmt.Errorf("append to session %s: %w", s.path, err)
	}
	return recs, nil
}

func (s *Session) appendLocked(recs []Record, fa *ForeignAppend) error {
	if s.closed {
		return ErrClosed
	}
	if s.readOnly {
		return ErrReadOnly
	}
	if s.broken != nil {
		return s.broken
	}
	err := s.withLock(lockEx, func() error {
		var err error
		*fa, err = s.catchUpForeign()
		if err == nil {
			// A dead writer's torn tail is cut before our batch goes
			// where it began.
			err = s.repairTail()
		}
		if err != nil {
			return err
		}
		return s.writeBatch(recs)
	})
	if err == nil && s.listingDue() {
		// The ledger holds the truth; the listing cache follows it.
		s.writeListing()
	}
	return err
}

// writeBatch validates and writes recs at s.size; the caller holds the
// exclusive lock and has folded everything before s.size.
func (s *Session) writeBatch(recs []Record) error {
	ix := s.ix
	// Resolve parents and the resulting head; check references.
	headID := ""
	if ix.head >= 0 {
		headID = string(ix.headID)
	}
	moves := false // the batch holds entries or head records
	var newIdx batchIDs
	next := int32(len(ix.ents))
	for i := range recs {
		switch r := &recs[i]; r.Kind {
		case KindEntry:
			e := r.Entry
			if e.Parent == "" {
				e.Parent = headID
			}
			if _, dup := ix.ids.getString(e.ID); dup {
				return fmt.Errorf("record %d: duplicate entry id %q", i, e.ID)
			}
			if _, dup := newIdx.find(e.ID); dup {
				return fmt.Errorf("record %d: duplicate entry id %q", i, e.ID)
			}
			if e.Parent != "" && !s.known(e.Parent, newIdx) {
				return fmt.Errorf("record %d: parent %q: %w", i, e.Parent, ErrUnknownEntry)
			}
			newIdx = append(newIdx, batchID{e.ID, next, e})
			next++
			headID, moves = e.ID, true
		case KindHead:
			if !s.known(r.Head, newIdx) {
				return fmt.Errorf("head %q: %w", r.Head, ErrUnknownEntry)
			}
			headID, moves = r.Head, true
		case KindDispatch:
			if err := ix.checkNewDispatch(r.Dispatch.ID, recs[:i]); err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
		}
	}

	buf := s.wbuf[:0]
	ends := s.wends[:0]
	defer func() {
		if cap(buf) <= 1<<20 { // keep a small buffer for the next append
			s.wbuf, s.wends = buf[:0], ends[:0]
		}
	}()
	for i, r := range recs {
		start := len(buf)
		var err error
		buf, err = appendRecord(buf, r, i, len(recs))
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if n := len(buf) - start; n > limits.recordBytes {
			return &LimitError{Path: s.path, Limit: "record bytes", Max: int64(limits.recordBytes), Got: int64(n), Line: s.lines + i + 1}
		}
		ends = append(ends, len(buf))
	}
	if got := s.size + int64(len(buf)); got > limits.fileBytes {
		return &LimitError{Path: s.path, Limit: "file bytes", Max: limits.fileBytes, Got: got}
	}
	if got := s.lines + len(recs); got > limits.records {
		return &LimitError{Path: s.path, Limit: "records", Max: int64(limits.records), Got: int64(got), Line: got}
	}

	// The branch after the batch, computed before writing so that nothing
	// can fail once the bytes are durable. A writer moving the branch is
	// in use: a released branch is typed again and kept.
	branch, branchIdx := ix.branch, ix.branchIdx
	if moves {
		if err := s.keepBranch(); err != nil {
			return err
		}
		var err error
		if branch, branchIdx, err = s.prospectiveBranch(headID, newIdx); err != nil {
			return err
		}
	}

	if err := s.durableWrite(buf); err != nil {
		return err
	}

	// Fold our own records into memory.
	var st foldStats
	start, off := 0, s.size
	for i, end := range ends {
		if err := ix.addOwn(&recs[i], buf[start:end-1], off, s.lines+i+1, &st); err != nil {
			// Unreachable: the batch was validated above.
			return fmt.Errorf("fold own record %d: %w", i, err)
		}
		off += int64(end - start)
		start = end
	}
	s.size += int64(len(buf))
	s.lines += len(recs)
	ix.branch, ix.branchIdx = branch, branchIdx
	return nil
}

// batchID is an entry of the batch being written.
type batchID struct {
	id    string
	idx   int32
	entry *Entry
}

// batchIDs is a batch's entries; batches are small, so a slice beats a map.
type batchIDs []batchID

func (b batchIDs) find(id string) (batchID, bool) {
	for _, x := range b {
		if x.id == id {
			return x, true
		}
	}
	return batchID{}, false
}

func (s *Session) known(id string, newIdx batchIDs) bool {
	if _, ok := newIdx.find(id); ok {
		return true
	}
	_, ok := s.ix.ids.getString(id)
	return ok
}

// prospectiveBranch computes the typed branch that will be active after
// recs are folded.
func (s *Session) prospectiveBranch(headID string, newIdx batchIDs) ([]Entry, []int32, error) {
	if headID == "" {
		return nil, nil, nil
	}
	// Walk up through the batch's own entries to an existing one.
	var chain []Entry
	var chainIdx []int32
	id := headID
	for {
		x, ok := newIdx.find(id)
		if !ok {
			break
		}
		chain = append(chain, *x.entry)
		chainIdx = append(chainIdx, x.idx)
		id = x.entry.Parent
	}
	slices.Reverse(chain)
	slices.Reverse(chainIdx)
	x := int32(-1)
	if id != "" {
		x, _ = s.ix.ids.getString(id)
	}
	branch, idx, err := s.branchTo(x)
	if err != nil {
		return nil, nil, err
	}
	if len(chain) == 0 {
		return branch, idx, nil
	}
	// branchTo may return the cached slice itself; appending past its
	// length never touches elements any caller holds.
	return append(branch, chain...), append(idx, chainIdx...), nil
}

// durableWrite writes buf at s.size and syncs it. On failure it truncates
// the file back so no partial record of ours remains.
func (s *Session) durableWrite(buf []byte) error {
	n, err := writeAt(s.f, buf, s.size)
	if err == nil && n < len(buf) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(buf))
	}
	if err == nil {
		err = syncData(s.f)
	}
	if err == nil {
		return nil
	}
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		err = pe.Err // the caller names the file once
	}
	err = fmt.Errorf("write %d bytes at offset %d: %w", len(buf), s.size, err)
	if terr := s.f.Truncate(s.size); terr != nil {
		return errors.Join(err, fmt.Errorf("truncate back to %d: %w", s.size, terr))
	}
	return err
}
