package provider

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"time"
)

// errFrameTooLarge is returned by SSEReader when a line or an event's data
// exceeds the frame bound.
var errFrameTooLarge = errors.New("sse frame exceeds the size bound")

// SSEEvent is one dispatched server-sent event. Event and Data alias the
// reader's buffers and are valid only until the next call to Next.
type SSEEvent struct {
	// Event is the "event:" field; empty means the default type "message".
	Event []byte
	// Data is the event's data lines joined with "\n".
	Data []byte
	// ID is the last event ID seen so far (it persists across events).
	ID string
}

// SSEReader parses a byte stream as server-sent events following the WHATWG
// HTML "event stream" rules: lines end in CRLF, LF or CR; a leading UTF-8 BOM
// is skipped; lines starting with ':' are comments; "event", "data", "id" and
// "retry" fields are understood and others ignored; a single space after the
// colon is removed; several data lines are joined with "\n"; a blank line
// dispatches the event unless its data buffer is empty; an event cut short by
// the end of the stream is discarded. One field outside the standard is
// read: "error", with which llama.cpp's server reported a failure in the
// middle of a stream until September 2025 ("error: {…}" then "data:
// [DONE]"), is an event of type "error" with that value as its data, so
// the server's message is not lost with the ignored field. Text that is
// no event stream at all before the first event (a JSON error document a
// gateway sent under an event-stream Content-Type) is ignored as the rules
// say, but its first bytes are kept: see [SSEReader.Stray].
type SSEReader struct {
	r        io.Reader
	buf      []byte
	off, end int
	readErr  error
	maxFrame int
	started  bool
	skipLF   bool
	consumed int64

	data    []byte
	hasData bool
	event   []byte
	lastID  []byte
	id      string
	retry   time.Duration

	dispatched bool   // an event was dispatched
	stray      []byte // the first ignored non-field text, before any event
}

// maxStray bounds what [SSEReader.Stray] keeps.
const maxStray = 512

// Stray returns the first bytes (at most 512) of the lines that were not
// event-stream fields and came before any event, including an unfinished
// last line at the end of the stream; nil when there were none or an
// event was dispatched.
func (s *SSEReader) Stray() []byte {
	if s.dispatched {
		return nil
	}
	return s.stray
}

// keepStray keeps the start of text that is not an event stream.
func (s *SSEReader) keepStray(line []byte) {
	if s.dispatched || len(s.stray) >= maxStray || len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if len(s.stray) > 0 {
		s.stray = append(s.stray, '\n')
	}
	s.stray = append(s.stray, line[:min(len(line), maxStray-len(s.stray))]...)
}

// DefaultMaxFrameBytes bounds one SSE line or event payload (8 MiB).
const DefaultMaxFrameBytes = 8 << 20

// NewSSEReader returns a reader of r that fails any line or event larger
// than maxFrame bytes (DefaultMaxFrameBytes when maxFrame <= 0).
func NewSSEReader(r io.Reader, maxFrame int) *SSEReader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrameBytes
	}
	return &SSEReader{r: r, buf: make([]byte, 0, 32<<10)[:32<<10], maxFrame: maxFrame}
}

// Retry is the last valid "retry:" value (reconnection time), zero if none.
func (s *SSEReader) Retry() time.Duration { return s.retry }

// Consumed is the number of bytes read from the underlying reader.
func (s *SSEReader) Consumed() int64 { return s.consumed }

