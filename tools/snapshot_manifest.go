package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/octet-agent/octet/changes"
)

// Manifests: one JSON object per line and path, sorted by path:
//
//	{"p":path,"m":mode,"d":true,"i":ino}                    a directory
//	{"p":path,"m":mode,"s":size,"h":sum,"t":mtime,"c":ctime,"i":ino}   a file
//
// ("p64" in place of "p", the path's bytes in base64, for a path that is
// not UTF-8),
// with "x":true for a file not kept (and "why":"secret" or "budget" when
// that is not its size), "r":true for a file whose stat was too recent to
// be trusted, and no "h" for a file not kept. A delta manifest begins
// with {"base":sum,"depth":n,"bytes":b,"whole":w} — the manifest it
// changes, the deltas since the last whole manifest including it, their
// size, and that whole manifest's size — and holds only the paths that
// changed, {"p":path,"del":true} for one removed. The stat fields make
// the latest manifest the next process's stat cache; crash recovery
// compares states only.

// manifestChain is where the last manifest written stands.
type manifestChain struct {
	sums     []string // the last whole manifest and the deltas since, pinned
	crcs     []uint32 // their CRC-32C, for the snapshot head
	headSize int64
	depth    int   // deltas since the last whole manifest
	bytes    int64 // their size together
	whole    int64 // the last whole manifest's size
}

// head returns the last manifest ("" before any).
func (c *manifestChain) head() string {
	if len(c.sums) == 0 {
		return ""
	}
	return c.sums[len(c.sums)-1]
}

// maxManifestDepth bounds a chain of deltas (reading a snapshot back
// reads each); past it, or once the deltas add up to the whole
// manifest's size, the next manifest is whole. Writing is so amortized
// at most twice the size of what changed.
const maxManifestDepth = 256

// writeManifest keeps snap's manifest (synced) and makes it the store's
// snapshot head. The manifests of the chain stay pinned: the next delta
// names the head.
func (s *snapshotter) writeManifest(snap *snapshot) error {
	c := &s.chain
	if len(snap.delta) == 0 && c.head() != "" && s.store.Has(c.head(), c.headSize) {
		snap.manifest, snap.manifestSize = c.head(), c.headSize
		return nil
	}
	var data []byte
	if c.head() != "" && c.depth < maxManifestDepth {
		body := encodeDelta(snap.delta)
		if c.bytes+int64(len(body)) < c.whole {
			header := fmt.Sprintf(`{"base":%q,"depth":%d,"bytes":%d,"whole":%d}`+"\n", c.head(), c.depth+1, c.bytes+int64(len(body)), c.whole)
			data = append([]byte(header), body...)
		}
	}
	whole := data == nil
	if whole {
		data = s.encodeTree()
	}
	sum, err := s.store.PutManifest(data)
	if err != nil {
		return fmt.Errorf("keep the snapshot's manifest: %w", err)
	}
	s.store.Pin([]string{sum})
	if whole {
		s.store.Unpin(c.sums)
		*c = manifestChain{whole: int64(len(data))}
	} else {
		c.depth++
		c.bytes += int64(len(data))
	}
	c.sums, c.headSize = append(c.sums, sum), int64(len(data))
	c.crcs = append(c.crcs, changes.ManifestCRC(data))
	snap.manifest, snap.manifestSize = sum, int64(len(data))
	if err := s.store.SetSnapshotHead(changes.SnapshotHead{Manifest: sum, CRC: c.crcOf()}); err != nil {
		slog.Warn("checkpoint: the next process will read the workspace's files again", "err", err)
	}
	return nil
}

// crcOf returns the CRC-32C of each manifest of the chain, by name.
func (c *manifestChain) crcOf() map[string]uint32 {
	m := make(map[string]uint32, len(c.sums))
	for i, sum := range c.sums {
		m[sum] = c.crcs[i]
	}
	return m
}

// encodeTree returns the whole manifest of the tree.
func (s *snapshotter) encodeTree() []byte {
	type line struct {
		rel string
		e   snapEntry
	}
	lines := make([]line, 0, s.entries)
	if s.tree != nil {
		s.tree.each(".", func(rel string, n *node) {
			if n.entry() && n.parent != nil {
				lines = append(lines, line{rel, n.e})
			}
		})
	}
	slices.SortFunc(lines, func(a, b line) int { return strings.Compare(a.rel, b.rel) })
	b := make([]byte, 0, len(lines)*160)
	for _, l := range lines {
		b = appendEntryLine(b, l.rel, l.e)
	}
	return b
}

// encodeDelta returns the lines of a delta's changes.
func encodeDelta(delta []pathChange) []byte {
	var b []byte
	for _, c := range delta {
		if c.has {
			b = appendEntryLine(b, c.path, c.new)
			continue
		}
		b = appendPath(b, c.path)
		b = append(b, `,"del":true}`+"\n"...)
	}
	return b
}

