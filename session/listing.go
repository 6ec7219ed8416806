package session

import (
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The listing cache lets List say whether a session holds usage
// uncertainty, and what its known usage adds up to, without reading the
// whole file. The ledger is the source of truth; the cache, <id>.listing
// next to the file, only records "the first Size bytes of the file with
// inode Ino hold (or do not hold) an uncertainty marker, these usage
// records, and their first dispatch not settled within them is at
// PendingOff". A dispatch not settled in the file makes the listing
// uncertain, as it makes [Session.Totals] of a reader: its writer died
// with the request in flight, or the request is in flight now (a file
// cannot tell which; either way its usage is not known yet). Writers rewrite it, best effort, on a writable Open, when the
// session becomes uncertain, once listingEvery bytes were appended since
// the last rewrite, and on Close if anything was appended (Create writes
// none); it is never a reason for an append (or Open) to fail. Because
// the file is append-only, a cache that is older than the file is still
// true of its prefix, so List reads only the bytes after it and adds what
// it finds; a missing, unreadable or foreign cache makes List read the
// whole file.

// listingEvery bounds how much of a live session List has to read past
// its cache.
const listingEvery = 1 << 20

// listingFields is the number of fixed-width numbers after the version:
// inode, size, the uncertainty flag, usage records, the five known
// usage sums, the offset of the last title record (0: none), the
// offset of the first dispatch not settled in the prefix (0: none) and
// the unpriced usage records.
const listingFields = 12

// listingVersion names the cache format. Older caches are not trusted:
// their prefix may hold a title (v2) or an unsettled dispatch (v3) they
// did not note, so List reads such a file whole until a writer rewrites
// it. (v5 added the unpriced count.)
const listingVersion = "v5"

// listingLen is the fixed length of the cache line: the version and
// listingFields numbers of 20 digits, a CRC of 8 hex digits and a
// newline, so a rewrite in place never leaves a stale tail.
const listingLen = len(listingVersion) + listingFields*(1+20) + 1 + 8 + 1

// legacySidecarPath is the marker file older writers created for a session
// holding a marker (its existence means "uncertain"); List still honours it.
func legacySidecarPath(path string) string {
	return strings.TrimSuffix(path, ".jsonl") + ".uncertain"
}

// listingPath is the listing cache of the session file at path.
func listingPath(path string) string {
	return strings.TrimSuffix(path, ".jsonl") + ".listing"
}

// listing is what the cache says.
type listing struct {
	ino       uint64
	size      int64
	uncertain bool
	// records counts the usage records (own and delegated) in the
	// prefix, known sums their known usage.
	records int64
	known   Usage
	// titleOff is the offset of the last title record in the prefix
	// (0: none; offset 0 is the header).
	titleOff int64
	// pendingOff is the offset of the first dispatch record in the
	// prefix that no settlement in the prefix settles (0: none).
	pendingOff int64
	// unpriced counts the prefix's usage records without a price.
	unpriced int64
}

// unsettled reports whether the prefix holds a dispatch it does not
// settle.
func (l listing) unsettled() bool { return l.pendingOff > 0 }

func (l listing) encode() []byte {
	u := int64(0)
	if l.uncertain {
		u = 1
	}
	k := l.known
	body := fmt.Sprintf("%s %020d %020d %020d %020d %020d %020d %020d %020d %020d %020d %020d %020d", listingVersion,
		l.ino, l.size, u, l.records, k.Input, k.CachedInput, k.Output, k.Reasoning, k.CostPicodollars, l.titleOff, l.pendingOff, l.unpriced)
	return fmt.Appendf(nil, "%s %08x\n", body, crc32.ChecksumIEEE([]byte(body)))
}

// decodeListing parses a cache line; ok is false for anything else (a
// torn or foreign file, another version).
func decodeListing(b []byte) (l listing, ok bool) {
	if len(b) != listingLen || b[len(b)-1] != '\n' {
		return l, false
	}
	f := strings.Fields(string(b))
	if len(f) != listingFields+2 || f[0] != listingVersion {
		return l, false
	}
	body := strings.Join(f[:listingFields+1], " ")
	crc, err := strconv.ParseUint(f[listingFields+1], 16, 32)
	if err != nil || uint32(crc) != crc32.ChecksumIEEE([]byte(body)) {
		return l, false
	}
	ino, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return l, false
	}
	var n [listingFields - 1]int64
	for i := range n {
		if n[i], err = strconv.ParseInt(f[i+2], 10, 64); err != nil || n[i] < 0 {
			return l, false
		}
	}
	if n[1] > 1 {
		return l, false
	}
	return listing{ino: ino, size: n[0], uncertain: n[1] == 1, records: n[2],
		known:    Usage{Input: n[3], CachedInput: n[4], Output: n[5], Reasoning: n[6], CostPicodollars: n[7]},
		titleOff: n[8], pendingOff: n[9], unpriced: n[10]}, true
}

// listingDue reports whether the listing cache should be rewritten after
// an append (s.mu held).
func (s *Session) listingDue() bool {
	return s.ix.totals.Uncertain != s.listed.uncertain || s.size-s.listed.size >= listingEvery
}

