package session

import (
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The listing cache lets List say whether a session holds usage
// uncertainty without reading the whole file. The ledger is the source of
// truth; the cache, <id>.listing next to the file, only records "the
// first Size bytes of the file with inode Ino hold (or do not hold) an
// uncertainty marker". Writers rewrite it, best effort, on a writable
// Open, when the session becomes uncertain, once listingEvery bytes were
// appended since the last rewrite, and on Close if anything was appended
// (Create writes none); it is never a reason for an append (or Open) to
// fail. Because the file is append-only, a cache that is older than the
// file is still true of its prefix, so List reads only the bytes after
// it; a missing, unreadable or foreign cache makes List read the whole
// file.

// listingEvery bounds how much of a live session List has to read past
// its cache.
const listingEvery = 1 << 20

// listingLen is the fixed length of the cache line: "v1 ino size u crc\n"
// with fixed-width numbers, so a rewrite in place never leaves a stale
// tail.
const listingLen = len("v1 ") + 20 + 1 + 20 + 1 + 1 + 1 + 8 + 1

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
}

func (l listing) encode() []byte {
	u := byte('0')
	if l.uncertain {
		u = '1'
	}
	body := fmt.Sprintf("v1 %020d %020d %c", l.ino, l.size, u)
	return fmt.Appendf(nil, "%s %08x\n", body, crc32.ChecksumIEEE([]byte(body)))
}

// decodeListing parses a cache line; ok is false for anything else (a
// torn or foreign file).
func decodeListing(b []byte) (l listing, ok bool) {
	if len(b) != listingLen || b[len(b)-1] != '\n' {
		return l, false
	}
	f := strings.Fields(string(b))
	if len(f) != 5 || f[0] != "v1" || (f[3] != "0" && f[3] != "1") {
		return l, false
	}
	body := strings.Join(f[:4], " ")
	crc, err := strconv.ParseUint(f[4], 16, 32)
	if err != nil || uint32(crc) != crc32.ChecksumIEEE([]byte(body)) {
		return l, false
	}
	ino, err1 := strconv.ParseUint(f[1], 10, 64)
	size, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return l, false
	}
	return listing{ino: ino, size: size, uncertain: f[3] == "1"}, true
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
	l := listing{ino: s.ino, size: s.size, uncertain: s.ix.totals.Uncertain}
	s.listed = l // on failure too: retried when due again, not per append
	err := writeListingFile(listingPath(s.path), l.encode())
	if err == nil {
		s.listingWarned = false
		return
	}
	if !s.listingWarned {
		s.listingWarned = true
		slog.Warn("session: listing cache not written; listings read the session file instead", "path", s.path, "err", err)
	}
}

func writeListingFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	return errors.Join(err, f.Close())
}

// listedUncertain reports whether the session file f (at path, with inode
// ino and size bytes) holds an uncertainty marker, from the listing cache
// where it vouches for the file and from the ledger for the rest.
func listedUncertain(path string, f *os.File, ino uint64, size int64) (bool, error) {
	if _, err := os.Lstat(legacySidecarPath(path)); err == nil {
		return true, nil
	}
	from := int64(0)
	if b, err := os.ReadFile(listingPath(path)); err == nil {
		if l, ok := decodeListing(b); ok && l.ino == ino && l.size <= size {
			if l.uncertain {
				return true, nil
			}
			from = l.size
		}
	}
	if from == size {
		return false, nil
	}
	return scanUncertain(f, from, size)
}

// scanUncertain reads the complete records in [from, end) of f and reports
// whether one is an uncertainty marker (an own usage_uncertain, or
// delegated usage marked uncertain). It is conservative: a marker in a
// torn batch counts. Lines it cannot read are skipped (the header, damage
// that Open reports).
func scanUncertain(f *os.File, from, end int64) (bool, error) {
	lr := newLineReader(f.ReadAt, from, end, limits.recordBytes)
	var m meta
	var a strAlloc
	for {
		line, off, complete, ok, err := lr.next()
		if errors.Is(err, errRecordTooBig) {
			return false, &LimitError{Limit: "record bytes", Max: int64(limits.recordBytes), Got: int64(len(line)), Line: 0, Path: fmt.Sprintf("%s at offset %d", f.Name(), off)}
		}
		if err != nil {
			return false, err
		}
		if !ok {
			return false, nil
		}
		if !complete || scanMeta(line, &m, false) != nil {
			continue
		}
		switch string(m.kind) {
		case KindUsageUncertain:
			return true, nil
		case KindDelegatedUsage:
			if r, err := decodeRecord(line, &a); err == nil && r.Delegated != nil && r.Delegated.Uncertain {
				return true, nil
			}
		}
	}
}
