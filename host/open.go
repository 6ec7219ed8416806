package host

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Bounds of an open session's event stream, for a front door that sets
// none.
const (
	// DefaultEventBuffer is how many recent events an open session keeps
	// for a client that reattaches.
	DefaultEventBuffer = 4096
	// DefaultEventBufferBytes bounds the same buffer by encoded size.
	DefaultEventBufferBytes = 16 << 20
)

// An Activity holds an open session busy: a run, or an operation that
// must not overlap one (a rewind). An open session has at most one; a
// session with one is never released for being idle, and closing it
// cancels the activity and waits for it to end.
type Activity interface {
	// Cancel asks the activity to end (its session is being closed). It
	// may be called more than once.
	Cancel(why string)
	// Done is closed once the activity has ended and left its session
	// ([OpenSession.End]).
	Done() <-chan struct{}
}

// OpenSession is a session a front door holds open in its [Registry]:
// the session with its agent, the event stream its client reads, the
// activity that holds it busy, the approvals it waits for and its
// lifecycle (last use, closing, closed). One lock guards them all, so
// what a front door asks of them at one instant is seen as one: a run
// starts only in a session that is not closing, a session released for
// being idle is never one whose run just started, and a reattaching
// client's snapshot and the event after it are consistent. A front door
// that keeps state of its own per session embeds *OpenSession in its own
// type.
type OpenSession struct {
	s  *Session
	id string

	mu sync.Mutex
	// events numbers the session's events and keeps the latest for
	// replay (Emit, Reattach).
	events *Stream
	// busy is the session's activity (nil: none).
	busy Activity
	// pending are the approvals the session waits for, by pendingKey.
	pending map[string]*PendingApproval
	// lastUsed is when a request last named the session or its last
	// activity ended.
	lastUsed time.Time
	// closing is set once the session is being closed; closed is
	// closed when its file and agent have been. released records that
	// the registry closed it by itself (idle, or to make room), not a
	// client: a later request naming it opens it again.
	closing  bool
	released bool
	closed   chan struct{}
	// closeErr is what closing the session's file and agent returned
	// (set before closed is closed).
	closeErr error
}

// NewOpenSession returns s held open, its event stream keeping at most
// maxEvents events of at most maxBytes of params together (≤ 0: the
// defaults). The front door adds it to its Registry.
func NewOpenSession(s *Session, maxEvents, maxBytes int) *OpenSession {
	if maxEvents <= 0 {
		maxEvents = DefaultEventBuffer
	}
	if maxBytes <= 0 {
		maxBytes = DefaultEventBufferBytes
	}
	return &OpenSession{
		s: s, id: s.ID(),
		events:   NewStream(maxEvents, maxBytes),
		pending:  map[string]*PendingApproval{},
		lastUsed: time.Now(),
		closed:   make(chan struct{}),
	}
}

// openSession makes *OpenSession, and every type embedding it, an
// [Opened].
func (o *OpenSession) openSession() *OpenSession { return o }

// ID is the session's id.
func (o *OpenSession) ID() string { return o.id }

// Session is the session with its agent.
func (o *OpenSession) Session() *Session { return o.s }

// Epoch names this opening of the session in this process: its events'
// seq counts from 1 in each epoch, so a client's cursor is (epoch, seq).
func (o *OpenSession) Epoch() string { return o.events.Epoch() }

// Start begins the activity start returns, calling start under the
// session's lock: it fails with [ErrClosed] while the session is being
// closed and with a [*BusyError] while another activity holds it, and
// start's own error leaves the session as it was. start must not call
// the session's methods (TryEmit fails while it runs).
func (o *OpenSession) Start(start func() (Activity, error)) (Activity, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.closing:
		return nil, fmt.Errorf("session %s: %w", o.id, ErrClosed)
	case o.busy != nil:
		return nil, &BusyError{SessionID: o.id, Holder: o.busy}
	}
	a, err := start()
	if err != nil {
		return nil, err
	}
	o.busy = a
	return a, nil
}

// Begin begins a (Start of an activity that exists already).
func (o *OpenSession) Begin(a Activity) error {
	_, err := o.Start(func() (Activity, error) { return a, nil })
	return err
}

// End ends a, when it is the session's activity, and marks the session
// used. The activity's owner closes its Done after. The session, idle
// now, gives back its typed branch (session.Session.Release: the file
// holds it, and the next activity types it again); no other activity
// can start in between, so none finds it released while it runs.
func (o *OpenSession) End(a Activity) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.busy == a {
		o.busy = nil
		o.s.sess.Release()
	}
	o.lastUsed = time.Now()
}

