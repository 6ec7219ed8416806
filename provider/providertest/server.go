// Package providertest is a scripted model server for tests and for `octet
// demo`. It is a real HTTP + WebSocket server on 127.0.0.1 that plays
// scripted turns, plus an in-process [http.RoundTripper] that plays the
// same scripts without sockets so tests can run under testing/synctest.
// It serves the OpenAI Responses API (…/responses, HTTP and WebSocket),
// Chat Completions (…/chat/completions) and Anthropic Messages
// (…/messages): a turn is played as the service the request's path names
// streams it, so one script drives every route.
//
// Usage:
//
//	srv := providertest.New(t) // or New(nil) outside tests; then defer srv.Close()
//	srv.Enqueue(
//		providertest.Reply(providertest.Reasoning("enc", "thinking"), providertest.FunctionCall("call_1", "read", `{"path":"a.go"}`)),
//		providertest.Status(503, "server_error", "", "overloaded").WithRetryAfter("2"),
//		providertest.Text("done"),
//	)
//	tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL()})  // or NewWebSocket(WSConfig{BaseURL: srv.URL()})
//	... srv.Requests() // every request, decoded, Authorization redacted
//
// Each request (an HTTP POST to …/responses or a WebSocket response.create
// frame) consumes exactly one turn, in order, whichever transport sent it;
// a turn made with [Turn.ForRequestContaining] is skipped by requests that
// do not contain its text (so concurrent agents can share one server).
// When no turn is left the server answers 500 with code "script_exhausted".
//
// Healthy turns: [Text], [Reply] with [Message], [Reasoning],
// [FunctionCall] and [CustomToolCall] outputs (text streams as word deltas,
// arguments in 8-byte pieces; usage defaults to 100 input tokens and one
// output token per delta, see [Turn.WithUsage] and [Turn.WithoutUsage]).
// Replayed turns: [Events], [FromJSONL] (recorded .jsonl fixtures),
// [RawSSE] (recorded .sse bytes). Faults: [Status] and [StatusBody] (an HTTP
// status with a JSON error body; over WebSocket an error frame carrying the
// status and headers), [Failed] (error event + response.failed),
// [FailedAfter] (the same after partial generation),
// [Incomplete], [Stall], [Refuse] (close after reading the request), and
// the modifiers [Turn.DropAfter] (abort the connection after n frames),
// [Turn.EOFAfter] (clean end without completion), [Turn.StallAfter],
// [Turn.MalformedAt], [Turn.InvalidUTF8At], [Turn.Pace] (a delay before
// every frame), [Turn.WithHeader] and [Turn.WithRetryAfter].
// [Server.SetModels] gives it a model list (GET …/models).
// [Server.RejectWebSocket] makes upgrade handshakes fail with a status (426
// asks the client to fall back to HTTP); [Server.Pings] counts keepalive
// pings.
//
// A Server does not need a *testing.T; with nil it must be closed by the
// caller. For virtual time, create it with [NewInProcess] inside the
// synctest bubble and pass [Server.RoundTripper] to provider.HTTPConfig:
// stalls then wait on the request context and Pace sleeps in virtual time.
package providertest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/octet-agent/octet/provider"
)

// TB is the part of testing.TB the server uses (to register Close).
type TB interface {
	Cleanup(func())
}

// Request is one recorded request.
type Request struct {
	// Transport is "http", "websocket" or "inprocess".
	Transport string
	Method    string
	Path      string
	// Query is the request URL's query (Azure's api-version, say).
	Query url.Values
	// Header has Authorization (and similar) replaced by "[REDACTED]";
	// for WebSocket it is the upgrade handshake's header.
	Header http.Header
	// Raw is the request body or response.create frame as sent.
	Raw json.RawMessage
	// Body is Raw decoded (nil if it was not a JSON object).
	Body map[string]any
	// RemoteAddr is the client's address ("" in process); requests that
	// share it came over one connection.
	RemoteAddr string
}

// Input returns the request's input items (Body["input"]).
func (r Request) Input() []any {
	in, _ := r.Body["input"].([]any)
	return in
}

// Server plays scripted turns. It is safe for concurrent use.
type Server struct {
	mu        sync.Mutex
	turns     []Turn
	reqs      []Request
	wsReject  []int
	wsConns   map[*websocket.Conn]bool
	n         int
	pings     int
	closed    chan struct{}
	closeOnce sync.Once
	// models is the model list GET …/models answers (nil: 404);
	// lists are those requests.
	models []string
	lists  []Request

	ln  net.Listener
	srv *http.Server
	url string
}

