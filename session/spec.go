package session

import (
	"runtime"
	"slices"
	"sync"
	"unsafe"
)

// Opening a large session has two costly steps: indexing every line (one
// goroutine, in file order, because ids, batches and heads depend on what
// came before) and typing the entries of the active branch. The active
// branch is only known once the last head is read, but in a real session
// nearly every entry ends up on it, so typing starts while indexing still
// runs: a specTyper types every indexed entry, on its own goroutines, into a
// slice indexed by entry number, and the branch is then compacted out of
// it in place. Whatever it cannot vouch for (a line that fails to decode or
// whose id or parent differ from the index, ids not in NewID's form, a read
// error) it leaves untyped, and if the branch needs such an entry the
// branch is typed again the ordinary way (readEntries), which reports the
// same errors as a session opened without it.

// specMinBytes is the file size from which opening types speculatively;
// smaller sessions open fast enough without the extra goroutines. Tests
// lower it.
var specMinBytes int64 = 16 << 20

const (
	// specChunkEntries and specChunkBytes bound the entries handed to a
	// typing goroutine at once.
	specChunkEntries = 4096
	specChunkBytes   = 4 << 20
	// minEntryLine is the shortest possible entry line with its newline,
	// `{"kind":"entry","id":"x"}`: it bounds how many entries a file can
	// hold.
	minEntryLine = 26
)

// specChunk is a run of indexed entries to type: all[lo:]. all is the
// index's entry slice as it was when the chunk was handed out; elements
// below len(all) never change, so reading them races with nothing.
type specChunk struct {
	lo  int
	all []entMeta
}

// specTyper types entries speculatively while the index is being built.
type specTyper struct {
	s *Session
	// store holds the typed entries by entry index; ID "" means untyped.
	// It is sized by the entries' density in the file so far, and grown
	// (only between chunks: no typing goroutine is writing) when the
	// estimate falls short.
	store   []Entry
	n       int64 // bytes of the first fold
	most    int   // entries the fold can hold at most
	sent    int   // entries handed out so far (indexing goroutine only)
	over    bool  // more entries than most: give up
	work    chan specChunk
	pending sync.WaitGroup // chunks handed out and not yet typed
	wg      sync.WaitGroup
}

// newSpecTyper starts typing goroutines for a first fold of n bytes.
func newSpecTyper(s *Session, n int64) *specTyper {
	workers := runtime.GOMAXPROCS(0)
	most := int(min(int64(limits.records), n/minEntryLine+1))
	t := &specTyper{s: s, n: n, most: most, work: make(chan specChunk, 2*workers)}
	for range workers {
		t.wg.Go(t.run)
	}
	return t
}

// grow makes the store hold ents and, at their density so far, the rest
// of the fold with an eighth to spare (reserving the worst case, one
// entry per 26 bytes, held five times the memory of a real session). It
// waits for the chunks handed out before it moves the store. It reports
// false when ents are more than the fold can hold.
func (t *specTyper) grow(ents []entMeta) bool {
	need := len(ents)
	if need > t.most {
		return false
	}
	last := &ents[need-1]
	read := max(last.off+int64(last.n), 1)
	est := int64(need) * t.n / read
	c := int(min(int64(t.most), max(int64(need+need/4), est+est/8+specChunkEntries)))
	t.pending.Wait()
	store := make([]Entry, c)
	copy(store, t.store[:t.sent])
	t.store = store
	return true
}

// offer hands out the entries indexed since the last chunk once there are
// enough of them. It runs on the indexing goroutine.
func (t *specTyper) offer(ents []entMeta) {
	n := len(ents) - t.sent
	if n == 0 {
		return
	}
	first, last := &ents[t.sent], &ents[len(ents)-1]
	if n >= specChunkEntries || last.off-first.off >= specChunkBytes {
		t.flush(ents)
	}
}

func (t *specTyper) flush(ents []entMeta) {
	if t.over || len(ents) == t.sent {
		return
	}
	if len(ents) > len(t.store) && !t.grow(ents) {
		t.over = true
		return
	}
	t.pending.Add(1)
	t.work <- specChunk{lo: t.sent, all: ents[:len(ents):len(ents)]}
	t.sent = len(ents)
}

// finish hands out the rest of ents and waits for the typing goroutines.
func (t *specTyper) finish(ents []entMeta) {
	t.flush(ents)
	close(t.work)
	t.wg.Wait()
}

// run is one typing goroutine.
func (t *specTyper) run() {
	a := new(strAlloc)
	var buf []byte
	for c := range t.work {
		buf = t.typeChunk(c, buf, a)
		t.pending.Done()
	}
}

// typeChunk types the entries of one chunk, reading their span of the
// file at once. It returns the (possibly grown) read buffer.
func (t *specTyper) typeChunk(c specChunk, buf []byte, a *strAlloc) []byte {
	ents := c.all[c.lo:]
	base := ents[0].off
	end := ents[len(ents)-1].off + int64(ents[len(ents)-1].n)
	buf = slices.Grow(buf[:0], int(end-base))[:end-base]
	if got, _ := t.s.f.ReadAt(buf, base); got < len(buf) {
		return buf // left untyped: the ordinary path reports the error
	}
	for k := range ents {
		em := &ents[k]
		i := c.lo + k
		e, err := decodeEntry(buf[em.off-base:em.off-base+int64(em.n)], a)
		if err != nil || !t.linksOK(&e, i, c) {
			continue
		}
		t.store[i] = e
	}
	return buf
}

// linksOK reports whether the typed entry e (entry i) has the id and
// parent it was indexed under, like Session.checkLinks, but reading only
// what no other goroutine writes: the chunk's entries, and the typed
// entries of this chunk. Anything else is left to checkLinks.
func (t *specTyper) linksOK(e *Entry, i int, c specChunk) bool {
	em := &c.all[i]
	if !em.hex() || !keyIs(e.ID, em.key) {
		return false
	}
	p := int(em.parent)
	switch {
	case p < 0:
		return e.Parent == ""
	case p >= c.lo:
		// Typed by this goroutine; untyped (ID "") never matches, as
		// e.Parent is not empty.
		if e.Parent != t.store[p].ID {
			return false
		}
		e.Parent = t.store[p].ID // share the string
		return true
	default:
		return c.all[p].hex() && keyIs(e.Parent, c.all[p].key)
	}
}

// keyIs reports whether id is the NewID-form id with integer form key.
func keyIs(id string, key uint64) bool {
	k, ok := hexID(unsafe.Slice(unsafe.StringData(id), len(id)))
	return ok && k == key
}

// branch returns the typed active branch ending at entry head, compacted
// in place out of the store, or ok=false if an entry on it is untyped.
func (t *specTyper) branch(ix *index, head int32) (b []Entry, idx []int32, ok bool) {
	if t.over {
		return nil, nil, false
	}
	path := ix.path(head)
	if len(path) == 0 {
		return nil, nil, true
	}
	for _, j := range path {
		if t.store[j].ID == "" {
			return nil, nil, false
		}
	}
	out := t.store
	for k, j := range path {
		// j >= k, and later path entries lie beyond j: nothing still
		// needed is overwritten.
		if int(j) != k {
			out[k] = out[j]
		}
	}
	// Drop the entries off the branch, so they can be collected.
	clear(out[len(path):len(ix.ents)])
	t.store = nil
	return out[:len(path)], path, true
}
