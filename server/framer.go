package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/rpcid"
	"go.lsp.dev/jsonrpc2"
)

// maxFrameBytes bounds one incoming message body. A larger Content-Length is
// skipped (the bytes are drained, not buffered) and answered with an error.
const maxFrameBytes = 64 << 20

// maxHeaderLine bounds one header line; a longer line is treated as garbage.
const maxHeaderLine = 8 << 10

// errBadFrame marks a frame the tolerant stream answered with an error and
// skipped; Read never returns it.
var errBadFrame = errors.New("malformed frame")

// tolerantStream is a jsonrpc2.Stream with LSP Content-Length framing that
// never ends the connection because of what the peer sent: a malformed header,
// an oversized body, invalid JSON or an invalid JSON-RPC envelope is answered
// with a JSON-RPC error response (-32700 or -32600, id null when unknown) and
// the stream resynchronizes on the next "Content-Length:" header. Only the
// transport ending (EOF, a read error) ends Read.
//
// jsonrpc2 v1.0.1's own header framer returns ErrInvalidHeader or ErrParse
// from Read for such input, which terminates the connection's read loop; this
// type exists so that bad input from an editor never kills the server.
type tolerantStream struct {
	in    *bufio.Reader
	w     io.Writer
	c     io.Closer
	log   *slog.Logger
	limit int

	wmu  sync.Mutex // serializes frames
	wbuf []byte

	// onResponse, when set, is called after each response frame is
	// written (or failed to be written) with the id it answers.
	onResponse func(id jsonrpc2.ID)

	endOnce sync.Once
	endCh   chan struct{}

	brokenOnce sync.Once
	brokenCh   chan struct{}
	brokenErr  error // set before brokenCh closes

	// dl is the transport's write deadline, nil when it has none: only
	// then can a direct write (writeDirect) be bounded.
	dl writeDeadliner
	// kick, armed for each direct write, ends one that takes longer than
	// directWriteBound by moving the write deadline to now. kmu guards
	// armed and kicked against its callback.
	kick   *time.Timer
	kmu    sync.Mutex
	armed  bool
	kicked bool
}

// writeDeadliner is a transport whose writes can be given a deadline
// (net.Conn, a pollable *os.File).
type writeDeadliner interface {
	SetWriteDeadline(t time.Time) error
}

// directWriteBound is the longest a direct write holds its caller (a
// run's owner goroutine) before the rest of its frame is handed to a
// goroutine of its own: an editor that reads slowly paces the run through
// the run's event channel as before, not through the provider read.
const directWriteBound = time.Millisecond

// frameRoom is the room writeDirect keeps before a body for its header
// ("Content-Length: " with up to 8 digits and CRLF CRLF).
const frameRoom = 32

var _ jsonrpc2.Stream = (*tolerantStream)(nil)

// newTolerantStream returns a tolerant LSP stream over rwc.
func newTolerantStream(conn io.ReadWriteCloser, log *slog.Logger) *tolerantStream {
	s := &tolerantStream{
		in:       bufio.NewReaderSize(conn, 64<<10),
		w:        conn,
		c:        conn,
		log:      log,
		limit:    maxFrameBytes,
		endCh:    make(chan struct{}),
		brokenCh: make(chan struct{}),
	}
	if dl := deadlinerOf(conn); dl != nil {
		s.dl = dl
		s.kick = time.AfterFunc(time.Hour, s.kickWrite)
		s.kick.Stop()
	}
	return s
}

// deadlinerOf returns the write side of conn when its writes can be given
// a deadline (clearing the deadline, which it checks with, changes
// nothing), nil otherwise: an *os.File the runtime cannot poll (a
// blocking stdout) has none.
func deadlinerOf(conn io.ReadWriteCloser) writeDeadliner {
	var w any = conn
	if j, ok := conn.(rwc); ok {
		w = j.Writer
	}
	dl, ok := w.(writeDeadliner)
	if !ok || dl.SetWriteDeadline(time.Time{}) != nil {
		return nil
	}
	return dl
}

// lockDirect takes the stream's writer for writeDirect when the transport
// can bound a write and no other frame is being written; it reports
// whether it did (then writeDirect must follow).
func (s *tolerantStream) lockDirect() bool {
	return s.dl != nil && s.wmu.TryLock()
}

