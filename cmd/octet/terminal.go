package main

import (
	"context"
	"sync"
)

// terminal makes one goroutine the only writer of what a person sees: the
// loop that renders a run's events. Approval prompts and notices are
// written by the agent's goroutine; handed to the loop with do, they are
// written after every event the run emitted before asking (the answer
// text, the tool line), never in the middle of them.
type terminal struct {
	asks chan termTask
	// gone is closed when the loop stops taking tasks; do then runs the
	// task itself.
	gone     chan struct{}
	stopOnce sync.Once
}

// termTask is one piece of terminal work and the signal that it is done.
type termTask struct {
	fn   func()
	done chan struct{}
}

func newTerminal() *terminal {
	return &terminal{asks: make(chan termTask), gone: make(chan struct{})}
}

// do runs fn on the terminal's owner goroutine and waits for it. A nil
// terminal, or one whose owner has stopped, runs fn on the caller's
// goroutine. When ctx ends before the owner takes fn, do returns
// ctx.Err() without running it.
func (t *terminal) do(ctx context.Context, fn func()) error {
	if t == nil {
		fn()
		return nil
	}
	task := termTask{fn: fn, done: make(chan struct{})}
	select {
	case t.asks <- task:
		<-task.done
		return nil
	case <-t.gone:
		fn()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop tells later callers of do that nobody owns the terminal any more.
func (t *terminal) stop() { t.stopOnce.Do(func() { close(t.gone) }) }
