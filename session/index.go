package session

import (
	"bytes"
	"fmt"
	"io"
	"unsafe"
)

// entMeta locates one entry in the file. Parents always precede their
// children in the file, so parent indices are smaller than the entry's.
// It is 32 bytes: a million entries' index fits in 32 MB.
type entMeta struct {
	off int64
	// key is the entry's id as an integer when it is hex (see idMap),
	// so that typing can check a decoded id against the indexed one
	// without a map lookup.
	key uint64
	// sum is the line's digest (lineSum): typing the entry again from
	// the file (a released branch) checks that the line is still what
	// was folded.
	sum    uint32
	n      uint32 // line length without the newline
	parent int32  // index into index.ents, or -1 for a root
	// lineHex is the entry's line number, with hexFlag set when its id
	// is hex (lines are at most MaxRecords).
	lineHex uint32
}

// hexFlag marks an entMeta whose id is kept as key.
const hexFlag = 1 << 31

// line is the entry's line number.
func (em *entMeta) line() int32 { return int32(em.lineHex &^ hexFlag) }

// hex reports whether the entry's id is kept as key.
func (em *entMeta) hex() bool { return em.lineHex&hexFlag != 0 }

// newEntMeta returns the entMeta of an entry.
func newEntMeta(off int64, key uint64, hex bool, line []byte, parent int32, lineNo int) entMeta {
	em := entMeta{off: off, key: key, sum: lineSum(line), n: uint32(len(line)), parent: parent, lineHex: uint32(lineNo)}
	if hex {
		em.lineHex |= hexFlag
	}
	return em
}

// recLoc locates one record line.
type recLoc struct {
	off  int64
	n    uint32
	line int32
}

// index is the in-memory state of a session: offsets of entries, the id
// map, the head, accounting, and the typed active branch.
type index struct {
	ents        []entMeta
	ids         idMap
	head        int32
	headID      []byte
	scratch     bodyScratch
	totals      Totals
	checkpoints []recLoc // decoded on demand
	delegated   []recLoc // delegated_usage records, decoded on demand
	// dispatches are the dispatches not yet settled, by id.
	dispatches map[string]pendingDispatch
	// unresolved are the settlements of native steering operations
	// whose writer died before they settled (SettledUnresolved).
	unresolved []recLoc
	recovered  []recLoc // recovered output, decoded on demand
	// title is the last title record's title and titleLoc its line;
	// titled reports that there is one.
	title    string
	titleLoc recLoc
	titled   bool
	// approvals are the approval records, decoded on demand.
	approvals []recLoc
	// reasoning are the typed reasoning records, in file order (few and
	// small: kept decoded).
	reasoning []Reasoning
	unknown   int
	ids0      strAlloc // backing store for id map keys
	// openRuns are the runs with a dispatch and no checkpoint, in the
	// order they started (see OpenRuns); runBuf is the reused buffer
	// their ids are decoded into.
	openRuns []string
	runBuf   []byte

	// branchIdx holds the entry indices of the active branch, root→head;
	// branch is the typed branch while it is kept (see
	// Session.Release), nil while released (cold).
	branch    []Entry
	branchIdx []int32
	cold      bool
}

func newIndex() *index {
	return &index{ids: newIDMap(), head: -1}
}

// trim gives back the room fold reserved for the entries of the file it
// opened (one per 128 bytes, so that opening never grows the slice) once
// their number is known: entries are rarely so short, and an open
// session would keep the rest for good.
func (ix *index) trim() {
	if n := len(ix.ents); cap(ix.ents) > 2*n+64 {
		ix.ents = append(make([]entMeta, 0, n+n/8+16), ix.ents...)
	}
}

// foldStats counts what add folded.
type foldStats struct {
	records, entries int
	headMoved        bool
}

