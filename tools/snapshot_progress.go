package tools

import (
	"fmt"
	"strconv"
	"sync"
	"time"
)

// checkpointProgressDelay is how long a snapshot runs before it says what
// it is doing, and checkpointProgressEvery how often it says so again.
const (
	checkpointProgressDelay = 500 * time.Millisecond
	checkpointProgressEvery = time.Second
)

// checkpointProgress reports a long snapshot's progress as tool output
// ("[checkpointing 12,000 files…]"). A nil one reports nothing.
type checkpointProgress struct {
	emit func(string)
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	entries int // entries walked
	toHash  int // files to read
	hashedN int // files read
	said    string
}

// startCheckpointProgress starts reporting to emit (nil: never).
func startCheckpointProgress(emit func(string)) *checkpointProgress {
	if emit == nil {
		return nil
	}
	p := &checkpointProgress{emit: emit, done: make(chan struct{})}
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
	p.mu.Lock()
	text := fmt.Sprintf("[checkpointing %s files…]\n", groupDigits(p.entries))
	if p.toHash > 0 {
		text = fmt.Sprintf("[checkpointing %s files: %s of %s changed files read…]\n", groupDigits(p.entries), groupDigits(p.hashedN), groupDigits(p.toHash))
	}
	if text == p.said {
		text = ""
	} else {
		p.said = text
	}
	p.mu.Unlock()
	if text != "" {
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

// walked records that n entries were walked so far.
func (p *checkpointProgress) walked(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.entries = n
	p.mu.Unlock()
}

// hashing records that n files are to be read.
func (p *checkpointProgress) hashing(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.toHash, p.hashedN = n, 0
	p.mu.Unlock()
}

// hashed records one more file read.
func (p *checkpointProgress) hashed() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.hashedN++
	p.mu.Unlock()
}

// groupDigits formats n with thousands separators: 12,000.
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