// Next returns the next dispatched event. At the end of the stream it returns
// io.EOF (or the underlying reader's error), discarding a partial event.
func (s *SSEReader) Next() (SSEEvent, error) {
	if !s.started {
		if err := s.skipBOM(); err != nil {
			return SSEEvent{}, err
		}
	}
	for {
		line, err := s.readLine()
		if err != nil {
			return SSEEvent{}, err
		}
		if len(line) == 0 {
			if ev, ok := s.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if err := s.field(line); err != nil {
			return SSEEvent{}, err
		}
	}
}

func (s *SSEReader) skipBOM() error {
	for s.end-s.off < 3 && s.readErr == nil {
		s.fill()
	}
	s.started = true
	if s.end-s.off >= 3 && bytes.Equal(s.buf[s.off:s.off+3], []byte{0xEF, 0xBB, 0xBF}) {
		s.off += 3
	}
	return nil
}

// dispatch ends the current event at a blank line.
func (s *SSEReader) dispatch() (SSEEvent, bool) {
	if !s.hasData {
		s.event = s.event[:0]
		return SSEEvent{}, false
	}
	data := s.data
	if n := len(data); n > 0 && data[n-1] == '\n' {
		data = data[:n-1]
	}
	ev := SSEEvent{Event: s.event, Data: data, ID: s.id}
	s.dispatched = true
	s.data = s.data[:0]
	s.hasData = false
	s.event = s.event[:0]
	return ev, true
}

// field processes one non-empty line.
func (s *SSEReader) field(line []byte) error {
	if line[0] == ':' {
		return nil
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if len(s.data)+len(value)+1 > s.maxFrame {
			return errFrameTooLarge
		}
		s.data = append(s.data, value...)
		s.data = append(s.data, '\n')
		s.hasData = true
	case "event":
		s.event = append(s.event[:0], value...)
	case "error": // llama.cpp's dialect; see SSEReader
		if len(value)+1 > s.maxFrame {
			return errFrameTooLarge
		}
		s.event = append(s.event[:0], "error"...)
		s.data = append(append(s.data[:0], value...), '\n')
		s.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 && !bytes.Equal(value, s.lastID) {
			s.lastID = append(s.lastID[:0], value...)
			s.id = string(value)
		}
	case "retry":
		if n, ok := asciiDigits(value); ok {
			s.retry = time.Duration(n) * time.Millisecond
		}
	default:
		s.keepStray(line)
	}
	return nil
}

// isField reports whether line is a comment or a field the reader knows.
func isField(line []byte) bool {
	if line[0] == ':' {
		return true
	}
	name, _, _ := bytes.Cut(line, []byte(":"))
	switch string(name) {
	case "data", "event", "error", "id", "retry":
		return true
	}
	return false
}

func asciiDigits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// readLine returns the next line without its terminator. The slice aliases
// the read buffer and is valid until the next readLine.
func (s *SSEReader) readLine() ([]byte, error) {
	for {
		if s.skipLF && s.off < s.end {
			if s.buf[s.off] == '\n' {
				s.off++
			}
			s.skipLF = false
		}
		b := s.buf[s.off:s.end]
		limit := len(b)
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			limit = i
		}
		if j := bytes.IndexByte(b[:limit], '\r'); j >= 0 {
			limit = j
			s.skipLF = true
		}
		if limit < len(b) {
			// The bound holds however the bytes arrived: a long line
			// delivered in one read fails like one delivered in pieces.
			if limit > s.maxFrame {
				return nil, errFrameTooLarge
			}
			s.off += limit + 1
			return b[:limit], nil
		}
		if len(b) > s.maxFrame {
			return nil, errFrameTooLarge
		}
		if s.readErr != nil {
			if s.readErr == io.EOF && len(b) > 0 && !isField(b) {
				s.keepStray(b) // an unfinished last line
			}
			return nil, s.readErr
		}
		s.fill()
	}
}

// fill reads more bytes, compacting or growing the buffer as needed.
func (s *SSEReader) fill() {
	if s.off > 0 && (s.off == s.end || s.end == len(s.buf)) {
		n := copy(s.buf, s.buf[s.off:s.end])
		s.off, s.end = 0, n
	}
	if s.end == len(s.buf) {
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.end += n
	s.consumed += int64(n)
	if err != nil {
		s.readErr = err
	} else if n == 0 {
		// A reader returning 0, nil repeatedly would spin; treat as progress-free read.
		return
	}
}
