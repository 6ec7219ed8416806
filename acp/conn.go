package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/rpcid"
)

// JSON-RPC 2.0 error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
	// codeResourceNotFound is ACP's error for an unknown session.
	codeResourceNotFound = -32002
)

// maxMessage bounds one incoming line; a longer one is refused and the
// rest of the line skipped. It has room for the largest prompt octet
// takes: its images (host.MaxImagesBytes, base64) and 8 MiB besides. A
// variable for the tests.
var maxMessage = (host.MaxImagesBytes+2)/3*4 + 8<<20

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

func invalidParams(format string, args ...any) error {
	return &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// message is any JSON-RPC message; which fields are set says which kind.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`

	// read numbers the client's messages in the order they were read.
	read int64
}

// readKey is the context key of the read order of the message a handler
// handles (readOrder).
type readKey struct{}

// readOrder is the read order of the message ctx's handler handles: a
// later one was sent after it.
func readOrder(ctx context.Context) (int64, bool) {
	n, ok := ctx.Value(readKey{}).(int64)
	return n, ok
}

// handler answers one incoming request (result or error) or, for a
// notification (id nil), acts on it.
type handler func(ctx context.Context, method string, params json.RawMessage) (any, error)

// conn is a newline-delimited JSON-RPC 2.0 peer over a byte stream: it
// answers the client's requests (each in its own goroutine, so a long
// session/prompt does not hold up session/cancel) and sends its own
// requests and notifications.
type conn struct {
	log *slog.Logger

	wmu sync.Mutex // orders writes: one message per line
	w   io.Writer
	// broken is closed when a write to the client failed (brokenErr):
	// the client no longer reads (a closed stdout is EPIPE, SIGPIPE being
	// ignored), so it is gone.
	broken     chan struct{}
	brokenOnce sync.Once
	brokenErr  error

	mu      sync.Mutex
	nextID  int64
	pending map[string]chan message
	closed  bool

	// Start-up order (read and written by the reader goroutine only):
	// until an initialize is answered successfully, the client's other
	// messages wait in early, in the order they came; initialize itself
	// is answered on the reader, so nothing read after it can overtake
	// it. Clients send session/new right behind initialize without
	// waiting for its answer.
	started bool
	early   []message
	// reads counts the messages read (message.read), on the reader.
	reads int64

	wg sync.WaitGroup
}

// maxEarly bounds the messages kept waiting for initialize; one more is
// refused (a client that never initializes cannot grow the queue).
const maxEarly = 256

func newConn(w io.Writer, log *slog.Logger) *conn {
	return &conn{w: w, log: log, pending: map[string]chan message{}, broken: make(chan struct{})}
}

// write sends one message as one line.
func (c *conn) write(m message) error {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	b = append(b, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err = c.w.Write(b); err != nil {
		c.brokenOnce.Do(func() { c.brokenErr = err; close(c.broken) })
	}
	return err
}

// notify sends a notification.
func (c *conn) notify(method string, params any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	return c.write(message{Method: method, Params: raw})
}

// call sends a request and waits for its answer, ctx's end or the
// connection's. The answer's result is decoded into result.
func (c *conn) call(ctx context.Context, method string, params, result any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("%s: client gone", method)
	}
	c.nextID++
	id := strconv.FormatInt(c.nextID, 10)
	ch := make(chan message, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.write(message{ID: json.RawMessage(id), Method: method, Params: raw}); err != nil {
		return fmt.Errorf("send %s: %w", method, err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: client gone before answering", method)
		}
		if m.Error != nil {
			return fmt.Errorf("%s: client answered %w", method, m.Error)
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(m.Result, result); err != nil {
			return fmt.Errorf("%s: undecodable answer: %w", method, err)
		}
		return nil
	}
}

// serve reads messages until in ends or ctx is done, handing requests
// and notifications to h. When it returns, the calls waiting for the
// client have failed; the requests it started may still be running
// (wait for them with c.wg).
func (c *conn) serve(ctx context.Context, in io.Reader, h handler) error {
	defer c.closePending()
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(r)
		if ctx.Err() != nil {
			return nil // the client is gone (it stopped reading): nothing more is handled
		}
		if tl := (*lineTooLongError)(nil); errors.As(err, &tl) {
			// The client waits for the answer to its request: refuse it
			// by its id, wherever in the line it was.
			_ = c.write(message{ID: tl.id, Error: &rpcError{Code: codeInvalidRequest, Message: fmt.Sprintf("message over %d bytes refused", maxMessage)}})
			continue
		}
		if len(bytes.TrimSpace(line)) > 0 {
			c.dispatch(ctx, line, h)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read from client: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// lineTooLongError reports a line over maxMessage, skipped to its end:
// id is the id of the request it held (null when it had none).
type lineTooLongError struct{ id json.RawMessage }

func (e *lineTooLongError) Error() string { return "line too long" }

// readLine returns the next line without its newline; a line over
// maxMessage is skipped to its end and reported as a *lineTooLongError
// with the id of its request, found wherever in the line it comes (the
// SDKs and Zed write it before the params, an encoder of a Lua table
// may write it after them).
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > maxMessage {
			return nil, skipLine(r, buf, chunk, err)
		}
		buf = append(buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(buf, "\r\n"), err
	}
}

// skipLine reads the rest of a line over maxMessage (buf and chunk, read
// with err, are its start), looking for its request's id, and returns
// the *lineTooLongError that refuses it, or the read error that ended it.
func skipLine(r *bufio.Reader, buf, chunk []byte, err error) error {
	var sc rpcid.Scanner
	sc.Feed(buf)
	sc.Feed(chunk)
	for errors.Is(err, bufio.ErrBufferFull) {
		chunk, err = r.ReadSlice('\n')
		sc.Feed(chunk)
	}
	if err != nil && err != io.EOF {
		return err
	}
	id, ok := sc.ID()
	if !ok {
		id = json.RawMessage("null")
	}
	return &lineTooLongError{id: id}
}

// closePending fails every call still waiting: the client is gone.
func (c *conn) closePending() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
}

// dispatch handles one line.
func (c *conn) dispatch(ctx context.Context, line []byte, h handler) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		_ = c.write(message{ID: json.RawMessage("null"), Error: &rpcError{Code: codeParseError, Message: "not a JSON-RPC message: " + err.Error()}})
		return
	}
	c.reads++
	m.read = c.reads
	isResponse := m.Method == "" && len(m.ID) > 0
	switch {
	case isResponse:
		c.answered(m)
	case m.Method == "" || m.JSONRPC != "2.0":
		id := m.ID
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		_ = c.write(message{ID: id, Error: &rpcError{Code: codeInvalidRequest, Message: `a request needs "jsonrpc":"2.0" and a method`}})
	case !c.started:
		c.beforeStart(ctx, m, h)
	default:
		c.handle(ctx, m, h)
	}
}

