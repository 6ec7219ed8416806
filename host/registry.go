package host

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/octet-agent/octet/tools"
)

// Bounds of a registry, for a front door that sets none.
const (
	// DefaultMaxSessions bounds the sessions one registry keeps open.
	DefaultMaxSessions = 32
	// DefaultSessionIdleTimeout is how long an open session without an
	// activity, a pending approval or a request naming it stays open
	// before it is released.
	DefaultSessionIdleTimeout = 15 * time.Minute
)

// Opened is what a [Registry] holds: *OpenSession, or a front door's own
// session type that embeds *OpenSession.
type Opened interface{ openSession() *OpenSession }

// RegistryOptions bound a registry.
type RegistryOptions struct {
	// MaxOpen bounds the open sessions (≤ 0: DefaultMaxSessions): adding
	// one more releases the least recently used idle session, or fails
	// with a *LimitError when every open session is busy.
	MaxOpen int
	// Settle bounds how long closing a session waits for its activity to
	// end after cancelling it (≤ 0: until it ends); the session's file
	// and agent are closed then regardless, and the wait is logged.
	Settle time.Duration
	// Logger receives the closes (nil: slog.Default()).
	Logger *slog.Logger
}

// Registry is the set of sessions one front door (a client connection)
// holds open, by id: it bounds them, releases idle ones, and closes them
// so that a session is closed once, after its activity ended. It is safe
// for concurrent use.
//
// A session is idle when it has no activity, no pending approval and is
// not closing; the registry releases only idle sessions, deciding so
// under the session's lock, so a session released for being idle is
// never one whose run just started. A session the registry released by
// itself is remembered: [Registry.Use] reports [ErrReleased] for it, and
// the front door opens it again rather than telling its client it is
// gone.
type Registry[S Opened] struct {
	opts RegistryOptions
	log  *slog.Logger

	mu   sync.Mutex
	open map[string]S
	// released are the sessions the registry closed by itself.
	released map[string]bool
}

// NewRegistry returns an empty registry bounded by opts.
func NewRegistry[S Opened](opts RegistryOptions) *Registry[S] {
	if opts.MaxOpen <= 0 {
		opts.MaxOpen = DefaultMaxSessions
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Registry[S]{opts: opts, log: log, open: map[string]S{}, released: map[string]bool{}}
}

// Add holds s open, keeping at most MaxOpen sessions: the least recently
// used idle session is released to make room, and without one Add fails
// with a *LimitError. When a session of the same id is held already, Add
// returns it instead (the caller then closes its own).
func (r *Registry[S]) Add(s S) (S, error) {
	id := s.openSession().id
	for {
		r.mu.Lock()
		if existing, ok := r.open[id]; ok {
			r.mu.Unlock()
			return existing, nil
		}
		if len(r.open) < r.opts.MaxOpen {
			r.open[id] = s
			delete(r.released, id)
			r.mu.Unlock()
			return s, nil
		}
		r.mu.Unlock()
		if err := r.releaseOne(); err != nil {
			var zero S
			return zero, err
		}
	}
}

// MakeRoom makes room for one more session before the caller opens it,
// so that a session refused for the bound leaves nothing behind: with
// MaxOpen sessions open, it releases the least recently used idle one,
// and without one it fails with a *LimitError. (Add makes room again
// when others took it meanwhile.)
func (r *Registry[S]) MakeRoom() error {
	for {
		r.mu.Lock()
		full := len(r.open) >= r.opts.MaxOpen
		r.mu.Unlock()
		if !full {
			return nil
		}
		if err := r.releaseOne(); err != nil {
			return err
		}
	}
}

// releaseOne releases the least recently used idle session, or fails
// with a *LimitError when every open session is busy.
func (r *Registry[S]) releaseOne() error {
	open := r.All()
	victim, ok := leastRecentlyUsedIdle(open)
	if !ok {
		return &LimitError{Open: len(open)}
	}
	r.closeIf(victim, "released for another session (open-session bound)", (*OpenSession).idleLocked, true)
	return nil
}

// leastRecentlyUsedIdle returns the idle session used longest ago.
func leastRecentlyUsedIdle[S Opened](open []S) (S, bool) {
	var lru S
	var lruAt time.Time
	found := false
	for _, s := range open {
		o := s.openSession()
		o.mu.Lock()
		idle, at := o.idleLocked(), o.lastUsed
		o.mu.Unlock()
		if idle && (!found || at.Before(lruAt)) {
			lru, lruAt, found = s, at, true
		}
	}
	return lru, found
}

// All returns the open sessions, in no order.
func (r *Registry[S]) All() []S {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]S, 0, len(r.open))
	for _, s := range r.open {
		out = append(out, s)
	}
	return out
}