// writeDirect writes one notification with the writer lockDirect took,
// for a caller that must not wait for the client: once the write has
// taken directWriteBound the deadline ends it, and what is left of the
// frame is written by a goroutine that keeps the writer until it is done
// (frames stay whole and in order; later writers wait for it). The frame
// is byte for byte what the connection's own Notify writes.
func (s *tolerantStream) writeDirect(method string, params []byte) {
	b := s.wbuf[:0]
	if need := frameRoom + len(params) + len(method) + 48; need > cap(b) {
		b = make([]byte, 0, max(need, 4<<10))
	}
	b = jsonrpc2.AppendNotification(b[:frameRoom], method, params)
	var hdr [frameRoom]byte
	h := append(hdr[:0], "Content-Length: "...)
	h = strconv.AppendInt(h, int64(len(b)-frameRoom), 10)
	h = append(h, "\r\n\r\n"...)
	start := frameRoom - len(h)
	copy(b[start:], h)
	if cap(b) <= maxKeptFrame {
		s.wbuf = b[:0]
	}
	frame := b[start:]
	s.kmu.Lock()
	s.armed = true
	s.kmu.Unlock()
	s.kick.Reset(directWriteBound)
	n, err := s.w.Write(frame)
	s.kick.Stop()
	s.kmu.Lock()
	s.armed = false
	kicked := s.kicked
	s.kicked = false
	s.kmu.Unlock()
	if kicked && errors.Is(err, os.ErrDeadlineExceeded) && n < len(frame) {
		go s.finishDirect(frame[n:])
		return
	}
	if kicked {
		_ = s.dl.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		s.brokenOnce.Do(func() { s.brokenErr = err; close(s.brokenCh) })
	}
	s.wmu.Unlock()
}

// finishDirect writes the rest of a direct write the deadline ended, then
// releases the writer.
func (s *tolerantStream) finishDirect(rest []byte) {
	defer s.wmu.Unlock()
	err := s.dl.SetWriteDeadline(time.Time{})
	if err == nil {
		_, err = s.w.Write(rest)
	}
	if err != nil {
		s.brokenOnce.Do(func() { s.brokenErr = err; close(s.brokenCh) })
	}
}

// kickWrite ends the direct write in progress (the kick timer's callback).
func (s *tolerantStream) kickWrite() {
	s.kmu.Lock()
	defer s.kmu.Unlock()
	if s.armed && !s.kicked {
		s.kicked = s.dl.SetWriteDeadline(time.Now()) == nil
	}
}

// Read returns the next well-formed message, answering and skipping every
// malformed one before it.
func (s *tolerantStream) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		body, n, err := s.readFrame()
		if errors.Is(err, errBadFrame) {
			continue
		}
		if err != nil {
			s.endOnce.Do(func() { close(s.endCh) })
			return nil, 0, err
		}
		msg, derr := jsonrpc2.DecodeMessage(body)
		if derr != nil {
			s.answerInvalid(body, derr)
			continue
		}
		if s.refused(msg, body) {
			continue
		}
		if r, ok := msg.(*jsonrpc2.Response); ok {
			if msg, ok = s.ownResponse(r); !ok {
				continue
			}
		}
		return msg, n, nil
	}
}

// refused answers (or, for a notification, drops) a decoded message the
// server must not handle: a method that is not valid UTF-8 (it would be
// echoed in replies and logs) and a request with "id": null, which jsonrpc2
// decodes as a notification and would leave unanswered.
func (s *tolerantStream) refused(msg jsonrpc2.Message, body []byte) bool {
	switch m := msg.(type) {
	case *jsonrpc2.Call:
		if !utf8.ValidString(m.Method()) {
			s.reply(m.ID(), jsonrpc2.NewError(jsonrpc2.InvalidRequest, `invalid request: "method" is not valid UTF-8`))
			return true
		}
	case *jsonrpc2.Notification:
		if !utf8.ValidString(m.Method()) {
			s.log.Warn("dropping a notification whose method is not valid UTF-8")
			return true
		}
		if hasIDMember(body) {
			s.reply(jsonrpc2.ID{}, jsonrpc2.NewError(jsonrpc2.InvalidRequest,
				`invalid request: "id" is null; a request needs a string or integer id, a notification has no "id"`))
			return true
		}
	}
	return false
}

