package agent

import (
	"fmt"
	"slices"
	"sync"
)

// controlKind says what a queued control asks for.
type controlKind int

const (
	controlSteer controlKind = iota + 1
	controlFollowUp
	controlFinishNow
)

// control is one accepted, not yet delivered control input.
type control struct {
	kind controlKind
	id   string
	text string
}

// controls is a run's control inbox. Submissions and the owner's final
// close decision are serialized by mu, so a control is either accepted
// before the run closes (and then delivered by the owner) or refused with
// ErrRunEnded: never lost. The owner is woken through wake.
type controls struct {
	mu       sync.Mutex
	closed   bool
	next     int
	runID    string
	steering []control // steering and FinishNow inputs, in submission order
	follow   []control
	finish   bool          // a FinishNow was accepted (sticky)
	finishCh chan struct{} // closed when the first FinishNow is accepted
	wake     chan struct{}
}

func newControls(runID string) *controls {
	return &controls{runID: runID, wake: make(chan struct{}, 1), finishCh: make(chan struct{})}
}

// finished returns a channel closed once FinishNow is accepted.
func (c *controls) finished() <-chan struct{} { return c.finishCh }

// submit queues c or refuses it after closure.
func (c *controls) submit(kind controlKind, text string) (string, error) {
	return c.accept(kind, text, nil)
}

// submitSteer accepts a steering input like submit; native, when set, is
// offered it first (under the lock, so the input keeps its place) when
// nothing is queued ahead of it and no FinishNow was accepted, and
// reports whether it took the input (sent it natively).
func (c *controls) submitSteer(text string, native func(id, text string) bool) (string, error) {
	return c.accept(controlSteer, text, native)
}

// accept gives an input of kind its id and queues it (or hands a
// steering input to native, as submitSteer says), or refuses it after
// closure.
func (c *controls) accept(kind controlKind, text string, native func(id, text string) bool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return "", ErrRunEnded
	}
	c.next++
	ctl := control{kind: kind, id: fmt.Sprintf("%s-m%d", c.runID, c.next), text: text}
	switch {
	case native != nil && len(c.steering) == 0 && !c.finish && native(ctl.id, text):
		return ctl.id, nil
	case kind == controlFollowUp:
		c.follow = append(c.follow, ctl)
	case kind == controlFinishNow:
		if !c.finish {
			close(c.finishCh)
		}
		c.finish = true
		c.steering = append(c.steering, ctl)
	default:
		c.steering = append(c.steering, ctl)
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return ctl.id, nil
}

// requeue puts an accepted input back at the front of the steering
// queue (a native input that was not applied), even after closure: it
// was accepted before.
func (c *controls) requeue(ctl control) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steering = append([]control{ctl}, c.steering...)
}

// finishRequested reports whether FinishNow was accepted.
func (c *controls) finishRequested() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finish
}

// takeSteering removes and returns the queued steering/FinishNow inputs.
func (c *controls) takeSteering() []control {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.steering
	c.steering = nil
	return s
}

// closeOrNext is the atomic final drain/close boundary of a run that would
// otherwise end. Under the lock it returns queued steering first, then one
// follow-up; only when nothing is queued does it close the inbox, after
// which every submission is refused.
func (c *controls) closeOrNext() ([]control, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if next := c.queuedLocked(); next != nil {
		return next, false
	}
	c.closed = true
	return nil, true
}

// takeQueued returns what closeOrNext would deliver (queued steering,
// else one follow-up) without closing the inbox when nothing is queued.
func (c *controls) takeQueued() []control {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queuedLocked()
}

// queuedLocked removes and returns the queued steering, else one
// follow-up (nil: nothing queued). c.mu is held.
func (c *controls) queuedLocked() []control {
	// A FinishNow without text asks for nothing a finished answer lacks.
	c.steering = slices.DeleteFunc(c.steering, func(x control) bool { return x.kind == controlFinishNow && x.text == "" })
	if len(c.steering) > 0 {
		s := c.steering
		c.steering = nil
		return s
	}
	if len(c.follow) > 0 {
		f := c.follow[0]
		c.follow = c.follow[1:]
		return []control{f}
	}
	return nil
}

// closeAll closes the inbox and returns everything still queued, in order
// (steering first, then follow-ups). Used when a run ends early.
func (c *controls) closeAll() []control {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	out := append(c.steering, c.follow...)
	c.steering, c.follow = nil, nil
	return out
}
