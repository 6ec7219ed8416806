package session

import (
	"bytes"
	"fmt"
	"io"
)

// entMeta locates one entry in the file. Parents always precede their
// children in the file, so parent indices are smaller than the entry's.
type entMeta struct {
	off    int64
	n      uint32 // line length without the newline
	parent int32  // index into index.ents, or -1 for a root
	line   int32
}

// index is the in-memory state of a session: offsets of entries, the id
// map, the head, accounting, and the typed active branch.
type index struct {
	ents        []entMeta
	ids         map[string]int32
	head        int32
	totals      Totals
	checkpoints []Checkpoint
	unknown     int
	ids0        strAlloc // backing store for id map keys

	// branch is the typed active branch, root→head; branchIdx holds the
	// matching entry indices.
	branch    []Entry
	branchIdx []int32
	// branchOK reports that branch matches head.
	branchOK bool
}

func newIndex() *index {
	return &index{ids: make(map[string]int32), head: -1}
}

// foldStats counts what add folded.
type foldStats struct {
	records, entries int
	headMoved        bool
}

// add folds one complete, non-header record line into the index.
func (ix *index) add(line []byte, off int64, lineNo int, a *strAlloc, st *foldStats) error {
	var m meta
	if err := scanMeta(line, &m); err != nil {
		return err
	}
	st.records++
	switch string(m.kind) {
	case KindEntry:
		return ix.addEntry(&m, line, off, lineNo, st)
	case KindHead:
		if len(m.head) == 0 {
			return fmt.Errorf("head record without entry id")
		}
		i, ok := ix.ids[string(m.head)]
		if !ok {
			return fmt.Errorf("head record names unknown entry %q", m.head)
		}
		ix.setHead(i, st)
	case KindUsage, KindUsageUncertain, KindCheckpoint, KindDelegatedUsage:
		r, err := decodeRecord(line, a)
		if err != nil {
			return err
		}
		ix.account(r)
	case KindHeader:
		return fmt.Errorf("header record after the first line")
	default:
		ix.unknown++
	}
	return nil
}

func (ix *index) addEntry(m *meta, line []byte, off int64, lineNo int, st *foldStats) error {
	if len(m.id) == 0 {
		return fmt.Errorf("entry without id")
	}
	if _, dup := ix.ids[string(m.id)]; dup {
		return fmt.Errorf("duplicate entry id %q", m.id)
	}
	parent := int32(-1)
	if len(m.parent) > 0 {
		p, ok := ix.ids[string(m.parent)]
		if !ok {
			return fmt.Errorf("entry %q names unknown parent %q", m.id, m.parent)
		}
		parent = p
	}
	i := int32(len(ix.ents))
	ix.ents = append(ix.ents, entMeta{off: off, n: uint32(len(line)), parent: parent, line: int32(lineNo)})
	ix.ids[ix.ids0.str(m.id)] = i
	st.entries++
	ix.setHead(i, st)
	return nil
}

func (ix *index) setHead(i int32, st *foldStats) {
	if ix.head != i {
		st.headMoved = true
		ix.head = i
		ix.branchOK = false
	}
}

// account folds an accounting record into the totals.
func (ix *index) account(r Record) {
	t := &ix.totals
	switch r.Kind {
	case KindUsage:
		addUsage(&t.Own, r.Usage)
		addUsage(&t.Known, r.Usage)
		t.Requests++
	case KindUsageUncertain:
		t.UncertainMarkers++
		t.Uncertain = true
	case KindDelegatedUsage:
		addUsage(&t.Delegated, &r.Delegated.Usage)
		addUsage(&t.Known, &r.Delegated.Usage)
		t.DelegatedRecords++
		if r.Delegated.Uncertain {
			t.DelegatedUncertain++
			t.Uncertain = true
		}
	case KindCheckpoint:
		ix.checkpoints = append(ix.checkpoints, *r.Checkpoint)
	}
}

func addUsage(dst, u *Usage) {
	dst.Input += u.Input
	dst.CachedInput += u.CachedInput
	dst.Output += u.Output
	dst.Reasoning += u.Reasoning
	dst.CostPicodollars += u.CostPicodollars
}

// path returns the entry indices from the root to entry i.
func (ix *index) path(i int32) []int32 {
	n := 0
	for j := i; j >= 0; j = ix.ents[j].parent {
		n++
	}
	p := make([]int32, n)
	for j := i; j >= 0; j = ix.ents[j].parent {
		n--
		p[n] = j
	}
	return p
}

// commonPrefix is the length of the shared prefix of two paths.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// lineReader reads the records of a file region line by line through a
// reusable buffer, enforcing the per-record limit.
type lineReader struct {
	r        func(p []byte, off int64) (int, error)
	off, end int64 // next unread file offset, end of region
	buf      []byte
	start    int // start of unconsumed data in buf
	lineOff  int64
	maxRec   int
}

// next returns the next line without its newline and its offset. complete
// is false for a final piece without a newline (the torn tail); ok is false
// at the end of the region.
func (lr *lineReader) next() (line []byte, off int64, complete, ok bool, err error) {
	for {
		data := lr.buf[lr.start:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line = data[:i]
			off = lr.lineOff
			lr.start += i + 1
			lr.lineOff += int64(i + 1)
			if i+1 > lr.maxRec {
				return line, off, true, true, errRecordTooBig
			}
			return line, off, true, true, nil
		}
		if lr.off >= lr.end {
			if len(data) == 0 {
				return nil, 0, false, false, nil
			}
			lr.start = len(lr.buf)
			off = lr.lineOff
			lr.lineOff += int64(len(data))
			return data, off, false, true, nil
		}
		if len(data) >= lr.maxRec {
			return data, lr.lineOff, false, true, errRecordTooBig
		}
		// Move the partial line to the front and read more.
		n := copy(lr.buf, data)
		lr.buf = lr.buf[:n]
		lr.start = 0
		if cap(lr.buf)-n < readChunk/2 {
			nb := make([]byte, n, max(2*cap(lr.buf), n+readChunk))
			copy(nb, lr.buf)
			lr.buf = nb
		}
		want := min(int64(cap(lr.buf)-n), lr.end-lr.off)
		got, rerr := lr.r(lr.buf[n:n+int(want)], lr.off)
		lr.buf = lr.buf[:n+got]
		lr.off += int64(got)
		if got == 0 {
			if rerr == nil || rerr == io.EOF {
				rerr = io.ErrUnexpectedEOF
			}
			return nil, 0, false, false, rerr
		}
	}
}

const readChunk = 1 << 20

var errRecordTooBig = fmt.Errorf("record too big")
