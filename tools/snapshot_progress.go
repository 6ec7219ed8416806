package tools

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// checkpointProgressDelay is how long a snapshot runs before it says what
// it is doing, and checkpointProgressEvery how often it says so again.
const (
	checkpointProgressDelay = 500 * time.Millisecond
	checkpointProgressEvery = time.Second
)

// takeCounters are what the snapshot in progress has done so far: a call
// waiting for another's snapshot (the first one, taken ahead) reports it
// too.
type takeCounters struct {
	entries atomic.Int64 // entries walked
	toHash  atomic.Int64 // files to read
	hashed  atomic.Int64 // files read
}

// reset starts a snapshot's counts.
func (c *takeCounters) reset() {
	c.entries.Store(0)
	c.toHash.Store(0)
	c.hashed.Store(0)
}

// checkpointProgress reports the progress of a long snapshot as tool
// output ("[checkpointing 12,000 files…]"). A nil one reports nothing.
type checkpointProgress struct {
	emit func(string)
	c    *takeCounters
	done chan struct{}
	wg   sync.WaitGroup
	said string
}

// startCheckpointProgress starts reporting c to emit (nil: never).
func startCheckpointProgress(emit func(string), c *takeCounters) *checkpointProgress {
	if emit == nil {
		return nil
	}
	p := &checkpointProgress{emit: emit, c: c, done: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTimer(checkpointProgressDelay)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.say()
				t.Reset(checkpointProgressEvery)
			}
		}
	})
	return p
}

// say emits the current progress when it changed.
func (p *checkpointProgress) say() {
	entries := groupDigits(int(p.c.entries.Load()))
	text := fmt.Sprintf("[checkpointing %s files…]\n", entries)
	if n := p.c.toHash.Load(); n > 0 {
		text = fmt.Sprintf("[checkpointing %s files: %s of %s changed files read…]\n", entries, groupDigits(int(p.c.hashed.Load())), groupDigits(int(n)))
	}
	if text != p.said {
		p.said = text
		p.emit(text)
	}
}

// stop stops reporting; nothing is emitted after it returns.
func (p *checkpointProgress) stop() {
	if p == nil {
		return
	}
	close(p.done)
	p.wg.Wait()
}

// groupDigits formats n with thousands separators: 12,000.
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