// add folds one complete, non-header record line, already scanned into m,
// into the index. On error the index is unchanged.
func (ix *index) add(m *meta, line []byte, off int64, lineNo int, st *foldStats) error {
	switch string(m.kind) {
	case KindEntry:
		if err := ix.addEntry(m, line, off, lineNo, st); err != nil {
			return err
		}
	case KindHead:
		if len(m.head) == 0 {
			return fmt.Errorf("head record without entry id")
		}
		i, ok := ix.ids.get(m.head)
		if !ok {
			return fmt.Errorf("head record names unknown entry %q", m.head)
		}
		ix.setHead(i, m.head, st)
	case KindUsage, KindUsageUncertain, KindCheckpoint, KindDelegatedUsage:
		// Validate only (a nil allocator keeps no strings): the totals
		// take only numbers, and checkpoints are decoded on demand.
		r, err := decodeBody(string(m.kind), line, nil, &ix.scratch)
		if err != nil {
			return err
		}
		if r.Kind == KindUsageUncertain && !ix.totals.Uncertain {
			// The first marker is the cause: keep its strings.
			if r, err = decodeBody(KindUsageUncertain, line, new(strAlloc), &ix.scratch); err != nil {
				return err
			}
		}
		switch r.Kind {
		case KindCheckpoint:
			ix.checkpoints = append(ix.checkpoints, recLoc{off: off, n: uint32(len(line)), line: int32(lineNo)})
		case KindDelegatedUsage:
			ix.delegated = append(ix.delegated, recLoc{off: off, n: uint32(len(line)), line: int32(lineNo)})
		}
		ix.account(r)
		if r.Kind == KindCheckpoint {
			if err := ix.noteRunLine(KindCheckpoint, line); err != nil {
				return err
			}
		}
	case KindDispatch, KindDispatchSettled, KindRecoveredOutput:
		if string(m.kind) == KindDispatch {
			if err := ix.noteRunLine(KindDispatch, line); err != nil {
				return err
			}
		}
		r, err := decodeBody(string(m.kind), line, nil, &ix.scratch)
		if err != nil {
			return err
		}
		id := m.id
		if len(id) == 0 && r.Kind != KindRecoveredOutput {
			var full meta // "id" after other members: read the whole line
			if err := scanMeta(line, &full, true); err != nil {
				return err
			}
			id = full.id
		}
		if err := ix.addDispatchLog(&r, string(id), recLoc{off: off, n: uint32(len(line)), line: int32(lineNo)}, false); err != nil {
			return err
		}
	case KindTitle:
		title, err := decodeTitle(line)
		if err != nil {
			return err
		}
		ix.setTitle(title, recLoc{off: off, n: uint32(len(line)), line: int32(lineNo)})
	case KindApproval:
		if err := ix.addApproval(line, recLoc{off: off, n: uint32(len(line)), line: int32(lineNo)}); err != nil {
			return err
		}
	case KindReasoning:
		if err := ix.addReasoning(nil, line); err != nil {
			return err
		}
	case KindHeader:
		return fmt.Errorf("header record after the first line")
	default:
		ix.unknown++
	}
	st.records++
	return nil
}

func (ix *index) addEntry(m *meta, line []byte, off int64, lineNo int, st *foldStats) error {
	if len(m.id) == 0 {
		return fmt.Errorf("entry without id")
	}
	parent := int32(-1)
	if len(m.parent) > 0 && ix.head >= 0 && bytes.Equal(m.parent, ix.headID) {
		parent = ix.head // the common case: the entry follows the head
	} else if len(m.parent) > 0 {
		p, ok := ix.ids.get(m.parent)
		if !ok {
			if _, dup := ix.ids.get(m.id); dup {
				return fmt.Errorf("duplicate entry id %q", m.id)
			}
			return fmt.Errorf("entry %q names unknown parent %q", m.id, m.parent)
		}
		parent = p
	}
	i := int32(len(ix.ents))
	key, hex := hexID(m.id)
	// One map operation both checks for a duplicate and inserts.
	if ix.ids.insert(m.id, key, hex, &ix.ids0, i) {
		ix.undoDup(key, hex)
		return fmt.Errorf("duplicate entry id %q", m.id)
	}
	ix.ents = append(ix.ents, newEntMeta(off, key, hex, line, parent, lineNo))
	st.entries++
	ix.setHead(i, m.id, st)
	return nil
}

// undoDup puts back the map slot of a duplicate hex id that insert
// overwrote. It runs only on the error path, so a linear search is fine.
func (ix *index) undoDup(key uint64, hex bool) {
	if !hex {
		return
	}
	for j := range ix.ents {
		if em := &ix.ents[j]; em.hex() && em.key == key {
			ix.ids.hex[key] = int32(j)
			return
		}
	}
}

// sameID reports whether id is the id entry i was indexed under.
func (ix *index) sameID(i int32, id string) bool {
	em := &ix.ents[i]
	if em.hex() {
		k, ok := hexID(unsafe.Slice(unsafe.StringData(id), len(id)))
		return ok && k == em.key
	}
	j, ok := ix.ids.getString(id)
	return ok && j == i
}

