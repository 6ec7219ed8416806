package tools

import (
	"errors"
	"sync"
)

// streamID names one of a command's two output streams.
type streamID int

const (
	stdoutStream streamID = iota
	stderrStream
	numStreams
)

// String returns "stdout" or "stderr" (the Details key and the spill
// file name prefix).
func (id streamID) String() string {
	if id == stderrStream {
		return "stderr"
	}
	return "stdout"
}

// spillQueueBytes bounds how far one stream's spill worker may fall
// behind its drain before the drain waits for it.
const spillQueueBytes = 2 << 20

// capture collects one command's output: a head preview and a tail ring
// buffer of both streams combined in arrival order (what the model is
// shown), and, once the output outgrows what the model can be shown, one
// spill file per stream holding that stream from its first byte.
//
// The writers are the two drain goroutines, one per stream. Under mu they
// touch memory only: the previews, the counters and the stream's bounded
// spill queue. Disk work — creating a spill file, writing it, removing
// files evicted for it — is done by one spill worker goroutine per spilled
// stream, outside mu. A drain blocks on the disk only through its own
// stream's queue: when its worker is spillQueueBytes behind, the drain
// waits (mu released) for room, while the other stream and progress carry
// on. Bytes beyond every limit are counted and discarded, so pipes keep
// draining.
type capture struct {
	store     *spillStore
	spillFrom int // spill once the output exceeds this many bytes

	mu       sync.Mutex
	head     []byte
	headCap  int
	tail     []byte // ring buffer, len == tailCap once allocated
	tailCap  int
	tailPos  int
	tailLen  int
	total    int64
	spilling bool // the result will be cut: every stream is spilled
	streams  [numStreams]streamState
	pending  []byte
	progress bool

	workers sync.WaitGroup
}

// streamState is one stream's share of a capture, guarded by capture.mu.
type streamState struct {
	bytes  int64
	prefix []byte       // the stream's bytes before spilling started
	spill  *streamSpill // nil until the stream is spilled
}

// streamSpill is one stream's spill: a queue the stream's drain fills
// under capture.mu and the stream's worker empties. queue, spare, closed
// and stopped are guarded by capture.mu; the rest belong to the worker and
// are read only after it ended.
type streamSpill struct {
	id      streamID
	cond    sync.Cond // L is &capture.mu: the queue, closed or stopped changed
	queue   []byte
	spare   []byte
	closed  bool // the capture finished: the worker ends once the queue is empty
	stopped bool // the worker stores nothing more; new bytes are discarded

	file    *spillFile
	written int64
	quota   bool // limits cut the spill or prevented it
	failed  bool // storage failure: nothing is advertised
	expired bool // the store was closed before the file existed
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

// write records p, read from stream id. It never fails: limits discard
// bytes but never stall the pipe, except that a spilled stream waits for
// room in its bounded queue.
func (c *capture) write(id streamID, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.preview(p)
	s := &c.streams[id]
	s.bytes += int64(len(p))
	if c.store == nil {
		return
	}
	if !c.spilling {
		s.prefix = append(s.prefix, p...)
		if c.total > int64(c.spillFrom) {
			c.startSpilling()
		}
		return
	}
	sp := s.spill
	if sp == nil {
		sp = c.startSpill(id, nil) // the stream's first byte came after the cut
	}
	for !sp.stopped && len(sp.queue) > 0 && len(sp.queue)+len(p) > spillQueueBytes {
		sp.cond.Wait()
	}
	if sp.stopped {
		return
	}
	sp.queue = append(sp.queue, p...)
	sp.cond.Broadcast()
}

// preview adds p to the combined head, tail, count and progress.
func (c *capture) preview(p []byte) {
	rest := p
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(rest))
		c.head = append(c.head, rest[:k]...)
		rest = rest[k:]
	}
	c.total += int64(len(p))
	if len(rest) > 0 {
		c.writeTail(rest)
	}
	if c.progress && len(c.pending) < progressChunkBytes {
		c.pending = append(c.pending, p[:min(len(p), progressChunkBytes-len(c.pending))]...)
	}
}

