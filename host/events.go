package host

import (
	"crypto/rand"
	"encoding/json"
)

// Event is one notification a front door emitted for a session and keeps
// for replay: its seq in the session's stream, the method it was sent as
// and its encoded params.
type Event struct {
	Seq    int64           `json:"seq"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// Stream is one open session's numbered event stream in this process:
// each event a front door emits for the session takes the next seq of the
// stream's epoch (a name for this opening of the session: seq counts from
// 1 in each epoch, so a client's cursor is (epoch, seq)), and the most
// recent ones are kept, encoded, for a client that reattaches. Delivery
// is the front door's: it emits in seq order, and an event it takes a seq
// for but does not keep (a snapshot sent again on every reattach) is not
// replayed. A Stream is not safe for concurrent use: the front door
// serializes each session's emissions, so seq order is wire order.
type Stream struct {
	epoch string
	seq   int64
	ring  *EventRing
}

// NewStream returns a stream with a new epoch that keeps at most
// maxEvents events of at most maxBytes of params together.
func NewStream(maxEvents, maxBytes int) *Stream {
	return &Stream{epoch: rand.Text(), ring: NewEventRing(maxEvents, maxBytes)}
}

// Epoch names this opening of the session.
func (st *Stream) Epoch() string { return st.epoch }

// LastSeq is the seq of the stream's last event (0 before the first).
func (st *Stream) LastSeq() int64 { return st.seq }

// Next takes the next seq.
func (st *Stream) Next() int64 {
	st.seq++
	return st.seq
}

// Keep keeps ev (whose seq Next gave) for replay.
func (st *Stream) Keep(ev Event) { st.ring.Add(ev) }

// Replay returns the kept events after the cursor (epoch, afterSeq) and
// whether some events after it are missing. A cursor of another epoch
// (another process, or the session closed and opened again) gets every
// kept event of this one, and is truncated: what came after it in its
// own epoch is only in the transcript. Without an epoch the cursor is
// taken to be of this one; a negative afterSeq means "from the start".
func (st *Stream) Replay(epoch string, afterSeq int64) ([]Event, bool) {
	return Replay(st.ring, st.epoch, st.seq, epoch, afterSeq)
}

// Replay is [Stream.Replay] over ring, which holds events of epoch
// ringEpoch up to seq last; a nil ring (dropped) answers no events,
// truncated when there were some. The events are never nil.
func Replay(ring *EventRing, ringEpoch string, last int64, epoch string, afterSeq int64) ([]Event, bool) {
	var evs []Event
	truncated := ring == nil && last > 0
	switch {
	case ring == nil:
	case epoch != "" && epoch != ringEpoch:
		evs, _ = ring.After(0, last)
		truncated = true
	default:
		evs, truncated = ring.After(max(afterSeq, 0), last)
	}
	if evs == nil {
		evs = []Event{}
	}
	return evs, truncated
}

// EventRing keeps the most recent events, bounded by count and bytes. It
// is a circular buffer: adding an event and evicting the oldest are O(1),
// however long the session has been emitting.
type EventRing struct {
	maxN, maxBytes int
	bytes          int
	// evs is the storage; the events are evs[head], evs[head+1], ... (mod
	// len(evs)), n of them, oldest first. It grows to at most maxN slots.
	evs     []Event
	head, n int
	dropped bool // some event was evicted
}

// NewEventRing returns a ring of at most maxN events of at most maxBytes
// of params together (always at least the newest event).
func NewEventRing(maxN, maxBytes int) *EventRing {
	return &EventRing{maxN: maxN, maxBytes: maxBytes}
}

// at returns the i-th oldest buffered event.
func (r *EventRing) at(i int) *Event {
	return &r.evs[(r.head+i)%len(r.evs)]
}

// Add keeps e, evicting the oldest events beyond the bounds.
func (r *EventRing) Add(e Event) {
	if r.n == len(r.evs) {
		if len(r.evs) < r.maxN {
			r.grow()
		} else {
			r.evict()
		}
	}
	*r.at(r.n) = e
	r.n++
	r.bytes += len(e.Params)
	for r.bytes > r.maxBytes && r.n > 1 {
		r.evict()
	}
}

// grow doubles the storage (up to maxN slots), oldest event first.
func (r *EventRing) grow() {
	evs := make([]Event, min(max(2*len(r.evs), 16), r.maxN))
	for i := range r.n {
		evs[i] = *r.at(i)
	}
	r.evs, r.head = evs, 0
}

// evict drops the oldest event, releasing its params.
func (r *EventRing) evict() {
	old := r.at(0)
	r.bytes -= len(old.Params)
	*old = Event{}
	r.head = (r.head + 1) % len(r.evs)
	r.n--
	r.dropped = true
}

// After returns the kept events with seq > after (of a stream whose last
// seq is last) and whether the ring no longer reaches back that far.
func (r *EventRing) After(after, last int64) ([]Event, bool) {
	if after >= last {
		return nil, after > last
	}
	oldest := last + 1
	if r.n > 0 {
		oldest = r.at(0).Seq
	}
	// Only an eviction loses events (a seq taken but never kept, such as
	// a snapshot's, loses nothing).
	truncated := r.dropped && oldest > after+1
	// Seqs increase along the ring: find the first one > after.
	lo, hi := 0, r.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.at(m).Seq <= after {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == r.n {
		return nil, truncated
	}
	evs := make([]Event, 0, r.n-lo)
	for i := lo; i < r.n; i++ {
		evs = append(evs, *r.at(i))
	}
	return evs, truncated
}
