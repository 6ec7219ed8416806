package session

import (
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
)

// An open session keeps its active branch typed while it is in use — an
// agent's run reads it on every turn and appends to it — and can give it
// back with [Session.Release] once idle: the branch's texts are the bulk
// of a session (tool outputs, encrypted reasoning), and an open session
// waiting for its next prompt would otherwise hold a copy of its file.
// The file is the source of truth (append-only, every record synced
// before it is folded), so a released branch is typed again from it when
// asked for, each line checked against the digest taken when it was
// folded: a file truncated or rewritten in place behind the session is a
// [ChangedError], never other text.

// lineSeed seeds the digests of folded entry lines (they never leave the
// process).
var lineSeed = maphash.MakeSeed()

// lineSum is the digest of an entry's line kept in its entMeta: a
// changed line passes for the folded one with a chance of 2⁻³² (the
// seed is the process's own).
func lineSum(line []byte) uint32 {
	h := maphash.Bytes(lineSeed, line)
	return uint32(h) ^ uint32(h>>32)
}

// ChangedError reports a session file whose folded records are no longer
// on disk as they were folded: truncated, or rewritten in place, behind
// the open Session. The Session then refuses to append, and its branch is
// not read again from the file until it is opened again (which checks
// the whole file).
type ChangedError struct {
	Path string
	// Line is the first line found changed.
	Line int
	// Why says what was found.
	Why string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("session %s changed on disk behind octet at line %d (%s): nothing of it is sent or appended; close the session and open it again, which checks the whole file", e.Path, e.Line, e.Why)
}

// unreadable is the error for entry em's line read short: a ChangedError
// when the file is shorter than what was folded, else the read's error.
func (s *Session) unreadable(em entMeta, err error) error {
	if st, serr := s.f.Stat(); serr == nil && st.Size() < s.size {
		return &ChangedError{Path: s.path, Line: int(em.line()), Why: fmt.Sprintf("the file was cut to %d of the %d bytes folded", st.Size(), s.size)}
	}
	return fmt.Errorf("read session %s entry at line %d: %w", s.path, em.line(), err)
}

// Release gives back the typed active branch: until something appends an
// entry, [Session.Branch] and the others type what they return from the
// file again, without keeping it (and return nothing once the session is
// closed). The host releases a session it opened for a client, and again
// whenever its activity (a run, a rewind) ends.
func (s *Session) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ix.branch, s.ix.cold = nil, true
	s.alloc = strAlloc{} // its blocks go with the strings carved from them
}

// keepBranch types the active branch again if it was released, and keeps
// it. The caller holds s.mu.
func (s *Session) keepBranch() error {
	if !s.ix.cold {
		return nil
	}
	b, err := s.retype(s.ix.branchIdx, &s.alloc)
	if err != nil {
		return err
	}
	s.ix.branch, s.ix.cold = b, false
	return nil
}

// loadBranch returns the active branch: the kept one, or, when released,
// one typed from the file and not kept. The caller holds s.mu.
func (s *Session) loadBranch() ([]Entry, error) {
	if !s.ix.cold {
		return slices.Clip(s.ix.branch), nil
	}
	return s.retype(s.ix.branchIdx, new(strAlloc))
}

// retype types the entries at idx (increasing) from the file again. A
// changed file makes the session refuse appends from then on. The caller
// holds s.mu.
func (s *Session) retype(idx []int32, a *strAlloc) ([]Entry, error) {
	switch {
	case s.broken != nil:
		return nil, s.broken
	case s.closed:
		return nil, ErrClosed // a released branch is not read after Close
	}
	b, err := s.readEntries(idx, a)
	if ce, ok := errors.AsType[*ChangedError](err); ok {
		s.broken = ce
		slog.Error("session: file changed on disk behind this process", "path", s.path, "line", ce.Line, "why", ce.Why)
	}
	return b, err
}

// Branch returns the active branch from the root to the head; callers
// must not modify the returned entries. While the session keeps its
// branch (see [Session.Release]) it costs nothing; otherwise it is typed
// from the file, and nil when that fails (the error is logged;
// [Session.LoadBranch] returns it).
func (s *Session) Branch() []Entry {
	b, err := s.LoadBranch()
	if err != nil {
		return nil
	}
	return b
}

// LoadBranch is [Session.Branch] with the error of reading a released
// branch back from the file (a [ChangedError] when the file changed
// behind the session).
func (s *Session) LoadBranch() ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := s.loadBranch()
	if err != nil {
		if s.broken == nil && !errors.Is(err, ErrClosed) {
			slog.Error("session: reading the branch", "path", s.path, "err", err)
		}
		return nil, err
	}
	return b, nil
}

// posOf is the position on the active branch of entry id ("": past the
// head). The caller holds s.mu.
func (s *Session) posOf(id string) (int, bool) {
	if id == "" {
		return len(s.ix.branchIdx), true
	}
	i, found := s.ix.ids.getString(id)
	if !found {
		return 0, false
	}
	return slices.BinarySearch(s.ix.branchIdx, i)
}

// BranchBefore returns at most n entries of the active branch just
// before entry id ("": the head's end), oldest first, and how many
// entries come before them: a transcript page, typed alone when the
// session released its branch, so it costs O(n) wherever it is. ok is
// false when id is not on the branch.
func (s *Session) BranchBefore(id string, n int) (page []Entry, older int, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	end, ok := s.posOf(id)
	if !ok {
		return nil, 0, false, nil
	}
	start := max(0, end-max(n, 0))
	if !s.ix.cold {
		return slices.Clip(s.ix.branch[start:end]), start, true, nil
	}
	page, err = s.retype(s.ix.branchIdx[start:end], new(strAlloc))
	return page, start, true, err
}