// startSpilling marks the result as cut and hands every stream's bytes so
// far to a new spill worker for that stream.
func (c *capture) startSpilling() {
	c.spilling = true
	for i := range c.streams {
		s := &c.streams[i]
		if len(s.prefix) > 0 {
			c.startSpill(streamID(i), s.prefix)
			s.prefix = nil
		}
	}
}

// startSpill starts stream id's spill worker with first queued.
func (c *capture) startSpill(id streamID, first []byte) *streamSpill {
	sp := &streamSpill{id: id, queue: first}
	sp.cond.L = &c.mu
	c.streams[id].spill = sp
	c.workers.Add(1)
	go c.runSpill(sp)
	return sp
}

// runSpill is a stream's spill worker: it takes the queued bytes under mu
// and stores them with mu released, until the capture finished.
func (c *capture) runSpill(sp *streamSpill) {
	defer c.workers.Done()
	for {
		c.mu.Lock()
		for len(sp.queue) == 0 && !sp.closed {
			sp.cond.Wait()
		}
		if len(sp.queue) == 0 {
			c.mu.Unlock()
			return
		}
		buf := sp.queue
		sp.queue, sp.spare = sp.spare[:0], nil
		c.mu.Unlock()

		ok := sp.store(c.store, buf)

		c.mu.Lock()
		sp.spare = buf[:0]
		if !ok {
			sp.stopped = true
			sp.queue, sp.spare = nil, nil
		}
		sp.cond.Broadcast()
		c.mu.Unlock()
	}
}

// store writes b to the stream's file, creating it on first use, as far as
// the budget allows. It reports false once the spill stopped.
func (sp *streamSpill) store(s *spillStore, b []byte) bool {
	if sp.file == nil {
		sf, err := s.create(sp.id)
		switch {
		case errors.Is(err, errSpillQuota):
			sp.quota = true
			return false
		case errors.Is(err, errSpillClosed):
			sp.expired = true
			return false
		case err != nil:
			sp.failed = true
			return false
		}
		sp.file = sf
	}
	granted := s.reserve(sp.file, int64(len(b)))
	if granted > 0 {
		if s.writeHook != nil {
			s.writeHook(sp.id)
		}
		if _, err := sp.file.f.Write(b[:granted]); err != nil {
			s.unreserve(sp.file, granted)
			sp.failed = true
			return false
		}
		sp.written += granted
	}
	if granted < int64(len(b)) {
		sp.quota = true
		return false
	}
	return true
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
	streams    [numStreams]streamResult
}

// streamResult is what became of one stream.
type streamResult struct {
	bytes                 int64
	fullPath, partialPath string
	spilledBytes          int64
	spillTruncated        bool
	spillError            bool
	spillExpired          bool
}

// finish ends the capture (the drains have returned): it lets the spill
// workers store what is queued, then settles each file's fate, with mu
// released for all of the file I/O.
func (c *capture) finish() captured {
	c.mu.Lock()
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
	var spills [numStreams]*streamSpill
	for i := range c.streams {
		out.streams[i].bytes = c.streams[i].bytes
		if sp := c.streams[i].spill; sp != nil {
			spills[i] = sp
			sp.closed = true
			sp.cond.Broadcast()
		}
	}
	c.mu.Unlock()
	c.workers.Wait()
	for i, sp := range spills {
		if sp != nil {
			c.settle(&out.streams[i], sp)
		}
	}
	return out
}

// settle records the fate of one stream's spill in r.
func (c *capture) settle(r *streamResult, sp *streamSpill) {
	if sp.file == nil {
		r.spillTruncated = sp.quota
		r.spillError = sp.failed
		r.spillExpired = sp.expired
		return
	}
	fate, size := c.store.finish(sp.file, sp.failed)
	switch {
	case sp.failed || fate == spillFailed:
		r.spillError = true
	case fate == spillExpired:
		r.spillExpired = true
	case fate == spillDropped:
		r.spillTruncated = sp.quota
	case sp.quota || size < r.bytes:
		r.spillTruncated = true
		r.partialPath = sp.file.path
		r.spilledBytes = size
	default:
		r.fullPath = sp.file.path
		r.spilledBytes = size
	}
}
