// Package eventgate orders an approval request after the events before it.
//
// The broker asks for an approval right after the agent emits the call's
// tool_started, on the run's own goroutine, while the events before it may
// still be on their way to the editor through the dialect's forwarder. A
// Gate records which calls' tool_started the forwarder has sent; the
// approver awaits its call there before asking, so an editor always has
// the call (and the text before it) when the approval arrives.
package eventgate

import (
	"context"
	"sync"
	"time"
)

// MaxLag bounds how long Await waits (a client that stopped reading must
// not hold the approval, which has its own deadline, any longer).
const MaxLag = 2 * time.Second

// A Gate is the record of one run's sent tool_started events. The zero
// Gate is ready to use; it is safe for concurrent use.
type Gate struct {
	mu    sync.Mutex
	sent  map[string]bool
	ended bool          // the run's events ended: nothing more will be sent
	ch    chan struct{} // closed (and replaced) at each change
}

// Sent records that call's tool_started reached the client.
func (g *Gate) Sent(call string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sent == nil {
		g.sent = map[string]bool{}
	}
	g.sent[call] = true
	g.wake()
}

// End records that the run's events ended; every Await returns.
func (g *Gate) End() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ended = true
	g.wake()
}

func (g *Gate) wake() {
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}

// Await returns once call's tool_started was sent, the run's events
// ended, ctx ended or MaxLag passed.
func (g *Gate) Await(ctx context.Context, call string) {
	timer := time.NewTimer(MaxLag)
	defer timer.Stop()
	for {
		g.mu.Lock()
		if g.sent[call] || g.ended {
			g.mu.Unlock()
			return
		}
		if g.ch == nil {
			g.ch = make(chan struct{})
		}
		ch := g.ch
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		}
	}
}