// Len is how many sessions are open.
func (r *Registry[S]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.open)
}

// Get returns session id as the registry holds it, also while it is
// being closed (closing it then waits for that close).
func (r *Registry[S]) Get(id string) (S, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.open[id]
	return s, ok
}

// Lookup returns session id when it is open and not closing.
func (r *Registry[S]) Lookup(id string) (S, bool) { return r.find(id, false) }

// Reuse returns the open session id, marked used; ok is false when it
// is not open, after a close of it under way has finished: the caller
// then opens it (again).
func (r *Registry[S]) Reuse(id string) (S, bool) { return r.find(id, true) }

// find returns session id when it is open and not closing; use marks it
// used and waits for a close of it under way.
func (r *Registry[S]) find(id string, use bool) (S, bool) {
	var zero S
	r.mu.Lock()
	s, ok := r.open[id]
	r.mu.Unlock()
	if !ok {
		return zero, false
	}
	o := s.openSession()
	o.mu.Lock()
	closing := o.closing
	if use && !closing {
		o.lastUsed = time.Now()
	}
	o.mu.Unlock()
	switch {
	case !closing:
		return s, true
	case use:
		<-o.closed
	}
	return zero, false
}

// Use returns the open session id and marks it used. When it is not
// open, the error says why: [ErrClosed] while a client's close of it is
// under way; [ErrReleased] when the registry released it by itself
// (after a release under way has finished), so the caller opens it
// again; [ErrNotOpen] otherwise.
func (r *Registry[S]) Use(id string) (S, error) {
	var zero S
	r.mu.Lock()
	s, ok := r.open[id]
	released := !ok && r.released[id]
	r.mu.Unlock()
	switch {
	case released:
		return zero, fmt.Errorf("session %s: %w", id, ErrReleased)
	case !ok:
		return zero, fmt.Errorf("session %s: %w", id, ErrNotOpen)
	}
	o := s.openSession()
	o.mu.Lock()
	closing, byRegistry := o.closing, o.released
	if !closing {
		o.lastUsed = time.Now()
	}
	o.mu.Unlock()
	switch {
	case !closing:
		return s, nil
	case !byRegistry:
		return zero, fmt.Errorf("session %s: %w", id, ErrClosed)
	}
	<-o.closed
	return zero, fmt.Errorf("session %s: %w", id, ErrReleased)
}

// Close closes s at a client's request: later requests naming it get
// ErrClosed until it is opened again; its activity, if any, is
// cancelled and waited for (bounded by Settle), the approvals it waits
// for are cancelled, then its file and agent are closed. Closing a
// session twice waits for the first close. The error is closing the
// session's file and agent.
func (r *Registry[S]) Close(s S, why string) error {
	r.closeIf(s, why, nil, false)
	return s.openSession().closeErr
}

// CloseIdle is Close when s is idle (no activity, no pending approval);
// it reports whether s is closed (by this call, or by another close it
// waited for). A busy session is left as it is.
func (r *Registry[S]) CloseIdle(s S, why string) bool {
	if r.closeIf(s, why, (*OpenSession).idleLocked, false) {
		return true
	}
	select {
	case <-s.openSession().closed:
		return true
	default:
		return false
	}
}