func (ix *index) setHead(i int32, id []byte, st *foldStats) {
	if ix.head != i {
		st.headMoved = true
		ix.head = i
		ix.headID = append(ix.headID[:0], id...)
	}
}

// addOwn folds a record this session has just written (line, without
// the newline, at off) from its typed form, sparing a re-parse. The
// batch was validated before writing.
func (ix *index) addOwn(r *Record, line []byte, off int64, lineNo int, st *foldStats) error {
	bs := func(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
	n := len(line)
	switch r.Kind {
	case KindEntry:
		m := meta{kind: bs(KindEntry), id: bs(r.Entry.ID), parent: bs(r.Entry.Parent)}
		if err := ix.addEntry(&m, line, off, lineNo, st); err != nil {
			return err
		}
	case KindHead:
		i, ok := ix.ids.getString(r.Head)
		if !ok {
			return fmt.Errorf("head record names unknown entry %q", r.Head)
		}
		ix.setHead(i, bs(r.Head), st)
	case KindDispatch, KindDispatchSettled, KindRecoveredOutput:
		id := ""
		switch {
		case r.Dispatch != nil:
			id = r.Dispatch.ID
		case r.Settled != nil:
			id = r.Settled.ID
		}
		if err := ix.addDispatchLog(r, id, recLoc{off: off, n: uint32(n), line: int32(lineNo)}, true); err != nil {
			return err
		}
		if r.Dispatch != nil {
			ix.noteRun(KindDispatch, r.Dispatch.RunID)
		}
	case KindTitle:
		ix.setTitle(r.Title, recLoc{off: off, n: uint32(n), line: int32(lineNo)})
	case KindApproval:
		if err := ix.addApproval(nil, recLoc{off: off, n: uint32(n), line: int32(lineNo)}); err != nil {
			return err
		}
	case KindReasoning:
		if err := ix.addReasoning(r.Reasoning, nil); err != nil {
			return err
		}
	default:
		switch r.Kind {
		case KindCheckpoint:
			ix.checkpoints = append(ix.checkpoints, recLoc{off: off, n: uint32(n), line: int32(lineNo)})
			ix.noteRun(KindCheckpoint, r.Checkpoint.RunID)
		case KindDelegatedUsage:
			ix.delegated = append(ix.delegated, recLoc{off: off, n: uint32(n), line: int32(lineNo)})
		}
		ix.account(*r)
	}
	st.records++
	return nil
}

// account folds an accounting record into the totals.
func (ix *index) account(r Record) {
	t := &ix.totals
	switch r.Kind {
	case KindUsage:
		addUsage(&t.Own, r.Usage)
		addUsage(&t.Known, r.Usage)
		t.Requests++
		if unpriced(r.Usage) {
			t.Unpriced++
		}
	case KindUsageUncertain:
		t.UncertainMarkers++
		if !t.Uncertain {
			t.Cause = *r.Uncertain
		}
		t.Uncertain = true
	case KindDelegatedUsage:
		addUsage(&t.Delegated, &r.Delegated.Usage)
		addUsage(&t.Known, &r.Delegated.Usage)
		t.DelegatedRecords++
		if unpriced(&r.Delegated.Usage) {
			t.Unpriced++
		}
		if r.Delegated.Uncertain {
			t.DelegatedUncertain++
			if !t.Uncertain {
				t.Cause = UsageUncertain{Reason: "delegated_uncertain"}
			}
			t.Uncertain = true
		}
	}
}

// unpriced reports whether u has tokens without a cost because its model
// had no price: not marked priced, and (for records from before the mark)
// no cost.
func unpriced(u *Usage) bool {
	return !u.Priced && u.CostPicodollars == 0 && u.Input+u.Output > 0
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

// lineReader reads the lines of a file region through a reusable buffer,
// enforcing the per-record limit. Lines it returns stay valid until the
// next call to next, or, while keep is set, as long as they are at or
// after keep.
type lineReader struct {
	r      func(p []byte, off int64) (int, error)
	off    int64 // next unread file offset
	end    int64 // end of the region
	buf    []byte
	base   int64 // file offset of buf[0]
	pos    int64 // file offset of the next unconsumed byte
	keep   int64 // data from this offset must stay buffered; -1: none
	maxRec int
}

func newLineReader(r func([]byte, int64) (int, error), from, end int64, maxRec int) *lineReader {
	return &lineReader{r: r, off: from, end: end, base: from, pos: from, keep: -1, maxRec: maxRec,
		buf: make([]byte, 0, min(readChunk, end-from+1))}
}

// at returns the buffered bytes of a line returned earlier.
func (lr *lineReader) at(off int64, n int) []byte {
	return lr.buf[off-lr.base : off-lr.base+int64(n)]
}

// next returns the next line without its newline and its offset. complete
// is false for a final piece without a newline (the torn tail); ok is false
// at the end of the region.
func (lr *lineReader) next() (line []byte, off int64, complete, ok bool, err error) {
	for {
		data := lr.buf[lr.pos-lr.base:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			off = lr.pos
			lr.pos += int64(i + 1)
			if i+1 > lr.maxRec {
				return data[:i], off, true, true, errRecordTooBig
			}
			return data[:i], off, true, true, nil
		}
		if lr.off >= lr.end {
			if len(data) == 0 {
				return nil, 0, false, false, nil
			}
			off = lr.pos
			lr.pos += int64(len(data))
			return data, off, false, true, nil
		}
		if len(data) >= lr.maxRec {
			return data, lr.pos, false, true, errRecordTooBig
		}
		if err := lr.fill(); err != nil {
			return nil, 0, false, false, err
		}
	}
}

// fill drops consumed data (except what keep holds) and reads more.
func (lr *lineReader) fill() error {
	from := lr.pos
	if lr.keep >= 0 && lr.keep < from {
		from = lr.keep
	}
	n := copy(lr.buf, lr.buf[from-lr.base:])
	lr.buf = lr.buf[:n]
	lr.base = from
	// Grow for a chunk, or for the rest of the region when that is less
	// (a small file does not get a 1 MiB buffer).
	if rest := lr.end - lr.off; int64(cap(lr.buf)-n) < min(readChunk/2, rest) {
		nb := make([]byte, n, max(2*cap(lr.buf), n+int(min(readChunk, rest))))
		copy(nb, lr.buf)
		lr.buf = nb
	}
	want := min(int64(cap(lr.buf)-n), lr.end-lr.off)
	got, err := lr.r(lr.buf[n:n+int(want)], lr.off)
	lr.buf = lr.buf[:n+got]
	lr.off += int64(got)
	if got == 0 {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

const readChunk = 1 << 20

var errRecordTooBig = fmt.Errorf("record too big")

// idMap maps entry ids to entry indices. Ids in the form NewID makes (16
// lower-case hex digits) are kept as integers: smaller and faster to hash
// than strings, which matters for a million entries. Other ids use a
// string map.
type idMap struct {
	hex map[uint64]int32
	str map[string]int32
}

func newIDMap() idMap {
	return idMap{hex: make(map[uint64]int32), str: make(map[string]int32)}
}

// hexID parses a NewID-shaped id.
func hexID(b []byte) (uint64, bool) {
	if len(b) != 16 {
		return 0, false
	}
	var v uint64
	var bad byte
	for _, c := range b {
		d := hexVal[c]
		bad |= d
		v = v<<4 | uint64(d&0xf)
	}
	return v, bad&0x80 == 0
}

// hexVal maps a lower-case hex digit to its value and every other byte
// to 0xff.
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range hexDigits {
		t[c] = byte(i)
	}
	return t
}()

func (m idMap) get(id []byte) (int32, bool) {
	if k, ok := hexID(id); ok {
		i, ok := m.hex[k]
		return i, ok
	}
	i, ok := m.str[string(id)]
	return i, ok
}

func (m idMap) getString(id string) (int32, bool) {
	return m.get(unsafe.Slice(unsafe.StringData(id), len(id)))
}

// insert records id (with its hexID result key, hex) at index i unless
// it is present, and reports whether it was. A hex id takes one map
// operation: a duplicate overwrites the earlier index, which the caller
// must put back (see index.undoDup). A string key is carved from a only
// when inserted.
func (m idMap) insert(id []byte, key uint64, hex bool, a *strAlloc, i int32) (dup bool) {
	if hex {
		n := len(m.hex)
		m.hex[key] = i
		return len(m.hex) == n
	}
	if _, ok := m.str[string(id)]; ok {
		return true
	}
	m.str[a.str(id)] = i
	return false
}
