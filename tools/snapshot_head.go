package tools

import (
	"bytes"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"unsafe"

	"github.com/octet-agent/octet/changes"
)

// This file is the snapshot head as a new process's first walk compares
// with it: the store's latest manifest (the previous process's last
// snapshot, with stat fields) read into each directory's entries sorted
// by name — no tree built — while the walk runs, and compared a
// directory at a time as the walk reads them.

// headIndex is the snapshot head's entries by directory.
type headIndex struct {
	dirs map[string][]headEntry // by directory path ("." for the root), sorted by name
}

// headEntry is one entry of a directory of the head.
type headEntry struct {
	name string
	e    snapEntry
	del  bool // while read: a delta removed it
}

// seed reads the store's snapshot head for a first walk to compare the
// stat fields it finds with, and reports whether its hashes must be
// checked against the store (blobs expired since it was written); nil
// when there is none or it cannot be read. The chain continues from it.
func (s *snapshotter) seed() (*headIndex, bool) {
	h, ok := s.store.SnapshotHead()
	if !ok {
		return nil, false
	}
	b := headBuilder{runs: map[string]*headRun{}}
	chain, err := s.readChain(h.Manifest, h.CRC, b.add)
	if err != nil {
		slog.Info("checkpoint: the previous snapshot cannot be read; every file is read again", "workspace", s.root, "err", err)
		return nil, false
	}
	s.store.Unpin(s.chain.sums)
	s.chain = chain
	s.store.Pin(chain.sums)
	verify := s.store.ExpiredAt().After(h.Written)
	s.recordCRC(h, verify)
	return b.index(), verify
}

// recordCRC records the CRC-32C of the head's chain in the head h when it
// lacks them (an older octet wrote it), so the next process checks it
// the cheap way — unless blobs expired since it was written (rewriting
// it would hide that from the next process) or it is no longer the head.
func (s *snapshotter) recordCRC(h changes.SnapshotHead, expired bool) {
	crcs := s.chain.crcOf()
	if expired || maps.Equal(h.CRC, crcs) {
		return
	}
	if now, ok := s.store.SnapshotHead(); !ok || now.Manifest != h.Manifest {
		return
	}
	if err := s.store.SetSnapshotHead(changes.SnapshotHead{Manifest: h.Manifest, CRC: crcs}); err != nil {
		slog.Debug("checkpoint: the snapshot head's CRC-32C not recorded", "err", err)
	}
}

// headBuilder gathers a manifest chain's lines by directory.
type headBuilder struct {
	runs    map[string]*headRun
	last    *headRun // the run of the line before (a manifest's lines come a directory at a time)
	lastDir string
	strs    strArena // the entries' names and hashes
	// free is the unused rest of the chunk the runs' entries are made
	// in (length 0): the run the lines are being added to grows into it
	// in place, so a head's entries are allocated about once, not at
	// each doubling of each directory's.
	free      []headEntry
	chunkSize int // the size of the next chunk
}

// Bounds of a headBuilder's chunks, in entries: the first is small (a
// small workspace's head), each next one twice the last.
const (
	headChunkMin = 256
	headChunkMax = 4096
)

// headRun is one directory's lines as read: in name order with no name
// twice and no removal (the usual whole manifest) unless messy.
type headRun struct {
	ents  []headEntry
	messy bool
}

// add adds a manifest line, path p.
func (b *headBuilder) add(p []byte, m *manifestLine) {
	dir, name := []byte("."), p
	if i := bytes.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i], p[i+1:]
	}
	r := b.last
	if r == nil || string(dir) != b.lastDir {
		b.leave()
		b.lastDir = string(dir) // p is valid only during the call
		if r = b.runs[b.lastDir]; r == nil {
			r = &headRun{}
			b.runs[b.lastDir] = r
		}
		b.last = r
	}
	he := headEntry{name: b.strs.str(name), e: m.entryWith(b.strs.str), del: m.Del}
	if n := len(r.ents); m.Del || n > 0 && r.ents[n-1].name >= he.name {
		r.messy = true
	}
	b.push(r, he)
}

// push appends he to r, the run lines are being added to: a new run
// starts in the chunk's free space and grows there in place; one that
// fills its chunk moves to a new one unless it is half a chunk or more
// (then it grows by itself); any other (a run revisited, a messy chain's)
// grows by itself.
func (b *headBuilder) push(r *headRun, he headEntry) {
	switch n := len(r.ents); {
	case n == 0 && cap(r.ents) == 0:
		if cap(b.free) == 0 {
			b.newChunk(0)
		}
		r.ents = b.free
	case n == cap(r.ents) && b.inChunk(r) && n < headChunkMax/2:
		ents := r.ents
		b.newChunk(n)
		r.ents = append(b.free, ents...)
	}
	r.ents = append(r.ents, he)
}

// newChunk makes b.free a new chunk, with room for twice n entries.
func (b *headBuilder) newChunk(n int) {
	b.chunkSize = min(max(2*b.chunkSize, headChunkMin), headChunkMax)
	b.free = make([]headEntry, 0, max(b.chunkSize, 2*n))
}

// inChunk reports whether r's entries begin the chunk's free space.
func (b *headBuilder) inChunk(r *headRun) bool {
	return cap(r.ents) > 0 && cap(b.free) > 0 && &r.ents[:1][0] == &b.free[:1][0]
}