// New starts a server on 127.0.0.1 (random port). With a non-nil tb the
// server closes at the end of the test; otherwise call Close.
func New(tb TB) *Server {
	s, err := NewAt(tb, "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("providertest: %v", err))
	}
	return s
}

// NewAt starts a server listening on addr (a local server's default
// port, say), or fails when addr cannot be listened on.
func NewAt(tb TB, addr string) (*Server, error) {
	s := newServer()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String() + "/v1"
	s.srv = &http.Server{Handler: s}
	go s.srv.Serve(ln)
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s, nil
}

// NewInProcess returns a server without sockets: only RoundTripper plays
// its scripts. URL returns a loopback URL that nothing listens on.
func NewInProcess(tb TB) *Server {
	s := newServer()
	s.url = "http://127.0.0.1:9/v1"
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s
}

func newServer() *Server {
	return &Server{closed: make(chan struct{}), wsConns: map[*websocket.Conn]bool{}}
}

// URL is the base URL to configure as the provider's BaseURL (…/v1).
func (s *Server) URL() string { return s.url }

// Enqueue appends turns to the script.
func (s *Server) Enqueue(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

// RejectWebSocket makes the next upgrade handshake fail with status
// (426 means "use HTTP"). Each call rejects one more handshake.
func (s *Server) RejectWebSocket(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wsReject = append(s.wsReject, status)
}

// Pending is the number of turns not yet consumed.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.turns)
}

// Requests returns a copy of every request recorded so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// SetModels makes GET …/models answer the OpenAI model list of ids
// (without it the path is unknown: 404). Model list requests are not
// turns: they consume none and are not among Requests.
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = append([]string{}, ids...)
}

// ModelListRequests is the number of GET …/models requests received.
func (s *Server) ModelListRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lists)
}

// ModelLists returns the GET …/models requests received (headers
// redacted as Requests' are), in order.
func (s *Server) ModelLists() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.lists...)
}

// serveModels answers GET …/models.
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.lists = append(s.lists, Request{Transport: "http", Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: redact(r.Header), RemoteAddr: r.RemoteAddr})
	ids := s.models
	s.mu.Unlock()
	if ids == nil {
		http.Error(w, "providertest: unknown path", http.StatusNotFound)
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, id := range ids {
		list.Data = append(list.Data, model{ID: id, Object: "model", OwnedBy: "providertest"})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(list)
}

// Pings is the number of WebSocket pings received from clients.
func (s *Server) Pings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pings
}

// Close stops the server, ends stalled turns and closes WebSocket
// connections. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.mu.Lock()
		for c := range s.wsConns {
			c.NetConn().Close()
		}
		s.mu.Unlock()
		if s.srv != nil {
			s.srv.Close()
		}
	})
}

