package provider

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// WebSocketBeta is the OpenAI-Beta header value of the Responses WebSocket mode.
const WebSocketBeta = "responses_websockets=2026-02-06"

// Defaults for WSConfig.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultPingInterval   = 30 * time.Second
)

// ErrBusy is wrapped by Open when the WebSocket connection already carries a
// stream: the Responses WebSocket mode runs one response at a time.
var ErrBusy = errors.New("websocket transport already has an active stream")

// WSConfig configures the WebSocket transport.
type WSConfig struct {
	// BaseURL is the API root; "https" becomes "wss" and "http" becomes
	// "ws", and "/responses" is appended.
	BaseURL string
	// APIKey, Credential and NoAuth work as in HTTPConfig.
	APIKey     string
	Credential func(ctx context.Context) (string, error)
	NoAuth     bool
	// Headers are added to the upgrade request (never Authorization).
	Headers http.Header
	// MaxFrameBytes is the read limit per message (DefaultMaxFrameBytes).
	MaxFrameBytes int64
	// IdleTimeout bounds the gap between frames (DefaultIdleTimeout).
	IdleTimeout time.Duration
	// ConnectTimeout bounds dial plus handshake, and each write
	// (DefaultConnectTimeout, 10 s).
	ConnectTimeout time.Duration
	// PingInterval is the keepalive ping period (DefaultPingInterval).
	PingInterval time.Duration
	// NetDialContext overrides the TCP dialer (tests inject faults here).
	NetDialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSClientConfig is used for wss URLs.
	TLSClientConfig *tls.Config
	// Features are the endpoint side of Responses qualification.
	Features ResponsesFeatures
	// Logger receives debug records (never credentials); nil discards.
	Logger *slog.Logger
}

// WebSocket is the Responses transport over one persistent WebSocket. It
// reuses the connection across turns and carries one response at a time;
// any failure or abandoned stream retires the connection and the next Open
// dials a new one. It never retries or resends.
type WebSocket struct {
	cfg    WSConfig
	url    string
	noAuth bool
	log    *slog.Logger

	mu     sync.Mutex
	conn   *wsConn
	busy   bool
	active *wsStream // the stream that holds busy, if Open returned one
}

var (
	_ Transport       = (*WebSocket)(nil)
	_ FeatureReporter = (*WebSocket)(nil)
	_ Stream          = (*wsStream)(nil)
)

// NewWebSocket returns a WebSocket transport; it dials lazily on Open.
func NewWebSocket(cfg WSConfig) *WebSocket {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	w := &WebSocket{cfg: cfg, url: WebSocketURL(cfg.BaseURL), noAuth: cfg.NoAuth || IsLoopbackURL(cfg.BaseURL), log: cfg.Logger}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	return w
}

// WebSocketURL derives the socket URL from an HTTP base URL. Userinfo is
// dropped (the socket authenticates with the Authorization header only).
func WebSocketURL(base string) string {
	u := strings.TrimRight(base, "/") + "/responses"
	if pu, err := url.Parse(u); err == nil && pu.User != nil {
		pu.User = nil
		u = pu.String()
	}
	switch {
	case strings.HasPrefix(u, "https://"):
		return "wss://" + strings.TrimPrefix(u, "https://")
	case strings.HasPrefix(u, "http://"):
		return "ws://" + strings.TrimPrefix(u, "http://")
	}
	return u
}

// URL returns the socket URL with any userinfo password redacted.
func (w *WebSocket) URL() string { return RedactURL(w.url) }

// EndpointFeatures returns the configured endpoint features.
func (w *WebSocket) EndpointFeatures() ResponsesFeatures { return w.cfg.Features }

// SendsWarmups reports that the transport sends a [Request.Warmup] (the
// frame's "generate": false).
func (w *WebSocket) SendsWarmups() bool { return true }

// Close retires the idle connection, if any. An active stream keeps its
// connection until the stream is closed.
func (w *WebSocket) Close() error {
	w.mu.Lock()
	c := w.conn
	if !w.busy {
		w.conn = nil
	} else {
		c = nil
	}
	w.mu.Unlock()
	if c != nil {
		c.retire()
	}
	return nil
}