// leave ends the run of the lines before. When its entries are in the
// chunk, the chunk's free space starts after them and they keep no spare
// capacity (a later line of the run appends to a copy, which is the
// run's own: a directory's lines come back after each of its
// subdirectories' in a whole manifest).
func (b *headBuilder) leave() {
	r := b.last
	if r == nil || !b.inChunk(r) {
		return
	}
	b.free = b.free[len(r.ents):len(r.ents)]
	r.ents = slices.Clip(r.ents)
}

// strArena makes strings of bytes copied into shared chunks, one
// allocation a chunk rather than one a string (a head has two strings an
// entry: its name and its hash). A chunk's bytes are written once, before
// the strings that hold them are made, and never again.
type strArena struct {
	chunk []byte
}

// arenaChunk is the size of a strArena's chunks.
const arenaChunk = 64 << 10

// str returns a string of b's bytes.
func (a *strArena) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > cap(a.chunk)-len(a.chunk) {
		if len(b) > arenaChunk/4 {
			return string(b)
		}
		a.chunk = make([]byte, 0, arenaChunk)
	}
	start := len(a.chunk)
	a.chunk = append(a.chunk, b...)
	return unsafe.String(&a.chunk[start], len(b))
}

// index returns the runs, each sorted by name, with a name's last line
// kept and the names removed left out.
func (b *headBuilder) index() *headIndex {
	b.leave()
	h := &headIndex{dirs: make(map[string][]headEntry, len(b.runs))}
	for dir, r := range b.runs {
		if r.messy {
			slices.SortStableFunc(r.ents, func(x, y headEntry) int { return strings.Compare(x.name, y.name) })
			out := r.ents[:0]
			for i, he := range r.ents {
				if i+1 < len(r.ents) && r.ents[i+1].name == he.name || he.del {
					continue // a later line of its name, or removed
				}
				out = append(out, he)
			}
			r.ents = out
		}
		h.dirs[dir] = r.ents
	}
	return h
}

// find returns the head's entry of path rel, and whether it has one
// (never for the root).
func (h *headIndex) find(rel string) (snapEntry, bool) {
	if h == nil || rel == "." {
		return snapEntry{}, false
	}
	dir, name := ".", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, name = rel[:i], rel[i+1:]
	}
	if parent, ok := h.find(dir); dir != "." && (!ok || !parent.dir) {
		return snapEntry{}, false // under a file, or nothing
	}
	return findName(h.dirs[dir], name)
}

// run returns the entries of directory rel in the head, given its entry
// there (none where it is not a directory).
func (h *headIndex) run(rel string, self snapEntry, had bool) []headEntry {
	if h == nil || rel != "." && !(had && self.dir) {
		return nil
	}
	return h.dirs[rel]
}

// findName returns the entry name of run, sorted by name.
func findName(run []headEntry, name string) (snapEntry, bool) {
	i, ok := slices.BinarySearchFunc(run, name, func(he headEntry, name string) int { return strings.Compare(he.name, name) })
	if !ok {
		return snapEntry{}, false
	}
	return run[i].e, true
}

// noteDir notes in a what directory d, at path rel in a tree walked with
// no tree before it, and each of its entries change from the head — but
// its subdirectories (each noted with its own entries) and the entries
// pass reports, given the head's entry of their name — with the removal
// of whatever the head has there that d has not. The head's entries are
// looked up in d (a map) and only the names the head has not are searched
// for in the head's.
func (h *headIndex) noteDir(rel string, d *node, a *commitAcc, pass func(k *node, o snapEntry, had bool) bool) {
	self, had := h.find(rel)
	a.enter(rel, self, had, d)
	run := h.run(rel, self, had)
	found := 0
	for _, he := range run {
		k := d.kids[he.name]
		if k == nil {
			p := joinRel(rel, he.name)
			a.enter(p, he.e, true, nil)
			if he.e.dir {
				h.removeBelow(p, a)
			}
			continue
		}
		found++
		h.noteKid(rel, k, he.e, true, a, pass)
	}
	if found == len(d.kids) {
		return
	}
	for name, k := range d.kids {
		if _, ok := findName(run, name); !ok {
			h.noteKid(rel, k, snapEntry{}, false, a, pass)
		}
	}
}

// noteKid notes in a what k, an entry of directory rel, changes from o,
// the head's entry of its name (had: there is one), for noteDir.
func (h *headIndex) noteKid(rel string, k *node, o snapEntry, had bool, a *commitAcc, pass func(k *node, o snapEntry, had bool) bool) {
	if k.kind == nodeDir || pass(k, o, had) {
		return
	}
	a.enter("", o, had, k) // its path made only if needed
	if had && o.dir {
		h.removeBelow(joinRel(rel, k.name), a)
	}
}

// removeBelow notes the removal of every entry the head has below the
// directory rel.
func (h *headIndex) removeBelow(rel string, a *commitAcc) {
	for _, he := range h.dirs[rel] {
		p := joinRel(rel, he.name)
		a.enter(p, he.e, true, nil)
		if he.e.dir {
			h.removeBelow(p, a)
		}
	}
}