// hasIDMember reports whether the JSON object body has a top-level "id".
func hasIDMember(body []byte) bool {
	if !bytes.Contains(body, []byte(`"id"`)) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	_, ok := m["id"]
	return ok
}

// requestIDPrefix starts the id of every request the server sends: they
// are strings, "octet-1", "octet-2", … (the editor contract). Clients
// number their own requests 1, 2, 3…, and some (Vim 9's channel in "lsp"
// mode, under yegappan/lsp) take any incoming message whose id matches
// one of their pending requests for its response: a server request
// numbered like them would be lost, a string id never matches.
// jsonrpc2 numbers the calls from 1; the stream names them on the way
// out (outgoingID) and back (ownResponse).
const requestIDPrefix = "octet-"

// wireRequestID is the id the client sees for the server's request id.
func wireRequestID(id jsonrpc2.ID) string {
	n, _ := id.Number()
	return requestIDPrefix + strconv.FormatInt(n, 10)
}

// ownResponse maps a client's response back to jsonrpc2's numbering: id
// "octet-N" answers call N. Any other id cannot answer a request of the
// server's (a number would otherwise match jsonrpc2's own numbering), so
// the response is dropped with a log line.
func (s *tolerantStream) ownResponse(r *jsonrpc2.Response) (jsonrpc2.Message, bool) {
	if str, ok := r.ID().StringValue(); ok {
		if digits, ok := strings.CutPrefix(str, requestIDPrefix); ok && digits != "" && digits[0] != '0' && digits[0] != '+' {
			if n, err := strconv.ParseInt(digits, 10, 64); err == nil && n > 0 {
				return jsonrpc2.NewResponse(jsonrpc2.NewNumberID(n), r.Result(), r.Err()), true
			}
		}
	}
	s.log.Warn("dropping a response to no request of the server's", "id", fmt.Sprint(r.ID()))
	return nil, false
}

// callPrefix starts every call and notification jsonrpc2 encodes; a
// call's id is its last member (see outgoingID).
const callPrefix = `{"jsonrpc":"2.0","method":`

// outgoingID renames the id of an encoded call, its last member
// (`…,"id":N}`), to "octet-N". A notification cannot end that way: its
// last member is its params, a whole JSON value.
func outgoingID(body []byte) []byte {
	if !bytes.HasPrefix(body, []byte(callPrefix)) || len(body) < 2 || body[len(body)-1] != '}' {
		return body
	}
	end := len(body) - 1
	i := end
	for i > 0 && body[i-1] >= '0' && body[i-1] <= '9' {
		i--
	}
	const idKey = `,"id":`
	if i == end || !bytes.HasSuffix(body[:i], []byte(idKey)) {
		return body
	}
	out := make([]byte, 0, len(body)+len(requestIDPrefix)+2)
	out = append(out, body[:i]...)
	out = append(out, '"')
	out = append(out, requestIDPrefix...)
	out = append(out, body[i:end]...)
	return append(out, '"', '}')
}

// ended is closed once Read has hit the end of the transport.
func (s *tolerantStream) ended() <-chan struct{} { return s.endCh }

// Write frames msg with the LSP header framing in one write.
func (s *tolerantStream) Write(ctx context.Context, msg jsonrpc2.Message) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	body := outgoingID(jsonrpc2.AppendMessage(nil, msg))
	n, err := s.writeFrame(body)
	if s.onResponse != nil {
		if id, ok := responseID(body); ok {
			s.onResponse(id)
		}
	}
	return n, err
}

// maxKeptFrame bounds the frame buffer a stream keeps between writes: a
// larger frame (a resume's replay of a long session) gets a buffer of its
// own, released once written, so one large message does not pin its size
// for the life of the server.
const maxKeptFrame = 1 << 20

