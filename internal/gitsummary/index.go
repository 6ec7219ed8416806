package gitsummary

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// This file reads git's index file (the "DIRC" format, versions 2 to 4)
// as far as the summary needs: each entry's path, mode, size, mtime,
// object name, stage and the skip-worktree and intent-to-add flags.
// Extensions are not read. A repository using SHA-256 object names does
// not parse (the summary then shows the branch alone).

// Index entry modes (the object types git records).
const (
	modeSymlink    = 0o120000
	modeGitlink    = 0o160000
	modeExecutable = 0o100755
)

// entry is one index entry.
type entry struct {
	name         string
	mode         uint32
	size         uint32
	mtime        time.Time
	sum          [20]byte
	stage        int
	skipWorktree bool
	intentToAdd  bool
}

// Entry layout: ctime and mtime (4 × 4 bytes), dev, ino, mode, uid,
// gid, size (6 × 4), the object name (20) and the flags (2).
const (
	entryFixed  = 62
	offMtime    = 8
	offMode     = 24
	offSize     = 36
	offSum      = 40
	offFlags    = 60
	flagStage   = 0x3000
	flagExtend  = 0x4000
	xflagSkip   = 0x4000
	xflagIntent = 0x2000
)

var errIndex = errors.New("not a git index")

// parseIndex parses an index file's bytes.
func parseIndex(b []byte) ([]entry, error) {
	if len(b) < 12 || !bytes.Equal(b[:4], []byte("DIRC")) {
		return nil, errIndex
	}
	version := binary.BigEndian.Uint32(b[4:8])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("index version %d is not supported", version)
	}
	count := int(binary.BigEndian.Uint32(b[8:12]))
	if count > (len(b)-12)/entryFixed {
		return nil, fmt.Errorf("%w: %d entries cannot fit %d bytes", errIndex, count, len(b))
	}
	out := make([]entry, 0, count)
	off := 12
	prev := ""
	for range count {
		e, n, err := parseEntry(b[off:], version, prev)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		off += n
		prev = e.name
	}
	return out, nil
}

// parseEntry parses one entry at the start of b and returns its length.
func parseEntry(b []byte, version uint32, prev string) (entry, int, error) {
	if len(b) < entryFixed {
		return entry{}, 0, errIndex
	}
	be := binary.BigEndian
	e := entry{
		mode:  be.Uint32(b[offMode:]),
		size:  be.Uint32(b[offSize:]),
		mtime: time.Unix(int64(be.Uint32(b[offMtime:])), int64(be.Uint32(b[offMtime+4:]))),
	}
	copy(e.sum[:], b[offSum:offSum+20])
	flags := be.Uint16(b[offFlags:])
	e.stage = int(flags&flagStage) >> 12
	n := entryFixed
	if flags&flagExtend != 0 {
		if version < 3 || len(b) < n+2 {
			return entry{}, 0, errIndex
		}
		x := be.Uint16(b[n:])
		e.skipWorktree, e.intentToAdd = x&xflagSkip != 0, x&xflagIntent != 0
		n += 2
	}
	if version == 4 {
		strip, w := offsetVarint(b[n:])
		if w == 0 || strip > uint64(len(prev)) {
			return entry{}, 0, errIndex
		}
		n += w
		end := bytes.IndexByte(b[n:], 0)
		if end < 0 {
			return entry{}, 0, errIndex
		}
		e.name = prev[:len(prev)-int(strip)] + string(b[n:n+end])
		return e, n + end + 1, nil
	}
	end := bytes.IndexByte(b[n:], 0)
	if end < 0 {
		return entry{}, 0, errIndex
	}
	e.name = string(b[n : n+end])
	// Entries of versions 2 and 3 are NUL-padded to a multiple of 8.
	total := (n + end + 8) &^ 7
	if total > len(b) {
		return entry{}, 0, errIndex
	}
	return e, total, nil
}

// offsetVarint decodes git's offset varint; w is 0 when b holds none.
func offsetVarint(b []byte) (v uint64, w int) {
	for i, c := range b {
		if i > 0 {
			v++
		}
		if i >= 9 {
			return 0, 0
		}
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}