// Open sends one response.create frame, dialing first if no connection is
// open. ctx bounds dialing and writing only.
func (w *WebSocket) Open(ctx context.Context, req *Request) (Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, canceledError(PreSend, false, err)
	}
	key, aerr := credential(ctx, w.cfg.APIKey, w.cfg.Credential, w.noAuth)
	if aerr != nil {
		return nil, aerr
	}
	if req.PreviousResponseID != "" { // only on the connection holding the response
		return nil, &Error{Phase: PreSend, Class: InvalidRequest, Err: ErrContinuationNotWebSocket}
	}
	if req.Compact { // an HTTP endpoint
		return nil, &Error{Phase: PreSend, Class: InvalidRequest, Err: ErrCompactNotResponses}
	}
	frame, err := req.EncodeWebSocket()
	if err != nil {
		return nil, &Error{Phase: PreSend, Class: InvalidRequest, Err: err}
	}
	w.mu.Lock()
	if s := w.active; w.busy && s != nil && s.abandoned() {
		// A cancelled stream is abandoned even if its owner has not
		// closed it yet: it never holds the transport.
		w.mu.Unlock()
		s.release(false)
		w.mu.Lock()
	}
	if w.busy {
		w.mu.Unlock()
		return nil, &Error{Phase: PreSend, Class: InvalidRequest, Err: ErrBusy}
	}
	w.busy = true
	c := w.conn
	w.mu.Unlock()
	if c == nil || c.dead.Load() {
		var derr *Error
		c, derr = w.dial(ctx, key)
		if derr != nil {
			w.setIdle(nil)
			return nil, derr
		}
	}
	if herr := beforeSendOf(ctx).call(); herr != nil {
		w.setIdle(c) // the connection is healthy; nothing was written
		return nil, beforeSendError(herr)
	}
	before := c.counter.written.Load()
	if handedOff, err := c.write(ctx, frame); err != nil {
		// Not handed to the writer: nothing left. Handed off and failed:
		// the byte counter knows. Handed off but abandoned on ctx: the write
		// may still happen, so assume it did.
		dispatched := handedOff && (ctx.Err() != nil || c.counter.written.Load() > before)
		c.retire()
		w.setIdle(nil)
		if ctx.Err() != nil {
			return nil, canceledError(Opening, dispatched, ctx.Err())
		}
		if dispatched {
			return nil, &Error{Phase: Opening, Class: ResponseHeaders, Dispatched: true, RequestID: c.requestID, Err: fmt.Errorf("write response.create: %w", err)}
		}
		return nil, &Error{Phase: Opening, Class: Connect, RequestID: c.requestID, Err: fmt.Errorf("write response.create: %w", err)}
	}
	s := &wsStream{w: w, c: c, idle: w.cfg.IdleTimeout}
	w.mu.Lock()
	w.conn, w.active = c, s
	w.mu.Unlock()
	w.log.Debug("provider websocket send", "url", RedactURL(w.url), "model", req.Model, "bytes", len(frame))
	return s, nil
}

// setIdle ends the busy state, keeping c (nil retires) for the next Open.
func (w *WebSocket) setIdle(c *wsConn) {
	w.mu.Lock()
	w.conn = c
	w.busy = false
	w.active = nil
	w.mu.Unlock()
}