// writeFrame writes header and body with one Write.
func (s *tolerantStream) writeFrame(body []byte) (int64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b := s.wbuf[:0]
	if need := len(body) + 40; need > cap(b) && need > maxKeptFrame {
		b = make([]byte, 0, need)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	if cap(b) <= maxKeptFrame {
		s.wbuf = b
	}
	n, err := s.w.Write(b)
	if err != nil {
		s.brokenOnce.Do(func() { s.brokenErr = err; close(s.brokenCh) })
	}
	return int64(n), err
}

// broken is closed once a write has failed: the client no longer reads
// (a closed stdout is EPIPE, SIGPIPE being ignored), so it is gone.
func (s *tolerantStream) broken() <-chan struct{} { return s.brokenCh }

// responsePrefix starts every response jsonrpc2 encodes.
const responsePrefix = `{"jsonrpc":"2.0","id":`

// responseID extracts the id of an encoded response ("" for calls and
// notifications, whose "method" comes right after the version).
func responseID(body []byte) (jsonrpc2.ID, bool) {
	rest, ok := bytes.CutPrefix(body, []byte(responsePrefix))
	if !ok {
		return jsonrpc2.ID{}, false
	}
	// A comma followed by a quote cannot occur inside the id: quotes in a
	// JSON string are escaped.
	end := bytes.Index(rest, []byte(`,"`))
	if end < 0 {
		return jsonrpc2.ID{}, false
	}
	return decodeIDValue(rest[:end])
}

// Close closes the underlying transport.
func (s *tolerantStream) Close() error { return s.c.Close() }

// readFrame reads one header block and its body. It returns errBadFrame after
// answering a frame it had to skip, and a transport error otherwise.
//
// An oversized Content-Length is refused as soon as the header is read, not
// after the body has arrived, and a body that ends early — the next frame's
// header arrives before the announced length is complete — is cut there, so
// the frame behind it is read, never swallowed (see readBody).
func (s *tolerantStream) readFrame() ([]byte, int64, error) {
	length, consumed, err := s.readHeader()
	if err != nil {
		return nil, 0, err
	}
	if length > s.limit {
		return nil, 0, s.refuseOversized(length)
	}
	body, complete, err := s.readBody(length, true, nil)
	if err != nil {
		return nil, 0, err
	}
	if !complete {
		s.answerShort(body, length)
		return nil, 0, errBadFrame
	}
	return body, int64(consumed + length), nil
}

// refuseOversized answers a frame whose body of length bytes is over the
// limit and skips the body. The refusal goes out at once — with the
// request's id when the bytes already received hold it, else with the
// null id, as a client that announced a length it never sends must not
// wait for it — and, when the id turns up later in the body (a client
// whose encoder puts params first), once more with it, so the request it
// refuses ends rather than waiting forever. It returns errBadFrame, or
// the transport's error.
func (s *tolerantStream) refuseOversized(length int) error {
	e := jsonrpc2.NewError(jsonrpc2.InvalidRequest,
		fmt.Sprintf("message of %d bytes exceeds the %d-byte limit; its body is skipped", length, s.limit))
	var early rpcid.Scanner
	buffered, _ := s.in.Peek(min(s.in.Buffered(), length))
	early.Feed(buffered)
	id, known := scannedID(&early)
	s.reply(id, e)
	var sc *rpcid.Scanner
	if !known {
		sc = &rpcid.Scanner{}
	}
	if _, _, err := s.readBody(length, false, sc); err != nil {
		return err
	}
	if sc != nil {
		if id, ok := scannedID(sc); ok {
			s.reply(id, e)
		}
	}
	return errBadFrame
}

// scannedID is the id sc found, and whether it found one.
func scannedID(sc *rpcid.Scanner) (jsonrpc2.ID, bool) {
	raw, ok := sc.ID()
	if !ok {
		return jsonrpc2.ID{}, false
	}
	return decodeIDValue(raw)
}

// maxHeaderMatch bounds a "Content-Length: N" line readBody recognizes.
const maxHeaderMatch = 64

// readBody reads (keep) or discards the n bytes of a body, feeding them
// to scan when it is not nil. It stops early, before the bytes of a line
// that ends in a Content-Length header, and then reports complete ==
// false: such a line cannot occur in a JSON body (the header name would
// have to sit in a string, and a JSON string holds no raw line break), so
// it is the next frame, and the peer's length was wrong. It never waits
// for more input than the body still needs.
func (s *tolerantStream) readBody(n int, keep bool, scan *rpcid.Scanner) (body []byte, complete bool, err error) {
	if keep {
		body = make([]byte, 0, min(n, 1<<20))
	}
	take := func(k int) {
		if keep || scan != nil {
			b, _ := s.in.Peek(k)
			if keep {
				body = append(body, b...)
			}
			if scan != nil {
				scan.Feed(b)
			}
		}
		_, _ = s.in.Discard(k)
		n -= k
	}
	for n > 0 {
		if s.in.Buffered() == 0 {
			if _, err := s.in.Peek(1); err != nil {
				return nil, false, unexpectedEOF(err)
			}
		}
		w, _ := s.in.Peek(s.in.Buffered())
		if i := bytes.IndexByte(w, '\n'); i >= 0 {
			if at, ok := headerAt(w[:i+1]); ok && at < n {
				take(at)
				return body, false, nil
			}
			take(min(i+1, n))
			continue
		}
		if len(w) >= n {
			take(n)
			break
		}
		// No line end yet: keep the last bytes, which may begin a header.
		if len(w) >= maxHeaderMatch {
			take(len(w) - (maxHeaderMatch - 1))
			continue
		}
		if _, err := s.in.Peek(len(w) + 1); err != nil {
			return nil, false, unexpectedEOF(err)
		}
	}
	return body, true, nil
}

// headerAt reports where a trailing "Content-Length: N" header starts in
// line, which ends with '\n'.
func headerAt(line []byte) (int, bool) {
	const name = "content-length:"
	end := len(line) - 1 // the '\n'
	if end > 0 && line[end-1] == '\r' {
		end--
	}
	i := end
	for i > 0 && (line[i-1] == ' ' || line[i-1] == '\t') {
		i--
	}
	digits := i
	for i > 0 && line[i-1] >= '0' && line[i-1] <= '9' {
		i--
	}
	if i == digits {
		return 0, false
	}
	for i > 0 && (line[i-1] == ' ' || line[i-1] == '\t') {
		i--
	}
	if i < len(name) || !strings.EqualFold(string(line[i-len(name):i]), name) {
		return 0, false
	}
	at := i - len(name)
	if len(line)-at > maxHeaderMatch {
		return 0, false
	}
	return at, true
}

// answerShort answers a body that the next frame's header cut short: with
// the request's id when the bytes that came are a request, so the client's
// call is answered rather than left waiting.
func (s *tolerantStream) answerShort(body []byte, length int) {
	var probe struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
	}
	id := jsonrpc2.ID{}
	if json.Unmarshal(body, &probe) == nil && probe.Method != nil {
		id = probeID(probe.ID)
	}
	s.reply(id, jsonrpc2.NewError(jsonrpc2.ParseError,
		fmt.Sprintf("invalid message: the body is %d bytes, not the %d its Content-Length says (the next header followed early)", len(body), length)))
}