// writeListing rewrites the listing cache with what this writer knows
// (s.mu held). A failure is logged once per session and otherwise
// ignored: List then reads the ledger itself. It is not synced: a cache
// lost in a crash is only older than the file, which List detects.
func (s *Session) writeListing() {
	t := &s.ix.totals
	l := listing{ino: s.ino, size: s.size, uncertain: t.Uncertain,
		records: int64(t.Requests + t.DelegatedRecords), known: t.Known, unpriced: int64(t.Unpriced)}
	if s.ix.titled {
		l.titleOff = s.ix.titleLoc.off
	}
	l.pendingOff = s.ix.firstPending()
	s.listed = l // on failure too: retried when due again, not per append
	err := writeListingFile(s.dir, listingPath(filepath.Base(s.path)), l.encode())
	if err == nil {
		s.listingWarned = false
		return
	}
	if !s.listingWarned {
		s.listingWarned = true
		slog.Warn("session: listing cache not written; listings read the session file instead", "path", s.path, "err", err)
	}
}

func writeListingFile(d sessionDir, name string, b []byte) error {
	f, err := d.openFile(name, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	return errors.Join(err, f.Close())
}

// listed summarizes the session file f (at path, with inode ino and size
// bytes): whether it holds an uncertainty marker and its known usage,
// from the listing cache where it vouches for the file and from the
// ledger for the rest. A legacy sidecar is the caller's to consult.
func listed(path string, f *os.File, ino uint64, size int64) (listing, error) {
	var l listing
	if b, err := os.ReadFile(listingPath(path)); err == nil {
		if c, ok := decodeListing(b); ok && c.ino == ino && c.size <= size {
			l = c
		}
	}
	if l.size < size {
		if err := scanListing(f, &l, size); err != nil {
			return listing{}, err
		}
	}
	return l, nil
}

// scanListing folds the complete records in [l.size, end) of f into l:
// uncertainty markers (an own usage_uncertain, or delegated usage marked
// uncertain), usage records, as the index accounts them, and the title.
// Dispatches are followed from l.pendingOff when the prefix left one
// unsettled, so a settlement after the prefix is matched with it. It is
// conservative about uncertainty: a marker in a torn batch counts, and a
// settlement in one does not. Lines it cannot read are skipped (the
// header, damage that Open reports).
func scanListing(f *os.File, l *listing, end int64) error {
	from := l.size
	if l.unsettled() && l.pendingOff < from {
		from = l.pendingOff
	}
	lr := newLineReader(f.ReadAt, from, end, limits.recordBytes)
	var m meta
	var a strAlloc
	var ix index
	var d dispatchScan
	for {
		line, off, complete, ok, err := lr.next()
		if errors.Is(err, errRecordTooBig) {
			return &LimitError{Limit: "record bytes", Max: int64(limits.recordBytes), Got: int64(len(line)), Line: 0, Path: fmt.Sprintf("%s at offset %d", f.Name(), off)}
		}
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if !complete || scanMeta(line, &m, false) != nil {
			continue
		}
		d.add(line, off, &m)
		if off < l.size {
			continue // before the cache's end: only its dispatches are read again
		}
		switch string(m.kind) {
		case KindTitle:
			l.titleOff = off
		case KindUsage, KindUsageUncertain, KindDelegatedUsage:
			if r, err := decodeRecord(line, &a); err == nil {
				ix.account(r)
			} else if string(m.kind) == KindUsageUncertain {
				ix.totals.Uncertain = true
			}
		}
	}
	t := ix.totals
	l.size = end
	l.uncertain = l.uncertain || t.Uncertain
	l.records += int64(t.Requests + t.DelegatedRecords)
	l.unpriced += int64(t.Unpriced)
	addUsage(&l.known, &t.Known)
	l.pendingOff = d.first()
	return nil
}

// dispatchScan follows which dispatches a run of records leaves
// unsettled. A settlement counts once its batch is complete, so one in a
// torn final batch settles nothing (as a reader's [Session.Totals] sees
// it).
type dispatchScan struct {
	pending map[string]int64 // dispatch id → its record's offset
	held    []string         // settled in the batch being read
	inBatch bool
}

// add folds one record, scanned into m.
func (d *dispatchScan) add(line []byte, off int64, m *meta) {
	if m.batch > 1 || m.batchOf == 0 {
		d.held, d.inBatch = d.held[:0], m.batch > 1 // a batch left open was torn
	}
	switch string(m.kind) {
	case KindDispatch, KindDispatchSettled:
		id := m.id
		if len(id) == 0 {
			var full meta // "id" after other members: read the whole line
			if scanMeta(line, &full, true) != nil {
				break
			}
			id = full.id
		}
		if string(m.kind) == KindDispatch {
			if d.pending == nil {
				d.pending = map[string]int64{}
			}
			d.pending[string(id)] = off
		} else {
			d.held = append(d.held, string(id))
		}
	}
	if !d.inBatch || m.batchIndex == m.batchOf && m.batchOf > 0 {
		for _, id := range d.held {
			delete(d.pending, id)
		}
		d.held, d.inBatch = d.held[:0], false
	}
}

// first is the offset of the first dispatch left unsettled (0: none).
func (d *dispatchScan) first() int64 {
	var first int64
	for _, off := range d.pending {
		if first == 0 || off < first {
			first = off
		}
	}
	return first
}