// ReleaseIdle releases every session that has stayed idle for idleFor:
// the next request naming one opens it again (ErrReleased).
func (r *Registry[S]) ReleaseIdle(idleFor time.Duration) {
	stale := func(o *OpenSession) bool { return o.idleLocked() && time.Since(o.lastUsed) >= idleFor }
	for _, s := range r.All() {
		r.closeIf(s, "idle", stale, true)
	}
}

// ReleaseIdleUntil runs ReleaseIdle(idleFor) every quarter of idleFor
// until ctx ends.
func (r *Registry[S]) ReleaseIdleUntil(ctx context.Context, idleFor time.Duration) {
	t := time.NewTicker(max(idleFor/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.ReleaseIdle(idleFor)
	}
}

// closeIf closes s when cond, checked under the session's lock as the
// close begins, holds (nil: always); it reports whether it closed s (a
// close already under way is waited for, and counts only without cond).
// released records that the registry, not a client, closed it.
func (r *Registry[S]) closeIf(s S, why string, cond func(*OpenSession) bool, released bool) bool {
	o := s.openSession()
	o.mu.Lock()
	if o.closing {
		o.mu.Unlock()
		<-o.closed
		return cond == nil
	}
	if cond != nil && !cond(o) {
		o.mu.Unlock()
		return false
	}
	o.closing, o.released = true, released
	busy := o.busy
	o.cancelPendingLocked(fmt.Errorf("session %s: %w", o.id, ErrClosed))
	o.mu.Unlock()
	if busy != nil {
		busy.Cancel(why)
		r.settle(o, busy)
	}
	r.mu.Lock()
	if cur, ok := r.open[o.id]; ok && cur.openSession() == o {
		delete(r.open, o.id)
	}
	if released {
		r.released[o.id] = true
	} else {
		delete(r.released, o.id)
	}
	r.mu.Unlock()
	if o.closeErr = o.s.Close(); o.closeErr != nil {
		r.log.Warn("closing session", "session", o.id, "error", o.closeErr)
	}
	close(o.closed)
	r.log.Info("session closed", "session", o.id, "why", why)
	return true
}

// settle waits for the cancelled activity a of o to end, for at most
// Settle.
func (r *Registry[S]) settle(o *OpenSession, a Activity) {
	if r.opts.Settle <= 0 {
		<-a.Done()
		return
	}
	t := time.NewTimer(r.opts.Settle)
	defer t.Stop()
	select {
	case <-a.Done():
	case <-t.C:
		r.log.Error("activity did not settle before its session was closed", "session", o.id)
	}
}

// CloseAll closes every open session's file and agent at once, without
// waiting for activities (the front door has settled them): for a
// connection that ends.
func (r *Registry[S]) CloseAll() {
	r.mu.Lock()
	open := r.open
	r.open = map[string]S{}
	r.mu.Unlock()
	for _, s := range open {
		o := s.openSession()
		o.mu.Lock()
		first := !o.closing
		o.closing = true
		o.mu.Unlock()
		if err := o.s.Close(); err != nil {
			r.log.Warn("closing session", "session", o.id, "error", err)
		}
		if first {
			close(o.closed)
		}
	}
}

// Decide answers with ans the approvals the open sessions wait for whose
// digest (hex, any case) and call id match those given (either may be
// empty: any). Approving needs exactly one match (name the digest when
// more than one approval is pending); denying what matches nothing has
// nothing to do. It returns how many it answered.
func (r *Registry[S]) Decide(ans tools.Approval, callID, digest string) (int, error) {
	var all []*PendingApproval
	for _, s := range r.All() {
		all = append(all, s.openSession().matching(callID, digest)...)
	}
	switch {
	case len(all) == 0 && !ans.Approved:
		return 0, nil
	case len(all) == 0:
		return 0, inputErrorf("no pending approval matches")
	case len(all) > 1 && ans.Approved:
		return 0, inputErrorf("%d approvals are pending: name the digest to approve", len(all))
	}
	for _, p := range all {
		p.Resolve(ans)
	}
	return len(all), nil
}