// next records a request and pops the next turn (nil when exhausted).
func (s *Server) next(transport, method string, u *url.URL, remote string, h http.Header, raw []byte) (*Turn, int) {
	r := Request{Transport: transport, Method: method, Path: u.Path, Query: u.Query(), Header: redact(h), Raw: bytes.Clone(raw), RemoteAddr: remote}
	var body map[string]any
	if json.Unmarshal(raw, &body) == nil {
		r.Body = body
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
	s.n++
	for i, t := range s.turns {
		if t.match == "" || bytes.Contains(raw, []byte(t.match)) {
			s.turns = append(s.turns[:i:i], s.turns[i+1:]...)
			return &t, s.n
		}
	}
	return nil, s.n
}

var exhausted = Status(500, "server_error", "script_exhausted", "providertest: no scripted turn left")

func redact(h http.Header) http.Header {
	out := h.Clone()
	if out == nil {
		out = http.Header{}
	}
	for _, k := range []string{"Authorization", "Proxy-Authorization", "Cookie", "Api-Key", "X-Api-Key"} {
		if _, ok := out[k]; ok {
			out[k] = []string{"[REDACTED]"}
		}
	}
	return out
}

// ServeHTTP serves POST …/responses (SSE), GET …/responses upgrades,
// POST …/chat/completions, POST …/messages and GET …/models (SetModels).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/models") && r.Method == http.MethodGet {
		s.serveModels(w, r)
		return
	}
	route, ok := wireOf(r.URL.Path)
	if !ok {
		http.Error(w, "providertest: unknown path", http.StatusNotFound)
		return
	}
	if route == wireResponses && websocket.IsWebSocketUpgrade(r) {
		s.serveWebSocket(w, r)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "providertest: method not allowed", http.StatusMethodNotAllowed)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return
	}
	turn, n := s.next("http", r.Method, r.URL, r.RemoteAddr, r.Header, raw)
	if turn == nil {
		turn = &exhausted
	}
	if turn.refuse {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	for k, vs := range turn.header {
		w.Header()[k] = vs
	}
	w.Header().Set(route.requestIDHeader(), "req_"+strconv.Itoa(n))
	if turn.status != 0 {
		w.Header().Set("Content-Type", cmp.Or(turn.contentType, "application/json"))
		w.WriteHeader(turn.status)
		w.Write(route.errorBody(turn, n))
		return
	}
	if strings.HasSuffix(r.URL.Path, "/responses/compact") {
		s.serveCompact(w, r, turn)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if turn.rawSSE != nil {
		w.Write(turn.rawSSE)
		return
	}
	rc := http.NewResponseController(w)
	rc.Flush()
	var buf bytes.Buffer
	end := play(turn, route, func(f frame) error {
		buf.Reset()
		writeSSE(&buf, f)
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		return rc.Flush()
	})
	switch end {
	case endDrop:
		panic(http.ErrAbortHandler)
	case endStall:
		select {
		case <-r.Context().Done():
		case <-s.closed:
		}
		panic(http.ErrAbortHandler)
	}
}

// pipe returns a response body its writer feeds, closed with ctx's cause
// if ctx ends first; stop ends that watch.
func pipe(ctx context.Context) (io.ReadCloser, *io.PipeWriter, func() bool) {
	pr, pw := io.Pipe()
	stop := context.AfterFunc(ctx, func() { pw.CloseWithError(context.Cause(ctx)) })
	return pr, pw, stop
}

// compact answers a native compaction in process, as serveCompact does.
func (rt roundTripper) compact(req *http.Request, resp *http.Response, t *Turn) *http.Response {
	if t.compacted == nil {
		resp.StatusCode, resp.Status = http.StatusInternalServerError, "500 Internal Server Error"
		resp.Body = io.NopCloser(strings.NewReader("providertest: a compaction request got a streamed turn"))
		return resp
	}
	resp.Header.Set("Content-Type", "application/json")
	body := t.compactBody()
	var pw *io.PipeWriter
	var stop func() bool
	resp.Body, pw, stop = pipe(req.Context())
	go func() {
		defer stop()
		if t.hold != nil {
			<-t.hold
		}
		if t.pace > 0 {
			time.Sleep(t.pace)
		}
		if t.cut >= 0 && t.cut < len(body) {
			pw.Write(body[:t.cut])
			pw.CloseWithError(io.ErrUnexpectedEOF)
			return
		}
		pw.Write(body)
		pw.Close()
	}()
	return resp
}

// serveCompact answers a native compaction with a Compacted turn's JSON
// object (any other turn is a script error: 500).
func (s *Server) serveCompact(w http.ResponseWriter, r *http.Request, t *Turn) {
	if t.compacted == nil {
		http.Error(w, "providertest: a compaction request got a streamed turn", http.StatusInternalServerError)
		return
	}
	body := t.compactBody()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush()
	if t.hold != nil {
		<-t.hold
	}
	if t.pace > 0 {
		select {
		case <-time.After(t.pace):
		case <-r.Context().Done():
			return
		}
	}
	if t.cut >= 0 && t.cut < len(body) {
		w.Write(body[:t.cut])
		panic(http.ErrAbortHandler)
	}
	w.Write(body)
}

// play writes the turn's frames for route up to its cut and returns how
// it ends.
func play(t *Turn, route wire, write func(frame) error) ending {
	frames := t.framesFor(route)
	n := len(frames)
	if t.cut >= 0 && t.cut < n {
		n = t.cut
	}
	if t.hold != nil {
		<-t.hold
	}
	for _, f := range frames[:n] {
		if t.pace > 0 {
			time.Sleep(t.pace)
		}
		if err := write(f); err != nil {
			return endDrop
		}
	}
	if t.cut < 0 {
		return endComplete
	}
	return t.end
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	reject := 0
	if len(s.wsReject) > 0 {
		reject, s.wsReject = s.wsReject[0], s.wsReject[1:]
	}
	s.mu.Unlock()
	if reject != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reject)
		fmt.Fprintf(w, `{"error":{"type":"invalid_request_error","code":"websocket_rejected","message":"providertest: handshake rejected with %d"}}`, reject)
		return
	}
	hdr := r.Header.Clone()
	c, err := upgrader.Upgrade(w, r, http.Header{"X-Request-Id": {"req_ws"}})
	if err != nil {
		return
	}
	s.mu.Lock()
	select {
	case <-s.closed:
		s.mu.Unlock()
		c.Close()
		return
	default:
	}
	s.wsConns[c] = true
	s.mu.Unlock()
	c.SetPingHandler(func(data string) error {
		s.mu.Lock()
		s.pings++
		s.mu.Unlock()
		// The handler runs inside ReadMessage on the goroutine that also
		// writes this connection's turn frames, so writes never overlap.
		return c.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	defer func() {
		s.mu.Lock()
		delete(s.wsConns, c)
		s.mu.Unlock()
		c.Close()
	}()
	for {
		_, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		turn, _ := s.next("websocket", "WS", r.URL, r.RemoteAddr, hdr, msg)
		if turn == nil {
			turn = &exhausted
		}
		if turn.refuse {
			return
		}
		if turn.status != 0 {
			if c.WriteMessage(websocket.TextMessage, wsErrorFrame(turn)) != nil {
				return
			}
			continue
		}
		if turn.steer != nil {
			if !s.playSteered(c, r, hdr, turn) {
				return
			}
			continue
		}
		switch play(turn, wireResponses, func(f frame) error { return c.WriteMessage(websocket.TextMessage, f.data) }) {
		case endDrop:
			return
		case endEOF:
			c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "scripted end"))
			return
		case endStall:
			// The stalled response never ends, but the connection stays
			// served: a later response.create on it is recorded and played
			// as the next request, never read and dropped.
			continue
		}
	}
}

