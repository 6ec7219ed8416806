package tools

import (
	"sync"
)

// capture collects one command's combined stdout and stderr: a head
// preview, a tail ring buffer, and a spill file once the output outgrows
// what the model can be shown. Writers are the two drain goroutines; it
// never blocks them on anything but a local disk write, and keeps
// accepting (and counting) bytes after every limit so pipes keep draining.
type capture struct {
	store     *spillStore
	spillFrom int // spill once the stream exceeds this many bytes

	mu       sync.Mutex
	head     []byte
	headCap  int
	tail     []byte // ring buffer, len == tailCap once allocated
	tailCap  int
	tailPos  int
	tailLen  int
	total    int64
	spill    *spillFile
	spillErr bool // storage failure: nothing advertised
	quota    bool // storage limits cut the spill (or prevented it)
	pending  []byte
	progress bool
}

const progressChunkBytes = 4 << 10

func newCapture(store *spillStore, headCap, tailCap, spillFrom int, progress bool) *capture {
	return &capture{
		store:     store,
		spillFrom: min(spillFrom, headCap),
		head:      make([]byte, 0, min(headCap, 64<<10)),
		headCap:   headCap,
		tailCap:   tailCap,
		progress:  progress,
	}
}

// Write records p. It always reports len(p), nil: limits discard bytes but
// never stall the pipe.
func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	rest := p
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(rest))
		c.head = append(c.head, rest[:k]...)
		rest = rest[k:]
	}
	before := c.total
	c.total += int64(n)
	if len(rest) > 0 {
		c.writeTail(rest)
	}
	if c.total > int64(c.spillFrom) {
		c.writeSpill(p, before)
	}
	if c.progress && len(c.pending) < progressChunkBytes {
		c.pending = append(c.pending, p[:min(len(p), progressChunkBytes-len(c.pending))]...)
	}
	return n, nil
}

// writeTail keeps the last tailCap bytes that did not fit in the head.
func (c *capture) writeTail(p []byte) {
	if c.tailCap <= 0 {
		return
	}
	if c.tail == nil {
		c.tail = make([]byte, c.tailCap)
	}
	if len(p) >= c.tailCap {
		copy(c.tail, p[len(p)-c.tailCap:])
		c.tailPos, c.tailLen = 0, c.tailCap
		return
	}
	k := copy(c.tail[c.tailPos:], p)
	if k < len(p) {
		copy(c.tail, p[k:])
	}
	c.tailPos = (c.tailPos + len(p)) % c.tailCap
	c.tailLen = min(c.tailLen+len(p), c.tailCap)
}

// writeSpill stores p (which starts at stream offset before) in the spill
// file, creating it (with the head bytes written so far) on first use.
func (c *capture) writeSpill(p []byte, before int64) {
	if c.spillErr || c.quota || c.store == nil {
		return
	}
	if c.spill == nil {
		sf, err := c.store.create()
		switch {
		case err == errSpillQuota:
			c.quota = true
			return
		case err != nil:
			c.spillErr = true
			return
		}
		c.spill = sf
		// The head holds the whole stream before p (spillFrom <= headCap).
		prefix := c.head[:before]
		if !c.spillBytes(prefix) {
			return
		}
	}
	c.spillBytes(p)
}

// spillBytes writes as much of b as the budget allows; it reports false
// once the spill stopped (quota or error).
func (c *capture) spillBytes(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	granted := c.store.reserve(c.spill, int64(len(b)))
	if granted > 0 {
		if _, err := c.spill.f.Write(b[:granted]); err != nil {
			c.store.unreserve(c.spill, granted)
			c.spillErr = true
			return false
		}
	}
	if granted < int64(len(b)) {
		c.quota = true
		return false
	}
	return true
}

// takeProgress returns and clears the pending progress bytes.
func (c *capture) takeProgress() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	c.pending = nil
	return p
}

// captured is the final state of a capture.
type captured struct {
	head, tail []byte // tail: bytes after the head, possibly with a gap
	total      int64
	omitted    int64 // bytes between head and tail that were not kept

	fullPath, partialPath string
	spillTruncated        bool
	spillError            bool
	spillExpired          bool
	spilledBytes          int64
}

// finish ends the capture and settles the spill file's fate.
func (c *capture) finish() captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := captured{head: c.head, total: c.total}
	if c.tailLen > 0 {
		out.tail = make([]byte, 0, c.tailLen)
		start := (c.tailPos - c.tailLen + c.tailCap) % c.tailCap
		if start+c.tailLen <= c.tailCap {
			out.tail = append(out.tail, c.tail[start:start+c.tailLen]...)
		} else {
			out.tail = append(out.tail, c.tail[start:]...)
			out.tail = append(out.tail, c.tail[:c.tailPos]...)
		}
	}
	out.omitted = c.total - int64(len(out.head)) - int64(len(out.tail))
	if c.spill == nil {
		out.spillTruncated = c.quota
		out.spillError = c.spillErr
		return out
	}
	fate, size := c.store.finish(c.spill, c.spillErr)
	switch {
	case c.spillErr || fate == spillFailed:
		out.spillError = true
	case fate == spillExpired:
		out.spillExpired = true
	case fate == spillDropped:
		out.spillTruncated = c.quota
	case c.quota || size < c.total:
		out.spillTruncated = true
		out.partialPath = c.spill.path
		out.spilledBytes = size
	default:
		out.fullPath = c.spill.path
		out.spilledBytes = size
	}
	return out
}