// dial opens a connection and starts its writer goroutine.
func (w *WebSocket) dial(ctx context.Context, key string) (*wsConn, *Error) {
	counter := &countingConn{}
	base := w.cfg.NetDialContext
	if base == nil {
		base = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: w.cfg.ConnectTimeout,
		TLSClientConfig:  w.cfg.TLSClientConfig,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := base(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			counter.Conn = nc
			return counter, nil
		},
	}
	h := http.Header{}
	for k, vs := range w.cfg.Headers {
		if http.CanonicalHeaderKey(k) == "Authorization" {
			continue
		}
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	h.Set("OpenAI-Beta", WebSocketBeta)
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	dctx, cancel := context.WithTimeout(ctx, w.cfg.ConnectTimeout)
	defer cancel()
	conn, resp, err := d.DialContext(dctx, w.url, h)
	if err != nil {
		return nil, w.dialError(ctx, resp, scrubErr(err, key), key)
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	conn.SetReadLimit(w.cfg.MaxFrameBytes)
	c := &wsConn{c: conn, counter: counter, send: make(chan wsWrite), pong: make(chan string, 1),
		quit: make(chan struct{}), done: make(chan struct{}), writeTimeout: w.cfg.ConnectTimeout}
	if resp != nil {
		c.requestID = resp.Header.Get("X-Request-Id")
		c.rl = ParseRateLimits(resp.Header)
	}
	conn.SetPingHandler(func(data string) error {
		select {
		case c.pong <- data:
		default:
		}
		return nil
	})
	go c.writer(w.cfg.PingInterval)
	return c, nil
}

// dialError classifies a failed dial or handshake. The response.create
// frame was not sent, so nothing is dispatched.
func (w *WebSocket) dialError(ctx context.Context, resp *http.Response, err error, key string) *Error {
	if resp != nil {
		if resp.StatusCode == http.StatusUpgradeRequired {
			if resp.Body != nil {
				resp.Body.Close()
			}
			return &Error{Phase: Opening, Class: FallbackToHTTP, Status: resp.StatusCode, Err: err}
		}
		e := statusError(resp, key)
		e.Dispatched, e.Handshake = false, true
		e.Err = err
		return e
	}
	switch {
	case ctx.Err() != nil:
		return canceledError(Opening, false, errors.Join(ctx.Err(), err))
	case isNetUnreachable(err):
		return &Error{Phase: PreSend, Class: NetworkUnavailable, Err: err}
	}
	return &Error{Phase: Opening, Class: Connect, Err: err}
}

// countingConn counts bytes written so a failed send can tell whether any
// request byte left.
type countingConn struct {
	net.Conn
	written atomic.Int64
}

// Write counts written bytes.
func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

type wsWrite struct {
	data   []byte
	result chan error
}

// wsConn is one socket with its single writer goroutine.
type wsConn struct {
	c            *websocket.Conn
	counter      *countingConn
	send         chan wsWrite
	pong         chan string
	quit         chan struct{}
	done         chan struct{}
	retireOnce   sync.Once
	dead         atomic.Bool
	writeTimeout time.Duration
	requestID    string
	rl           RateLimits
	buf          []byte
}

// writer is the only goroutine that writes to the socket: data frames,
// pings and pongs.
func (c *wsConn) writer(ping time.Duration) {
	defer close(c.done)
	t := time.NewTicker(ping)
	defer t.Stop()
	for {
		select {
		case wr := <-c.send:
			c.c.SetWriteDeadline(time.Now().Add(c.writeTimeout))
			err := c.c.WriteMessage(websocket.TextMessage, wr.data)
			wr.result <- err
			if err != nil {
				c.fail()
				return
			}
		case data := <-c.pong:
			if c.c.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(c.writeTimeout)) != nil {
				c.fail()
				return
			}
		case <-t.C:
			if c.c.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.writeTimeout)) != nil {
				c.fail()
				return
			}
		case <-c.quit:
			c.c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			return
		}
	}
}

// write hands a frame to the writer goroutine and waits for the result.
// handedOff reports whether the writer took the frame.
func (c *wsConn) write(ctx context.Context, data []byte) (handedOff bool, err error) {
	res := make(chan error, 1)
	select {
	case c.send <- wsWrite{data: data, result: res}:
	case <-c.done:
		return false, net.ErrClosed
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case err := <-res:
		return true, err
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// retire closes the connection for good; safe to call repeatedly. It gives
// the writer a moment to send a close frame, then closes the socket.
func (c *wsConn) retire() {
	c.retireOnce.Do(func() {
		c.dead.Store(true)
		close(c.quit)
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
		c.c.Close()
	})
}

// fail marks the connection dead from the writer goroutine itself (which
// must not wait for its own exit) and closes the socket.
func (c *wsConn) fail() {
	c.retireOnce.Do(func() {
		c.dead.Store(true)
		close(c.quit)
		c.c.Close()
	})
}

// readFrame reads one whole message into the connection's reused buffer.
func (c *wsConn) readFrame() ([]byte, error) {
	_, r, err := c.c.NextReader()
	if err != nil {
		return nil, err
	}
	b := c.buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			c.buf = b
			return b, nil
		}
		if err != nil {
			c.buf = b
			return nil, err
		}
	}
}

// wsStream is one response on a WebSocket connection.
type wsStream struct {
	w        *WebSocket
	c        *wsConn
	idle     time.Duration
	dec      decoder
	err      error
	finished bool
	released atomic.Bool
	release1 sync.Once // concurrent releases wait for the first to finish

	watched  context.Context
	mu       sync.Mutex
	unwatch  func() bool
	canceled atomic.Bool
	closedBy atomic.Bool

	// Native steering (Steer, Continue), guarded by mu.
	respID   string // the current response's id, from response.created
	steers   int    // steering inputs written and not answered yet
	accepted int    // accepted inputs whose successor has not started
	between  bool   // a response ended; its successor has not started
	ended    bool   // no more steering: the stream ended or failed
}