// record records a client event that does not start a turn of the
// script (a response.steer, a steered response's continuation).
func (s *Server) record(r *http.Request, h http.Header, raw []byte) map[string]any {
	req := Request{Transport: "websocket", Method: "WS", Path: r.URL.Path, Query: r.URL.Query(), Header: redact(h), Raw: bytes.Clone(raw), RemoteAddr: r.RemoteAddr}
	var body map[string]any
	if json.Unmarshal(raw, &body) == nil {
		req.Body = body
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	s.n++
	return body
}

// playSteered plays a steerable turn (Turn.SteerAfter,
// Turn.SteerRefusedAfter); false: the connection is done.
func (s *Server) playSteered(c *websocket.Conn, r *http.Request, h http.Header, t *Turn) bool {
	sc := t.steer
	write := func(data []byte) bool { return c.WriteMessage(websocket.TextMessage, data) == nil }
	writeAll := func(frames []frame) bool {
		for _, f := range frames {
			if !write(f.data) {
				return false
			}
		}
		return true
	}
	id := t.id
	if id == "" {
		id = "resp_scripted"
	}
	frames := t.framesFor(wireResponses)
	n := min(max(sc.after, 1), len(frames))
	if !writeAll(frames[:n]) {
		return false
	}
	_, msg, err := c.ReadMessage()
	if err != nil {
		return false
	}
	body := s.record(r, h, msg)
	steer := map[string]any{"id": "steer_scripted", "previous_response_id": id}
	if body["type"] != "response.steer" {
		return write(wsErrorFrame(&exhausted))
	}
	if sc.fail != "" {
		b, _ := json.Marshal(map[string]any{"type": "response.steer.failed", "steer": steer, "input": body["input"],
			"error": map[string]any{"type": "invalid_request_error", "code": sc.fail, "message": "providertest: steering refused"}})
		return write(b) && writeAll(frames[n:])
	}
	b, _ := json.Marshal(map[string]any{"type": "response.steer.accepted", "steer": steer})
	if !write(b) {
		return false
	}
	rest := frames[n:]
	if sc.interrupt {
		steered := *t
		steered.final, steered.reason, steered.steer = "incomplete", "steered", nil
		rest = steered.framesFor(wireResponses)[n:]
	}
	if !writeAll(rest) {
		return false
	}
	var calls []any
	for _, o := range t.items {
		if o.kind == provider.ItemFunctionCall {
			calls = append(calls, map[string]any{"type": "function_call_output", "call_id": o.callID, "name": o.name})
		}
	}
	if len(calls) > 0 {
		b, _ := json.Marshal(map[string]any{"type": "response.steer.pending", "steer": steer,
			"reason": "waiting_for_required_input", "required_input": calls})
		if !write(b) {
			return false
		}
		if _, msg, err = c.ReadMessage(); err != nil {
			return false
		}
		s.record(r, h, msg)
	}
	next := sc.successor
	if next.id == "" {
		next.id = "resp_successor"
	}
	switch play(&next, wireResponses, func(f frame) error { return c.WriteMessage(websocket.TextMessage, f.data) }) {
	case endDrop, endEOF:
		return false
	}
	return true
}

// wsErrorFrame is the WebSocket form of an HTTP error response.
func wsErrorFrame(t *Turn) []byte {
	frame := map[string]any{"type": "error", "status": t.status}
	var body map[string]any
	if json.Unmarshal(t.errBody, &body) == nil {
		if e, ok := body["error"]; ok {
			frame["error"] = e
		}
	} else {
		frame["error"] = map[string]any{"message": string(t.errBody)}
	}
	if len(t.header) > 0 {
		h := map[string]any{}
		for k, vs := range t.header {
			h[strings.ToLower(k)] = strings.Join(vs, ", ")
		}
		frame["headers"] = h
	}
	b, _ := json.Marshal(frame)
	return b
}

// RoundTripper returns an in-process transport that plays the same script
// without sockets. It fires httptrace WroteHeaders/WroteRequest when the
// request is taken, honours the request context, and blocks stalled turns
// on channels, so testing/synctest can advance virtual time through it.
func (s *Server) RoundTripper() http.RoundTripper { return roundTripper{s} }

type roundTripper struct{ s *Server }

// RoundTrip plays one turn.
func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	var raw []byte
	if req.Body != nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("providertest: read request body: %w", err)
		}
		raw = b
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil {
		if tr.WroteHeaders != nil {
			tr.WroteHeaders()
		}
		if tr.WroteRequest != nil {
			tr.WroteRequest(httptrace.WroteRequestInfo{})
		}
	}
	route, ok := wireOf(req.URL.Path)
	if !ok {
		return &http.Response{Status: "404 Not Found", StatusCode: http.StatusNotFound, Header: http.Header{},
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req, Body: io.NopCloser(strings.NewReader("providertest: unknown path"))}, nil
	}
	turn, n := rt.s.next("inprocess", req.Method, req.URL, "", req.Header, raw)
	if turn == nil {
		turn = &exhausted
	}
	if turn.refuse {
		return nil, fmt.Errorf("providertest: connection closed before response headers: %w", io.ErrUnexpectedEOF)
	}
	h := turn.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(route.requestIDHeader(), "req_"+strconv.Itoa(n))
	resp := &http.Response{Status: http.StatusText(turn.status), StatusCode: turn.status, Header: h,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req}
	if turn.status != 0 {
		h.Set("Content-Type", cmp.Or(turn.contentType, "application/json"))
		body := route.errorBody(turn, n)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		return resp, nil
	}
	resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
	resp.ContentLength = -1
	if strings.HasSuffix(req.URL.Path, "/responses/compact") {
		return rt.compact(req, resp, turn), nil
	}
	h.Set("Content-Type", "text/event-stream")
	if turn.rawSSE != nil {
		resp.Body = io.NopCloser(bytes.NewReader(turn.rawSSE))
		return resp, nil
	}
	ctx := req.Context()
	var pw *io.PipeWriter
	var stop func() bool
	resp.Body, pw, stop = pipe(ctx)
	go func() {
		defer stop()
		bw := bufio.NewWriterSize(pw, 4<<10)
		var buf bytes.Buffer
		end := play(turn, route, func(f frame) error {
			buf.Reset()
			writeSSE(&buf, f)
			if _, err := bw.Write(buf.Bytes()); err != nil {
				return err
			}
			return bw.Flush()
		})
		switch end {
		case endDrop:
			pw.CloseWithError(io.ErrUnexpectedEOF)
		case endStall:
			<-ctx.Done()
			pw.CloseWithError(context.Cause(ctx))
		default:
			pw.Close()
		}
	}()
	return resp, nil
}
