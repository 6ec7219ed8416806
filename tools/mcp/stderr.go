package mcp

import (
	"bufio"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/octet-agent/octet/tools"
)

const (
	// maxStderrLine bounds one logged stderr line.
	maxStderrLine = 512
	// maxStderrLogged bounds what one server process logs from stderr;
	// the rest is drained and dropped.
	maxStderrLogged = 64 << 10
	// stderrTail is how much of the end of stderr a startup failure
	// quotes.
	stderrTail = 1 << 10
)

// stderrLog drains a server's stderr into the log (Info level, as
// "MCP server stderr"), redacted and bounded per process, keeping a
// short tail for error messages. The pipe is always read to the end, so a chatty server
// never blocks on a full pipe.
type stderrLog struct {
	log    *slog.Logger
	server string
	redact func(string) string

	done chan struct{} // closed when stderr reached its end

	mu     sync.Mutex
	logged int
	last   []string
	size   int
}

func newStderrLog(log *slog.Logger, server string, redact func(string) string) *stderrLog {
	return &stderrLog{log: log, server: server, redact: redact, done: make(chan struct{})}
}

func (l *stderrLog) drain(r io.ReadCloser) {
	defer close(l.done)
	defer r.Close()
	br := bufio.NewReaderSize(r, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			l.line(string(line))
		}
		if err == bufio.ErrBufferFull {
			// The rest of an overlong line is read and dropped.
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

func (l *stderrLog) line(s string) {
	s = tools.NeutralizeText(strings.TrimRight(clip(l.redact(s), maxStderrLine), "\r\n"))
	if s == "" {
		return
	}
	l.mu.Lock()
	l.last = append(l.last, s)
	l.size += len(s)
	for l.size > stderrTail && len(l.last) > 1 {
		l.size -= len(l.last[0])
		l.last = l.last[1:]
	}
	logIt := l.logged < maxStderrLogged
	l.logged += len(s)
	over := logIt && l.logged >= maxStderrLogged
	l.mu.Unlock()
	if logIt {
		l.log.Info("MCP server stderr", "server", l.server, "line", s)
	}
	if over {
		l.log.Info("MCP server stderr: further output is not logged", "server", l.server, "limit_bytes", maxStderrLogged)
	}
}

// tail returns the last lines of stderr, joined, waiting briefly for
// the pipe's end (a server that just exited).
func (l *stderrLog) tail() string {
	t := time.NewTimer(time.Second)
	select {
	case <-l.done:
	case <-t.C:
	}
	t.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	return clip(strings.Join(l.last, " | "), stderrTail)
}