// appendPath appends the "p" member of path p: as a JSON string, or, for
// a name that is not UTF-8 (which a JSON string cannot hold as it is),
// "p64" with its bytes in base64.
func appendPath(b []byte, p string) []byte {
	if !utf8.ValidString(p) {
		b = append(b, `{"p64":"`...)
		b = base64.StdEncoding.AppendEncode(b, []byte(p))
		return append(b, '"')
	}
	b = append(b, `{"p":`...)
	return appendJSONString(b, p)
}

// appendEntryLine appends the manifest line of path p with entry e.
func appendEntryLine(b []byte, p string, e snapEntry) []byte {
	b = appendPath(b, p)
	b = append(b, `,"m":`...)
	b = strconv.AppendUint(b, uint64(e.mode), 10)
	if e.dir {
		b = append(b, `,"d":true,"i":`...)
		b = strconv.AppendUint(b, e.ino, 10)
		return append(b, "}\n"...)
	}
	b = append(b, `,"s":`...)
	b = strconv.AppendInt(b, e.size, 10)
	if e.sum != "" {
		b = append(b, `,"h":"`...)
		b = append(b, e.sum...)
		b = append(b, '"')
	}
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, e.mtime, 10)
	b = append(b, `,"c":`...)
	b = strconv.AppendInt(b, e.ctime, 10)
	b = append(b, `,"i":`...)
	b = strconv.AppendUint(b, e.ino, 10)
	switch e.skip {
	case skipLarge:
		b = append(b, `,"x":true`...)
	case skipSecret:
		b = append(b, `,"x":true,"why":"secret"`...)
	case skipBudget:
		b = append(b, `,"x":true,"why":"budget"`...)
	}
	if e.racy {
		b = append(b, `,"r":true`...)
	}
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string: as it is when it needs no
// escaping (the common case), else through encoding/json (which also
// replaces invalid UTF-8).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// manifestLine is one decoded line. The fast decoder leaves the path in
// pb and the hash in hb (slices of the line), the general one in P and H.
type manifestLine struct {
	pb  []byte
	hb  []byte
	P   string      `json:"p"`
	P64 []byte      `json:"p64"` // a path that is not UTF-8
	D   bool        `json:"d"`
	M   fs.FileMode `json:"m"`
	S   int64       `json:"s"`
	H   string      `json:"h"`
	T   int64       `json:"t"`
	C   int64       `json:"c"`
	I   uint64      `json:"i"`
	X   bool        `json:"x"`
	Why string      `json:"why"`
	R   bool        `json:"r"`
	Del bool        `json:"del"`
}

// entry is the snapEntry of a line.
func (m *manifestLine) entry() snapEntry {
	return m.entryWith(func(b []byte) string { return string(b) })
}

// entryWith is the snapEntry of a line, its hash made a string by str
// when the line is still to hold it.
func (m *manifestLine) entryWith(str func([]byte) string) snapEntry {
	sum := m.H
	if m.hb != nil {
		sum = str(m.hb)
	}
	e := snapEntry{dir: m.D, mode: m.M & changes.ModeBits, size: m.S, sum: sum, mtime: m.T, ctime: m.C, ino: m.I, racy: m.R}
	if m.X {
		e.sum = ""
		switch m.Why {
		case "secret":
			e.skip = skipSecret
		case "budget":
			e.skip = skipBudget
		default:
			e.skip = skipLarge
		}
	}
	if e.dir {
		e.size, e.sum, e.skip = 0, "", skipNone
	}
	return e
}

// decodeLine decodes one manifest line: octet's own shape directly,
// anything else through encoding/json.
func decodeLine(line []byte, m *manifestLine) error {
	*m = manifestLine{}
	if fastLine(line, m) {
		return nil
	}
	*m = manifestLine{}
	if err := json.Unmarshal(line, m); err != nil {
		return err
	}
	m.pb = []byte(m.P)
	if m.P64 != nil {
		m.pb = m.P64
	}
	return nil
}

// fastLine decodes a line of the shape appendEntryLine writes, without
// escapes in its path, in one pass; false for anything else.
func fastLine(b []byte, m *manifestLine) bool {
	const head = `{"p":"`
	if len(b) <= len(head) || string(b[:len(head)]) != head || b[len(b)-1] != '}' {
		return false
	}
	b = b[len(head) : len(b)-1]
	end := 0
	for ; end < len(b) && b[end] != '"'; end++ {
		if c := b[end]; c < 0x20 || c >= 0x80 || c == '\\' {
			return false
		}
	}
	if end == len(b) {
		return false
	}
	m.pb, b = b[:end], b[end+1:]
	for len(b) > 0 {
		if len(b) < 5 || b[0] != ',' || b[1] != '"' {
			return false
		}
		q := 2
		for q < len(b) && b[q] != '"' {
			q++
		}
		if q+1 >= len(b) || b[q+1] != ':' {
			return false
		}
		var ok bool
		if b, ok = fastField(b[2:q], b[q+2:], m); !ok || len(b) > 0 && b[0] != ',' {
			return false
		}
	}
	return true
}