// readHeader parses one header block. A block without a usable
// Content-Length is answered with a parse error; the stream then skips to
// the next line that contains "Content-Length:" (which may follow a body
// with no newline) and continues from there.
func (s *tolerantStream) readHeader() (length, consumed int, err error) {
	have := false
	bad := ""
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && consumed > 0 {
				err = io.ErrUnexpectedEOF
			}
			return 0, 0, err
		}
		consumed += len(line)
		trimmed := strings.TrimRight(string(line), "\r\n")
		if trimmed == "" {
			if have && bad == "" {
				return length, consumed, nil
			}
			if !have && bad == "" && consumed == len(line) {
				// A stray blank line between frames: ignore it.
				consumed = 0
				continue
			}
			if bad == "" {
				bad = "missing Content-Length header"
			}
			var sc rpcid.Scanner
			if have {
				// The length is known: skip the body with the frame
				// (up to the next header, if one comes first), and
				// answer its request by its id when it has one.
				if _, _, err := s.readBody(length, false, &sc); err != nil {
					return 0, 0, err
				}
			}
			id, _ := scannedID(&sc)
			s.reply(id, jsonrpc2.NewError(jsonrpc2.ParseError, "invalid message header: "+bad))
			return 0, 0, errBadFrame
		}
		// Resynchronize: a header may follow garbage on the same line (a
		// body that was shorter than its Content-Length said, say).
		if i := indexFold(trimmed, "content-length:"); i > 0 || (i == 0 && bad != "") {
			if bad == "" {
				bad = "unexpected bytes before header"
			}
			s.reply(jsonrpc2.ID{}, jsonrpc2.NewError(jsonrpc2.ParseError, "invalid message header: "+bad))
			trimmed = trimmed[i:]
			have, bad, consumed = false, "", len(trimmed)
		}
		name, value, ok := strings.Cut(trimmed, ":")
		if !ok {
			if bad == "" {
				bad = fmt.Sprintf("header line %q has no colon", host.Clip(trimmed, 40))
			}
			continue
		}
		if strings.EqualFold(strings.TrimSpace(name), "content-length") {
			n, perr := strconv.Atoi(strings.TrimSpace(value))
			if perr != nil || n <= 0 {
				if bad == "" {
					bad = fmt.Sprintf("bad Content-Length %q", host.Clip(strings.TrimSpace(value), 40))
				}
				continue
			}
			length, have = n, true
		}
	}
}

