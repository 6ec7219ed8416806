// Package testlog gives tests a log sink they can read while the code
// under test writes to it. It is imported by tests only.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer safe for concurrent use (a slog handler's
// sink) whose text a test reads with String.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