// fastField sets the field key of m from the value b begins with and
// returns what follows the value.
func fastField(key, b []byte, m *manifestLine) ([]byte, bool) {
	ok := true
	switch string(key) {
	case "m":
		var n uint64
		n, b, ok = fastUint(b)
		m.M = fs.FileMode(n)
	case "s":
		m.S, b, ok = fastInt(b)
	case "t":
		m.T, b, ok = fastInt(b)
	case "c":
		m.C, b, ok = fastInt(b)
	case "i":
		m.I, b, ok = fastUint(b)
	case "h":
		if len(b) < 66 || b[0] != '"' || b[65] != '"' {
			return nil, false
		}
		m.hb, b = b[1:65], b[66:]
	case "d", "x", "r", "del":
		if len(b) < 4 || string(b[:4]) != "true" {
			return nil, false
		}
		b = b[4:]
		switch string(key) {
		case "d":
			m.D = true
		case "x":
			m.X = true
		case "r":
			m.R = true
		default:
			m.Del = true
		}
	case "why":
		switch {
		case bytes.HasPrefix(b, []byte(`"secret"`)):
			m.Why = "secret"
		case bytes.HasPrefix(b, []byte(`"budget"`)):
			m.Why = "budget"
		default:
			return nil, false
		}
		b = b[len(`"secret"`):]
	default:
		return nil, false
	}
	return b, ok
}

// fastUint decodes the decimal digits b begins with (at least one) as a
// uint64, and returns what follows them; false on overflow.
func fastUint(b []byte) (uint64, []byte, bool) {
	var n uint64
	i := 0
	for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if n >= math.MaxUint64/10 && (n > math.MaxUint64/10 || d > math.MaxUint64%10) {
			return 0, nil, false
		}
		n = n*10 + d
	}
	return n, b[i:], i > 0
}

// fastInt decodes the decimal integer b begins with (a minus sign, then
// at least one digit) as an int64, and returns what follows it.
func fastInt(b []byte) (int64, []byte, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, rest, ok := fastUint(b)
	switch {
	case !ok || u > math.MaxInt64+1 || u == math.MaxInt64+1 && !neg:
		return 0, nil, false
	case neg:
		return -int64(u), rest, true // math.MinInt64 too: -int64(1<<63) wraps to itself
	}
	return int64(u), rest, true
}

// deltaHeader is a delta manifest's first line.
type deltaHeader struct {
	Base  string `json:"base"`
	Depth int    `json:"depth"`
	Bytes int64  `json:"bytes"`
	Whole int64  `json:"whole"`
}

// load reads back the snapshot whose manifest is sum (the entries and
// what was not kept; no special files or unreadable ones).
func (s *snapshotter) load(sum string) (*snapshot, error) {
	snap, _, err := s.loadChain(sum)
	return snap, err
}

// loadChain reads back the snapshot whose manifest is sum, and where its
// chain stands.
func (s *snapshotter) loadChain(sum string) (*snapshot, manifestChain, error) {
	snap := &snapshot{entries: map[string]snapEntry{}, manifest: sum}
	chain, err := s.readChain(sum, nil, func(p []byte, m *manifestLine) {
		if m.Del {
			delete(snap.entries, string(p))
			return
		}
		snap.entries[string(p)] = m.entry()
	})
	if err != nil {
		return nil, manifestChain{}, err
	}
	snap.manifestSize = chain.headSize
	for p, e := range snap.entries {
		switch e.skip {
		case skipLarge:
			snap.skipped = append(snap.skipped, p)
		case skipSecret:
			snap.secret = append(snap.secret, p)
		case skipBudget:
			snap.overBudget = append(snap.overBudget, p)
		}
	}
	for _, l := range [][]string{snap.skipped, snap.secret, snap.overBudget} {
		slices.Sort(l)
	}
	return snap, chain, nil
}

// readChain calls fn with each line of manifest sum and the manifests it
// builds on, the whole one first, and returns where its chain stands.
// Each manifest is checked against its CRC-32C in crcs when that has it
// (a snapshot head's), else against its name. A line's path is valid
// only during its call.
func (s *snapshotter) readChain(sum string, crcs map[string]uint32, fn func(path []byte, m *manifestLine)) (manifestChain, error) {
	var chain manifestChain
	var m manifestLine
	part := 0 // the part of the line before
	blobs, err := s.store.ScanManifest(sum, crcs, func(i int, line []byte) error {
		if i != part { // a delta's first line: its header
			part = i
			var h deltaHeader
			if err := json.Unmarshal(line, &h); err != nil {
				return fmt.Errorf("the snapshot before the command is damaged: %w", err)
			}
			chain.depth, chain.bytes = h.Depth, h.Bytes
			return nil
		}
		if err := decodeLine(line, &m); err != nil {
			return fmt.Errorf("the snapshot before the command is damaged: %w", err)
		}
		fn(m.pb, &m)
		return nil
	})
	if err != nil {
		return manifestChain{}, fmt.Errorf("read the snapshot before the command: %w", err)
	}
	for _, b := range blobs {
		chain.sums, chain.crcs = append(chain.sums, b.Name), append(chain.crcs, b.CRC)
	}
	chain.whole, chain.headSize = blobs[0].Size, blobs[len(blobs)-1].Size
	return chain, nil
}