// readLine reads one line, bounding its length: a longer line is returned
// truncated (the rest is discarded) so garbage cannot grow memory.
func (s *tolerantStream) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := s.in.ReadSlice('\n')
		if len(line) < maxHeaderLine {
			line = append(line, chunk[:min(len(chunk), maxHeaderLine-len(line))]...)
		}
		switch {
		case err == nil:
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// answerInvalid replies to a body that is not a valid JSON-RPC message. A
// malformed response (something without "method") is only logged: answering
// a response would confuse the peer.
func (s *tolerantStream) answerInvalid(body []byte, derr error) {
	if !json.Valid(body) {
		s.reply(jsonrpc2.ID{}, jsonrpc2.NewError(jsonrpc2.ParseError, "parse error: message body is not valid JSON"))
		return
	}
	var probe struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		s.reply(jsonrpc2.ID{}, jsonrpc2.NewError(jsonrpc2.InvalidRequest, "invalid request: JSON-RPC batches are not supported by the LSP base protocol"))
		return
	}
	if json.Unmarshal(body, &probe) != nil {
		s.reply(jsonrpc2.ID{}, jsonrpc2.NewError(jsonrpc2.InvalidRequest, "invalid request: message is not a JSON object"))
		return
	}
	if probe.Method == nil && (probe.Result != nil || probe.Error != nil) {
		s.log.Warn("dropping malformed response from client", "error", derr)
		return
	}
	s.reply(probeID(probe.ID), jsonrpc2.NewError(jsonrpc2.InvalidRequest, "invalid request: "+describeInvalid(body)))
}

// describeInvalid names what is wrong with a JSON object that is not a valid
// JSON-RPC 2.0 request.
func describeInvalid(body []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return "not a JSON object"
	}
	if v, ok := m["jsonrpc"]; !ok || string(bytes.TrimSpace(v)) != `"2.0"` {
		return `"jsonrpc" must be "2.0"`
	}
	var method string
	if json.Unmarshal(m["method"], &method) != nil {
		return `"method" must be a string`
	}
	if _, ok := m["result"]; ok {
		return `a request must not carry "result" or "error"`
	}
	if id, ok := m["id"]; ok {
		if _, valid := decodeIDValue(id); !valid {
			return `"id" must be a string, an integer or null`
		}
	}
	return "malformed envelope"
}

// probeID recovers a request id for an error reply, or the null id.
func probeID(raw json.RawMessage) jsonrpc2.ID {
	id, ok := decodeIDValue(raw)
	if !ok {
		return jsonrpc2.ID{}
	}
	return id
}

// decodeIDValue decodes a JSON-RPC id (integer or string). It reports false
// for any other shape.
func decodeIDValue(raw json.RawMessage) (jsonrpc2.ID, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return jsonrpc2.ID{}, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return jsonrpc2.ID{}, false
		}
		return jsonrpc2.NewStringID(s), true
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return jsonrpc2.ID{}, false
	}
	return jsonrpc2.NewNumberID(n), true
}

// reply writes an error response; a write failure is logged (the read side
// will see the transport end on its own).
func (s *tolerantStream) reply(id jsonrpc2.ID, e *jsonrpc2.Error) {
	s.log.Warn("answering malformed input", "code", int(e.Code), "error", e.Message)
	if _, err := s.writeFrame(jsonrpc2.AppendMessage(nil, jsonrpc2.NewResponse(id, nil, e))); err != nil {
		s.log.Debug("writing error response", "error", err)
	}
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// indexFold is strings.Index with ASCII case folding on s; substr is
// lower-case ASCII. (strings.ToLower would change the length of invalid
// UTF-8, and so the index.)
func indexFold(s, substr string) int {
	for i := 0; i+len(substr) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(substr)], substr) {
			return i
		}
	}
	return -1
}
