package mcp

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/octet-agent/octet/tools"
)

// maxStrayLine bounds the quote of a stray stdout line.
const maxStrayLine = 80

// stdoutCheck passes a stdio server's stdout to the transport, keeping
// the start of the first line that cannot be a JSON-RPC message (one
// that does not start with '{' or '['): a server logging to stdout
// breaks the protocol, and the SDK's error ("invalid character 'S'
// looking for beginning of value") does not say so.
type stdoutCheck struct {
	r io.ReadCloser

	mu        sync.Mutex
	midLine   bool // a line's first non-blank byte was seen
	stray     []byte
	capturing bool
}

func newStdoutCheck(r io.ReadCloser) *stdoutCheck { return &stdoutCheck{r: r} }

func (c *stdoutCheck) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; i < n; i++ {
		if c.midLine && !c.capturing {
			// The rest of a line already judged: skip to its end.
			j := bytes.IndexByte(p[i:n], '\n')
			if j < 0 {
				break
			}
			i += j
		}
		switch b := p[i]; {
		case b == '\n':
			c.midLine, c.capturing = false, false
		case c.capturing:
			if len(c.stray) < maxStrayLine {
				c.stray = append(c.stray, b)
			}
		case c.midLine || b == ' ' || b == '\t' || b == '\r':
		default:
			c.midLine = true
			if b != '{' && b != '[' && c.stray == nil {
				c.stray, c.capturing = []byte{b}, true
			}
		}
	}
	return n, err
}

func (c *stdoutCheck) Close() error { return c.r.Close() }

// hint says what to do about a stray stdout line ("" when there was
// none).
func (c *stdoutCheck) hint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stray == nil {
		return ""
	}
	return fmt.Sprintf("the server wrote to stdout a line that is not JSON-RPC (%q): stdout carries the protocol, so it must write its logs to stderr (check its command, args and env for a verbose or logging option)",
		tools.NeutralizeText(string(c.stray)))
}