// beforeStart handles a request or notification read before initialize
// was answered: initialize is answered now, on the reader, and once it
// succeeds the messages that came before it are handled in their order;
// anything else waits for it.
func (c *conn) beforeStart(ctx context.Context, m message, h handler) {
	if m.Method != "initialize" || isNotification(m) {
		if len(c.early) >= maxEarly {
			if !isNotification(m) {
				_ = c.write(message{ID: m.ID, Error: &rpcError{Code: codeInvalidRequest, Message: fmt.Sprintf("initialize first: %d messages already wait for it", maxEarly)}})
			}
			return
		}
		c.early = append(c.early, m)
		return
	}
	res, err := safeHandle(ctx, h, m.Method, m.Params)
	c.reply(m.ID, res, err)
	if err != nil {
		return
	}
	c.started = true
	early := c.early
	c.early = nil
	for _, e := range early {
		c.handle(ctx, e, h)
	}
}

func isNotification(m message) bool { return len(m.ID) == 0 || string(m.ID) == "null" }

// handle runs one request in its own goroutine (so a long session/prompt
// does not hold up session/cancel) or one notification in order
// (session/cancel is quick).
func (c *conn) handle(ctx context.Context, m message, h handler) {
	ctx = context.WithValue(ctx, readKey{}, m.read)
	if isNotification(m) {
		if _, err := safeHandle(ctx, h, m.Method, m.Params); err != nil {
			c.log.Warn("notification failed", "method", m.Method, "error", err)
		}
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		res, err := safeHandle(ctx, h, m.Method, m.Params)
		c.reply(m.ID, res, err)
	}()
}

// followed is a handler's result with what must reach the client only
// after it: then runs once the answer is written. A client learns a new
// session's id from session/new's answer, and Zed drops (as "unknown
// session") a session/update that arrives before it.
type followed struct {
	result any
	then   func()
}

// reply answers request id with res or err; a followed result's then
// runs after the answer is written.
func (c *conn) reply(id json.RawMessage, res any, err error) {
	if f, ok := res.(followed); ok {
		res = f.result
		defer f.then()
	}
	if err != nil {
		re, ok := errors.AsType[*rpcError](err)
		if !ok {
			re = &rpcError{Code: codeInternalError, Message: err.Error()}
		}
		_ = c.write(message{ID: id, Error: re})
		return
	}
	raw, merr := json.Marshal(res)
	if merr != nil {
		_ = c.write(message{ID: id, Error: &rpcError{Code: codeInternalError, Message: "encode result: " + merr.Error()}})
		return
	}
	if err := c.write(message{ID: id, Result: raw}); err != nil {
		c.log.Warn("answer not sent", "error", err)
	}
}

// answered hands a response to the call waiting for it.
func (c *conn) answered(m message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.pending[string(m.ID)]
	if !ok {
		c.log.Warn("response to no request of ours", "id", string(m.ID))
		return
	}
	select {
	case ch <- m: // buffered: never blocks under the lock
	default:
	}
}

// safeHandle runs h, turning a panic into an internal error: no input
// may bring the server down.
func safeHandle(ctx context.Context, h handler, method string, params json.RawMessage) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, &rpcError{Code: codeInternalError, Message: fmt.Sprintf("internal error handling %s: %v", method, p)}
		}
	}()
	return h(ctx, method, params)
}