// RequestID returns the handshake's x-request-id.
func (s *wsStream) RequestID() string { return s.c.requestID }

// RateLimits returns the handshake's rate-limit headers.
func (s *wsStream) RateLimits() RateLimits { return s.c.rl }

func (s *wsStream) watch(ctx context.Context) {
	if ctx == s.watched {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unwatch != nil {
		s.unwatch()
		s.unwatch = nil
	}
	s.watched = ctx
	if ctx.Done() != nil {
		s.unwatch = context.AfterFunc(ctx, func() {
			s.canceled.Store(true)
			s.c.c.NetConn().SetReadDeadline(time.Unix(1, 0))
			// Cancelling aborts the stream: the connection is retired
			// and the transport freed now, whether or not the owner
			// calls Next or Close again.
			s.release(false)
		})
	}
}

// abandoned reports that the stream's context was cancelled: at once,
// not only once context.AfterFunc's callback has run in its goroutine.
func (s *wsStream) abandoned() bool {
	if s.canceled.Load() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watched != nil && s.watched.Err() != nil
}

// Next returns the next event; see [Stream].
func (s *wsStream) Next(ctx context.Context) (Event, error) {
	if s.err != nil {
		return Event{}, s.err
	}
	if s.finished {
		return Event{}, io.EOF
	}
	if err := ctx.Err(); err != nil {
		return Event{}, s.fail(canceledError(Body, true, err))
	}
	s.watch(ctx)
	for {
		s.c.c.SetReadDeadline(time.Now().Add(s.idle))
		if s.canceled.Load() {
			// The cancel callback may have run between the two calls.
			s.c.c.SetReadDeadline(time.Unix(1, 0))
		}
		data, err := s.c.readFrame()
		if err != nil {
			return Event{}, s.fail(s.readError(ctx, err))
		}
		ev, st, derr := s.dec.decode(data)
		if derr != nil {
			if seg, ok := s.steeredAway(derr); ok {
				return seg, nil
			}
			return Event{}, s.fail(derr)
		}
		if !st.emit {
			continue
		}
		if s.steering(&ev, st.final) {
			s.finished = true
			s.release(true)
		}
		return ev, nil
	}
}

// steering keeps the native steering state for ev and reports whether
// the stream ends with it. A response's terminal event ends the stream
// unless a steering input is outstanding (written and not answered, or
// accepted and its successor not started): it is then EventSegmentDone
// and the successor follows on the same stream. A failed input that was
// the last outstanding one after a response ended ends the stream.
func (s *wsStream) steering(ev *Event, final bool) (end bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Type {
	case EventCreated:
		if ev.Response != nil {
			s.respID = ev.Response.ID
		}
		if s.between { // the successor of an accepted input
			s.between = false
			s.accepted = max(s.accepted-1, 0)
		}
	case EventSteerAccepted:
		s.steers = max(s.steers-1, 0)
		s.accepted++
	case EventSteerFailed:
		s.steers = max(s.steers-1, 0)
		if s.between && s.steers == 0 && s.accepted == 0 {
			s.ended = true
			return true
		}
	}
	if !final {
		return false
	}
	if s.steers > 0 || s.accepted > 0 {
		ev.Type = EventSegmentDone
		s.segmentEnded()
		return false
	}
	s.ended = true
	return true
}

// steeredAway turns a response.incomplete with reason "steered" into
// EventSegmentDone while a steering input is outstanding.
func (s *wsStream) steeredAway(e *Error) (Event, bool) {
	if e.Class != ResponsesIncomplete || e.IncompleteReason != "steered" || e.Response == nil {
		return Event{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.steers == 0 && s.accepted == 0 {
		return Event{}, false
	}
	s.segmentEnded()
	return Event{Type: EventSegmentDone, Response: e.Response}, true
}

// segmentEnded starts waiting for the successor; its events are decoded
// afresh. Call with mu held.
func (s *wsStream) segmentEnded() {
	s.between = true
	s.dec = decoder{noFast: s.dec.noFast, sawFirst: true}
}

// ErrSteeringUnavailable: the stream cannot take a steering input now
// (no response has started, one ended and its successor has not, or the
// stream ended); nothing was sent.
var ErrSteeringUnavailable = errors.New("native steering is not available on this stream now")

// SteeringStream is a stream that takes native steering inputs (the
// Responses WebSocket): Steer sends response.steer for the response in
// progress; Continue returns the tool results an accepted input waits
// for, as response.create with previous_response_id on the same
// connection, without repeating the input.
type SteeringStream interface {
	Stream
	Steer(ctx context.Context, input string) error
	Continue(ctx context.Context, req *Request) error
}

var _ SteeringStream = (*wsStream)(nil)

// Steer sends input as a response.steer for the response in progress.
// ErrSteeringUnavailable (nothing sent) when there is none; an *Error
// with Dispatched saying whether the frame may have left otherwise.
func (s *wsStream) Steer(ctx context.Context, input string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.between || s.respID == "" || s.released.Load() {
		return ErrSteeringUnavailable
	}
	frame, err := json.Marshal(struct {
		Type               string `json:"type"`
		PreviousResponseID string `json:"previous_response_id"`
		Input              string `json:"input"`
	}{"response.steer", s.respID, input})
	if err != nil {
		return &Error{Phase: PreSend, Class: InvalidRequest, Err: err}
	}
	s.steers++
	return s.send(ctx, frame, "response.steer")
}

// Continue sends req (its tool results) as the response.create an
// accepted steering input waits for, continuing the response that
// ended. ErrSteeringUnavailable (nothing sent) unless a response ended
// with an accepted input waiting.
func (s *wsStream) Continue(ctx context.Context, req *Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || !s.between || s.accepted == 0 || s.released.Load() {
		return ErrSteeringUnavailable
	}
	r := *req
	r.PreviousResponseID = s.respID
	frame, err := r.EncodeWebSocket()
	if err != nil {
		return &Error{Phase: PreSend, Class: InvalidRequest, Err: err}
	}
	return s.send(ctx, frame, "response.create")
}

// send writes a client event on the stream's connection. Call with mu
// held. A failed write retires the connection: the stream fails at its
// next read.
func (s *wsStream) send(ctx context.Context, frame []byte, what string) error {
	before := s.c.counter.written.Load()
	handedOff, err := s.c.write(ctx, frame)
	if err == nil {
		return nil
	}
	dispatched := handedOff && (ctx.Err() != nil || s.c.counter.written.Load() > before)
	s.c.retire()
	return &Error{Phase: Body, Class: BodyInterrupted, Dispatched: dispatched, RequestID: s.c.requestID, Err: fmt.Errorf("write %s: %w", what, err)}
}

// readError classifies a failed read.
func (s *wsStream) readError(ctx context.Context, err error) *Error {
	if s.canceled.Load() || s.closedBy.Load() {
		c := ctx.Err()
		if c == nil {
			c = context.Canceled
		}
		return canceledError(Body, true, c)
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return &Error{Phase: Body, Class: IdleTimeout, Dispatched: true, Err: errIdle}
	}
	if errors.Is(err, websocket.ErrReadLimit) {
		return &Error{Phase: Body, Class: LimitExceeded, Dispatched: true, Err: fmt.Errorf("%w (MaxFrameBytes %d)", err, s.w.cfg.MaxFrameBytes)}
	}
	if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
		return &Error{Phase: Body, Class: TerminalEOF, Dispatched: true, Message: "socket closed without response.completed", Err: err}
	}
	return &Error{Phase: Body, Class: BodyInterrupted, Dispatched: true, Err: err}
}

func (s *wsStream) fail(e *Error) error {
	if e.RequestID == "" {
		e.RequestID = s.c.requestID
	}
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	s.err = e
	s.release(false)
	return e
}

// release ends the stream: a completed response keeps the connection for
// the next turn, anything else retires it.
//
// It may run from Next, Close, the cancel callback and Open at once; every
// call returns only after the transport is free again.
func (s *wsStream) release(reuse bool) {
	s.release1.Do(func() { s.releaseOnce(reuse) })
}

func (s *wsStream) releaseOnce(reuse bool) {
	s.released.Store(true)
	s.mu.Lock()
	if s.unwatch != nil {
		s.unwatch()
		s.unwatch = nil
	}
	s.mu.Unlock()
	if reuse && !s.canceled.Load() && !s.c.dead.Load() {
		s.w.setIdle(s.c)
		return
	}
	s.c.retire()
	s.w.setIdle(nil)
}

// Close releases the stream; before completion it retires the connection.
func (s *wsStream) Close() error {
	if !s.released.Load() {
		s.closedBy.Store(true)
	}
	s.release(false)
	return nil
}
