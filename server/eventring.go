package server

// eventRing keeps the most recent events, bounded by count and bytes. It
// is a circular buffer: adding an event and evicting the oldest are O(1),
// however long the session has been emitting.
type eventRing struct {
	maxN, maxBytes int
	bytes          int
	// evs is the storage; the events are evs[head], evs[head+1], ... (mod
	// len(evs)), n of them, oldest first. It grows to at most maxN slots.
	evs     []bufferedEvent
	head, n int
	dropped bool // some event was evicted
}

// at returns the i-th oldest buffered event.
func (r *eventRing) at(i int) *bufferedEvent {
	return &r.evs[(r.head+i)%len(r.evs)]
}

func (r *eventRing) add(e bufferedEvent) {
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
func (r *eventRing) grow() {
	evs := make([]bufferedEvent, min(max(2*len(r.evs), 16), r.maxN))
	for i := range r.n {
		evs[i] = *r.at(i)
	}
	r.evs, r.head = evs, 0
}

// evict drops the oldest event, releasing its params.
func (r *eventRing) evict() {
	old := r.at(0)
	r.bytes -= len(old.Params)
	*old = bufferedEvent{}
	r.head = (r.head + 1) % len(r.evs)
	r.n--
	r.dropped = true
}

// after returns the buffered events with seq > after and whether the
// buffer no longer reaches back that far.
func (r *eventRing) after(after, last int64) ([]bufferedEvent, bool) {
	if after >= last {
		return nil, after > last
	}
	oldest := last + 1
	if r.n > 0 {
		oldest = r.at(0).Seq
	}
	// Only an eviction loses events (a resume's session_state takes a seq
	// but is never buffered).
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
	evs := make([]bufferedEvent, 0, r.n-lo)
	for i := lo; i < r.n; i++ {
		evs = append(evs, *r.at(i))
	}
	return evs, truncated
}