// Busy is the session's activity (nil: none).
func (o *OpenSession) Busy() Activity {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.busy
}

// Hold is an activity a close does not cancel: an operation that must
// not overlap a run (a rewind) and that closing the session waits for.
type Hold struct{ done chan struct{} }

// Cancel does nothing: a hold ends when its operation does.
func (*Hold) Cancel(string) {}

// Done is closed once the hold was released.
func (h *Hold) Done() <-chan struct{} { return h.done }

// Hold begins a hold of the session (errors as Start's); the caller
// releases it with Release when its operation is done.
func (o *OpenSession) Hold() (*Hold, error) {
	h := &Hold{done: make(chan struct{})}
	if err := o.Begin(h); err != nil {
		return nil, err
	}
	return h, nil
}

// Release ends the hold h.
func (o *OpenSession) Release(h *Hold) {
	o.End(h)
	close(h.done)
}

// idleLocked reports whether the session has no activity and no pending
// approval and is not closing. The caller holds o.mu.
func (o *OpenSession) idleLocked() bool {
	return o.busy == nil && len(o.pending) == 0 && !o.closing
}

// An Emission is one event a front door emits for a session (Emit).
type Emission interface {
	// Params builds the event's params with its seq.
	Params(seq int64) json.RawMessage
	// Send delivers the params to the client (or not, when it does not
	// show the event: the event is kept for replay either way).
	Send(params json.RawMessage)
}

// A DirectEmission is an Emission that may give up before it takes a
// seq (TryEmit).
type DirectEmission interface {
	Emission
	// Ready reports, under the session's lock, whether to go on.
	Ready() bool
}

// Emit takes the session's next seq, builds the event's params with it,
// keeps the event for replay and sends it, all under the session's
// lock: the emissions of one session are serialized, so seq order is
// the order Send sees.
func (o *OpenSession) Emit(method string, e Emission) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.emitLocked(method, e)
}

// TryEmit is Emit when the session's lock is free and e is Ready; it
// reports whether it emitted. It is for a path that must not wait for
// the session (an event delivered while a run starts under Start's
// lock).
func (o *OpenSession) TryEmit(method string, e DirectEmission) bool {
	if !o.mu.TryLock() {
		return false
	}
	defer o.mu.Unlock()
	if !e.Ready() {
		return false
	}
	o.emitLocked(method, e)
	return true
}

func (o *OpenSession) emitLocked(method string, e Emission) {
	seq := o.events.Next()
	params := e.Params(seq)
	o.events.Keep(Event{Seq: seq, Method: method, Params: params})
	e.Send(params)
}

// Reattachment is an open session as a client that reattaches sees it,
// taken at one instant.
type Reattachment struct {
	// Pending are the approvals the session waits for, oldest first;
	// Resend are those of them to ask the client again, each counted as
	// asked (see [OpenSession.AskEnded]): once for a client that
	// reattached and may have lost its prompt, and again only when no
	// request for it is outstanding, never once per reattach.
	Pending, Resend []*PendingApproval
	// Busy is the session's activity (nil: none).
	Busy Activity
	// Events are the kept events after the cursor, Truncated whether
	// some after it are no longer kept (Stream.Replay); both only when a
	// cursor was given.
	Events    []Event
	Truncated bool
	// Epoch and LastSeq are the stream's epoch and last seq.
	Epoch   string
	LastSeq int64
}

// Reattach returns the session as a client reattaching after the cursor
// (epoch, *afterSeq; nil: none) sees it and hands it to snapshot with
// the next seq, under the session's lock: the event snapshot sends with
// that seq (a snapshot of the session's state, taken but not kept: every
// reattach sends a fresh one) is the first after the events returned.
func (o *OpenSession) Reattach(epoch string, afterSeq *int64, snapshot func(r Reattachment, seq int64)) Reattachment {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := Reattachment{Pending: o.pendingLocked(), Busy: o.busy, Epoch: o.events.Epoch(), LastSeq: o.events.LastSeq()}
	if afterSeq != nil {
		r.Events, r.Truncated = o.events.Replay(epoch, *afterSeq)
	}
	snapshot(r, o.events.Next())
	for _, p := range r.Pending {
		if p.resendableLocked() {
			r.Resend = append(r.Resend, p)
		}
	}
	return r
}
