package provider

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// Defaults for HTTPConfig and WSConfig bounds.
const (
	DefaultBaseURL      = "https://api.openai.com/v1"
	DefaultMaxBodyBytes = 256 << 20
	DefaultIdleTimeout  = 300 * time.Second
	DefaultOpenTimeout  = 120 * time.Second
	maxErrorBodyBytes   = 64 << 10
)

// HTTPConfig configures the HTTP SSE transport.
type HTTPConfig struct {
	// BaseURL is the API root, e.g. "https://api.openai.com/v1"
	// (OPENAI_BASE_URL); requests go to BaseURL + "/responses" (or the
	// path of Wire).
	BaseURL string
	// Wire is the route's wire format, WireResponses when empty: it picks
	// the path ("/responses", "/chat/completions", "/messages"), the
	// request body and the stream decoder.
	Wire WireAPI
	// Query is added to the request URL (Azure's api-version).
	Query url.Values
	// KeyHeader is where the key is sent: KeyAuthorization (as a bearer
	// token), KeyAPIKey or KeyXAPIKey; empty means the wire format's own
	// (x-api-key for Anthropic, Authorization otherwise).
	KeyHeader string
	// APIKey is the credential. It never appears in errors or logs.
	APIKey string
	// Credential, when set, is asked for the key before every request
	// instead of APIKey; an error or empty key is AuthUnavailable.
	Credential func(ctx context.Context) (string, error)
	// NoAuth allows requests without a credential. Loopback base URLs
	// (127.0.0.1, ::1, localhost) allow it implicitly.
	NoAuth bool
	// Client is the HTTP client; its Timeout is ignored (it would cut healthy
	// bodies) and redirects are never followed. Leave nil to use RoundTripper
	// or a default transport.
	Client *http.Client
	// RoundTripper is used when Client is nil (for example the scripted
	// server's in-process RoundTripper under testing/synctest).
	RoundTripper http.RoundTripper
	// MaxFrameBytes bounds one SSE line or event (DefaultMaxFrameBytes).
	MaxFrameBytes int64
	// MaxBodyBytes bounds the whole response body (DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// IdleTimeout bounds the gap between stream frames (DefaultIdleTimeout).
	IdleTimeout time.Duration
	// OpenTimeout bounds connecting, sending and awaiting headers
	// (DefaultOpenTimeout); a negative value disables it.
	OpenTimeout time.Duration
	// Headers are added to every request; they never set a credential
	// header (Authorization, api-key, x-api-key, …): the key has its own
	// source.
	Headers http.Header
	// Features are the endpoint side of Responses qualification. Only a
	// Responses route has any: on other wire formats they are ignored.
	Features ResponsesFeatures
	// Logger receives debug records (never credentials); nil discards.
	Logger *slog.Logger
}

// HTTP is the transport over HTTP server-sent events, for every wire
// format (HTTPConfig.Wire). It is safe for concurrent use; every Open
// sends exactly one POST.
type HTTP struct {
	cfg      HTTPConfig
	codec    codec
	url      string
	compact  string // the Responses route's …/responses/compact URL
	client   *http.Client
	logURL   string // url without userinfo, for logs
	reliable bool   // the RoundTripper fires httptrace hooks faithfully
	noAuth   bool
	log      *slog.Logger
}

var (
	_ Transport       = (*HTTP)(nil)
	_ FeatureReporter = (*HTTP)(nil)
	_ WireReporter    = (*HTTP)(nil)
	_ Stream          = (*httpStream)(nil)
)

// NewHTTP returns an HTTP transport for cfg, filling defaults.
func NewHTTP(cfg HTTPConfig) *HTTP {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.OpenTimeout == 0 {
		cfg.OpenTimeout = DefaultOpenTimeout
	}
	if cfg.Wire == "" {
		cfg.Wire = WireResponses
	}
	if cfg.Wire != WireResponses {
		cfg.Features = 0 // only a Responses endpoint grants Responses features
	}
	h := &HTTP{cfg: cfg, codec: codecFor(cfg.Wire), log: cfg.Logger}
	if h.cfg.KeyHeader == "" {
		h.cfg.KeyHeader = h.codec.keyHeader()
	}
	h.url = requestURL(cfg.BaseURL, h.codec.path(), cfg.Query)
	h.compact = requestURL(cfg.BaseURL, "/responses/compact", cfg.Query)
	h.logURL = RedactURL(h.url)
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	var c http.Client
	switch {
	case cfg.Client != nil:
		c = *cfg.Client
	case cfg.RoundTripper != nil:
		c.Transport = cfg.RoundTripper
	default:
		c.Transport = defaultHTTPTransport()
	}
	c.Timeout = 0
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	h.client = &c
	switch c.Transport.(type) {
	case nil, *http.Transport:
		h.reliable = true
	}
	h.noAuth = cfg.NoAuth || IsLoopbackURL(cfg.BaseURL)
	return h
}

// setHeaders adds the route's own headers, the configured headers
// (which may replace those, but never set a credential header) and the
// key, when there is one, where the route sends it.
func (h *HTTP) setHeaders(hr *http.Request, key string) {
	h.codec.header(hr.Header)
	for k, vs := range h.cfg.Headers {
		if IsCredentialHeader(k) {
			continue
		}
		hr.Header.Del(k)
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	if key != "" {
		setKey(hr.Header, h.cfg.KeyHeader, key)
	}
}

func defaultHTTPTransport() *http.Transport {
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
}

// IsLoopbackURL reports whether raw names a loopback host: localhost (in
// any case, with or without the root's dot) or a loopback address
// (127.0.0.0/8, ::1, and IPv4-mapped ::ffff:127.x).
func IsLoopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// EndpointFeatures returns the configured endpoint features (none on a
// route that is not the Responses API).
func (h *HTTP) EndpointFeatures() ResponsesFeatures { return h.cfg.Features }

// SendsCompactions reports whether the route sends native compactions
// (Request.Compact): the Responses route does.
func (h *HTTP) SendsCompactions() bool { return h.cfg.Wire == WireResponses }

// WireAPI returns the route's wire format.
func (h *HTTP) WireAPI() WireAPI { return h.cfg.Wire }

// requestURL is base with path appended to its path and query merged into
// its query.
func requestURL(base, path string, query url.Values) string {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil {
		return strings.TrimRight(base, "/") + path // refused when the request is built
	}
	u.Path = strings.TrimRight(u.Path, "/") + path
	if u.RawPath != "" {
		u.RawPath = strings.TrimRight(u.RawPath, "/") + path
	}
	if len(query) > 0 {
		q := u.Query()
		for k, vs := range query {
			q[k] = append(q[k], vs...)
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// URL returns the request URL with any userinfo password redacted.
func (h *HTTP) URL() string { return h.logURL }

// CloseIdleConnections closes pooled keep-alive connections.
func (h *HTTP) CloseIdleConnections() { h.client.CloseIdleConnections() }

// shownQuery are the query parameters whose values logs and errors show;
// any other value (a gateway may take its key as ?key=) is redacted.
var shownQuery = map[string]bool{"api-version": true}

// RedactURL hides a password in raw's userinfo and the values of query
// parameters other than shownQuery's.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparsable URL]"
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			if !shownQuery[k] {
				for i := range vs {
					vs[i] = "REDACTED"
				}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// errOpenTimeout, errIdle, errClosed and errCallerCanceled are context
// causes that tell the classifier why a request context ended.
var (
	errOpenTimeout    = errors.New("open timeout")
	errIdle           = errors.New("no stream event within the idle timeout")
	errClosed         = errors.New("stream closed")
	errCallerCanceled = errors.New("caller canceled")
	errBeforeSend     = errors.New("before-send hook failed")
	errBodyTooLarge   = errors.New("response body exceeds the size bound")
)

// credential returns the key to send, or an AuthUnavailable error.
func credential(ctx context.Context, key string, fn func(context.Context) (string, error), noAuth bool) (string, *Error) {
	if fn != nil {
		k, err := fn(ctx)
		if err != nil {
			return "", &Error{Phase: PreSend, Class: AuthUnavailable, Err: fmt.Errorf("credential: %w", err)}
		}
		key = k
	}
	if key == "" && !noAuth {
		return "", &Error{Phase: PreSend, Class: AuthUnavailable, Message: "no API key configured"}
	}
	return key, nil
}

// Open sends one POST and waits for the response headers. ctx bounds only
// the opening; the returned Stream's Next takes its own context.
func (h *HTTP) Open(ctx context.Context, req *Request) (Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, canceledError(PreSend, false, err)
	}
	key, aerr := credential(ctx, h.cfg.APIKey, h.cfg.Credential, h.noAuth)
	if aerr != nil {
		return nil, aerr
	}
	url, accept, body, err := h.encode(req)
	if err != nil {
		return nil, &Error{Phase: PreSend, Class: InvalidRequest, Err: err}
	}
	reqCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(errCallerCanceled) })
	var openTimer *time.Timer
	if h.cfg.OpenTimeout > 0 {
		openTimer = time.AfterFunc(h.cfg.OpenTimeout, func() { cancel(errOpenTimeout) })
	}
	var wrote atomic.Bool
	hook := beforeSendOf(ctx)
	trace := &httptrace.ClientTrace{
		WroteHeaders: func() { wrote.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	}
	if hook != nil && h.reliable {
		// GotConn runs on the calling goroutine after the connection is
		// made and before the request is written (HTTP/1 and HTTP/2).
		// Closing the connection is what keeps the request unwritten.
		trace.GotConn = func(info httptrace.GotConnInfo) {
			if hook.call() != nil {
				cancel(errBeforeSend)
				info.Conn.Close()
			}
		}
	}
	hr, err := http.NewRequestWithContext(httptrace.WithClientTrace(reqCtx, trace), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		stop()
		cancel(nil)
		return nil, &Error{Phase: PreSend, Class: InvalidRequest, Err: scrubErr(fmt.Errorf("build request: %w", err), key)}
	}
	h.setHeaders(hr, key)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", accept)
	h.log.Debug("provider http open", "url", h.logURL, "model", req.Model, "bytes", len(body))
	if hook != nil && !h.reliable {
		// A custom RoundTripper may never report GotConn: the hook runs
		// when it first reads the body, which it must to send the request
		// (and which one that fails before sending never does).
		hr.Body = &hookedBody{r: bytes.NewReader(body), hook: hook}
		hr.GetBody = func() (io.ReadCloser, error) { return &hookedBody{r: bytes.NewReader(body), hook: hook}, nil }
	}
	resp, err := h.client.Do(hr)
	if err == nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
		// Read the bounded error body while the opening bounds still run,
		// so a server that stalls mid error body cannot hang Open.
		e := statusError(resp, key)
		if openTimer != nil {
			openTimer.Stop()
		}
		stop()
		cancel(nil)
		return nil, e
	}
	if openTimer != nil {
		openTimer.Stop()
	}
	callerDone := !stop()
	if herr := hook.failed(); herr != nil {
		if err == nil {
			resp.Body.Close()
		}
		cancel(nil)
		return nil, beforeSendError(herr)
	}
	if err != nil {
		cause := context.Cause(reqCtx)
		cancel(nil)
		return nil, h.openError(ctx, cause, err, wrote.Load(), key)
	}
	if callerDone || reqCtx.Err() != nil {
		cause := context.Cause(reqCtx)
		resp.Body.Close()
		cancel(nil)
		if cause == errOpenTimeout {
			return nil, &Error{Phase: Opening, Class: ResponseHeaders, Dispatched: true, Err: errOpenTimeout}
		}
		return nil, canceledError(Opening, true, ctx.Err())
	}
	if e := h.notEventStream(resp); e != nil && !req.Compact {
		resp.Body.Close()
		cancel(nil)
		return nil, e
	}
	s := &httpStream{
		resp:      resp,
		reqCtx:    reqCtx,
		cancel:    cancel,
		idle:      h.cfg.IdleTimeout,
		maxBody:   h.cfg.MaxBodyBytes,
		requestID: requestID(resp.Header),
		rl:        ParseRateLimits(resp.Header),
		dec:       h.codec.newDecoder(),
	}
	s.body = &limitedBody{r: resp.Body, n: h.cfg.MaxBodyBytes}
	var frames io.Reader = s.body
	if req.Compact { // one JSON object: read as one event
		frames, s.dec = asOneEvent(s.body), &compactDecoder{}
	}
	s.sse = NewSSEReader(frames, int(min(h.cfg.MaxFrameBytes, int64(^uint(0)>>1))))
	s.idleTimer = time.AfterFunc(time.Hour, func() { cancel(errIdle) })
	s.idleTimer.Stop()
	return s, nil
}

// encode returns where req is posted, the response type it accepts and
// its body, or why this transport cannot send it.
func (h *HTTP) encode(req *Request) (url, accept string, body []byte, err error) {
	switch {
	case req.Warmup: // every route: a warm-up is a WebSocket frame
		return "", "", nil, ErrWarmupNotWebSocket
	case req.PreviousResponseID != "":
		return "", "", nil, ErrContinuationNotWebSocket
	case req.Compact && h.cfg.Wire != WireResponses:
		return "", "", nil, ErrCompactNotResponses
	case req.Compact:
		body, err = req.EncodeCompact()
		return h.compact, "application/json", body, err
	}
	body, err = h.codec.encode(req)
	return h.url, "text/event-stream", body, err
}

// openError classifies a failed round trip.
func (h *HTTP) openError(ctx context.Context, cause, err error, wrote bool, key string) *Error {
	err = scrubErr(err, key)
	dialFailed := isDialError(err)
	dispatched := wrote || (!h.reliable && !dialFailed)
	if ctx.Err() != nil && cause == errCallerCanceled {
		p := Opening
		if !dispatched {
			p = PreSend
		}
		return &Error{Phase: p, Class: Canceled, Dispatched: dispatched, Err: errors.Join(ctx.Err(), err)}
	}
	if cause == errOpenTimeout {
		if dispatched {
			return &Error{Phase: Opening, Class: ResponseHeaders, Dispatched: true, Err: fmt.Errorf("awaiting response headers: %w", errOpenTimeout)}
		}
		return &Error{Phase: Opening, Class: Connect, Err: fmt.Errorf("connect: %w", errOpenTimeout)}
	}
	switch {
	case !wrote && isNetUnreachable(err):
		return &Error{Phase: PreSend, Class: NetworkUnavailable, Err: err}
	case dialFailed && isRefused(err) && IsLoopbackURL(h.cfg.BaseURL):
		// Nothing listens on this machine's port: a local server that is
		// not running. Waiting cannot help, so this is said at once.
		return &Error{Phase: Opening, Class: Connect, LocalRefused: true, Err: err,
			Message: fmt.Sprintf("nothing is listening at %s: is the server running?", h.logURL)}
	case dialFailed || (!dispatched && isTLSError(err)):
		return &Error{Phase: Opening, Class: Connect, Err: err}
	case !dispatched:
		return &Error{Phase: Opening, Class: Connect, Err: err}
	}
	return &Error{Phase: Opening, Class: ResponseHeaders, Dispatched: true, Err: err}
}

// isDialError reports an error from establishing the connection (DNS,
// refused, unreachable, dial timeout): no request byte was written.
func isDialError(err error) bool {
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "dial" {
		return true
	}
	return false
}

// isNetUnreachable reports the OS saying there is no route.
func isNetUnreachable(err error) bool {
	if !isDialError(err) {
		return false
	}
	return errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETDOWN)
}

func isTLSError(err error) bool {
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	_, ok := errors.AsType[tls.AlertError](err)
	return ok
}

// scrubErr removes the key from an error's text, keeping it unwrappable
// only when the key does not occur.
func scrubErr(err error, key string) error {
	if err == nil || key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), key, "[REDACTED]"))
}

func scrub(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[REDACTED]")
}

// statusError reads a bounded error body and builds an HTTPStatus error.
func statusError(resp *http.Response, key string) *Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
	resp.Body.Close()
	e := &Error{Phase: Opening, Class: HTTPStatus, Dispatched: true, Status: resp.StatusCode,
		RequestID: requestID(resp.Header), RateLimits: ParseRateLimits(resp.Header)}
	e.RetryAfter, e.HasRetryAfter = RetryAfterFromHeader(resp.Header, nowFunc())
	parseErrorBody(e, b)
	e.Message = scrub(e.Message, key)
	return e
}

// requestID is the server's id of the request: x-request-id (OpenAI), or
// request-id (Anthropic).
func requestID(h http.Header) string {
	if id := h.Get("X-Request-Id"); id != "" {
		return id
	}
	return h.Get("Request-Id")
}

// notEventStream reports a 2xx answer whose Content-Type says it is not
// an event stream (an HTML page or a JSON document from a base URL that
// is not the route's API): a configuration error no retry can fix. A
// missing Content-Type is read as a stream.
func (h *HTTP) notEventStream(resp *http.Response) *Error {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && mt == "text/event-stream" {
		return nil
	}
	ct = strings.ToValidUTF8(ct, "?")
	if len(ct) > 100 {
		ct = ct[:100]
	}
	return &Error{Phase: Opening, Class: NotEventStream, Dispatched: true, Status: resp.StatusCode,
		RequestID: requestID(resp.Header), ContentType: ct,
		Message: fmt.Sprintf("%s answered with Content-Type %q, not an event stream: check base_url (it must name the API root, such as https://api.openai.com/v1)", h.logURL, ct)}
}

// parseErrorBody fills Type/Code/Message from {"error":{...}} or keeps a
// bounded text excerpt.
func parseErrorBody(e *Error, b []byte) {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message flexString      `json:"message"`
	}
	if err := json.Unmarshal(b, &body); err == nil && (len(body.Error) > 0 || body.Message != "") {
		var we wireError
		var msg flexString
		switch {
		case json.Unmarshal(body.Error, &we) == nil:
			e.Type, e.Code, e.Message = string(we.Type), string(we.Code), string(we.Message)
		case json.Unmarshal(body.Error, &msg) == nil: // {"error":"model not found"} (Ollama)
			e.Message = string(msg)
		}
		if e.Message == "" {
			e.Message = string(body.Message)
		}
		return
	}
	txt := strings.TrimSpace(string(b))
	if len(txt) > 512 {
		txt = txt[:512]
	}
	e.Message = strings.ToValidUTF8(txt, "\uFFFD")
	if !utf8.ValidString(e.Message) {
		e.Message = ""
	}
}

// strayError improves end, the error of a body that ended without any
// event, when the body held other text: a JSON error document (a
// gateway's answer under an event-stream Content-Type) is the provider's
// own refusal, which a retry of the same request would only repeat, so
// it is reported with its type, code and message as a protocol
// violation; other text is quoted in end's message.
func strayError(end *Error, stray []byte) *Error {
	e := &Error{Phase: Body, Class: ProtocolViolation, Dispatched: true}
	parseErrorBody(e, stray)
	if json.Valid(bytes.TrimSpace(stray)) && e.Message != "" {
		e.Message = "the stream held no event, only this error: " + e.Message
		return e
	}
	end.Message += "; the body held no event, only: " + e.Message
	return end
}

// limitedBody fails with errBodyTooLarge once more than n bytes arrive; a
// body of exactly n bytes ends normally.
type limitedBody struct {
	r io.Reader
	n int64
}

// Read reads at most one byte past the remaining bound, so a body that ends
// exactly at the bound reports its own end and a longer one fails.
func (l *limitedBody) Read(p []byte) (int, error) {
	if l.n < 0 {
		return 0, errBodyTooLarge
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > l.n {
		p = p[:l.n+1]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.n < 0 {
		return n, errBodyTooLarge
	}
	return n, err
}

// httpStream consumes one SSE response body.
type httpStream struct {
	resp    *http.Response
	body    *limitedBody
	sse     *SSEReader
	reqCtx  context.Context
	cancel  context.CancelCauseFunc
	idle    time.Duration
	maxBody int64

	idleTimer *time.Timer
	watched   context.Context
	mu        sync.Mutex // guards unwatch against a concurrent Close
	unwatch   func() bool

	dec       frameDecoder
	queue     []Event // events of the last frame, returned from qi on
	qi        int
	final     bool // the queue ends with the terminal event
	err       error
	finished  atomic.Bool // set by Next; read by a concurrent Close
	requestID string
	rl        RateLimits
	closeOnce sync.Once
}

// RequestID returns the x-request-id response header.
func (s *httpStream) RequestID() string { return s.requestID }

// RateLimits returns the parsed rate-limit headers.
func (s *httpStream) RateLimits() RateLimits { return s.rl }

// watch makes ctx's cancellation abort the body read. It registers once per
// distinct context so a loop over Next with one context does not allocate.
func (s *httpStream) watch(ctx context.Context) {
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
		s.unwatch = context.AfterFunc(ctx, func() { s.cancel(errCallerCanceled) })
	}
}

// Next returns the next event; see [Stream].
func (s *httpStream) Next(ctx context.Context) (Event, error) {
	if s.qi < len(s.queue) {
		return s.pop(), nil
	}
	if s.err != nil {
		return Event{}, s.err
	}
	if s.finished.Load() {
		return Event{}, io.EOF
	}
	if err := ctx.Err(); err != nil {
		return Event{}, s.fail(canceledError(Body, true, err))
	}
	s.watch(ctx)
	for {
		s.idleTimer.Reset(s.idle)
		frame, err := s.sse.Next()
		s.idleTimer.Stop()
		var (
			final bool
			derr  *Error
		)
		switch {
		case err == io.EOF && context.Cause(s.reqCtx) == nil:
			s.queue, derr = s.dec.end(s.queue[:0])
			final = derr == nil
			if stray := s.sse.Stray(); stray != nil && derr != nil {
				derr = strayError(derr, stray)
			}
		case err != nil:
			return Event{}, s.fail(s.bodyError(ctx, err))
		default:
			s.queue, final, derr = s.dec.frame(&frame, s.queue[:0])
		}
		if derr != nil {
			return Event{}, s.fail(derr)
		}
		s.qi = 0
		s.final = final
		if len(s.queue) > 0 {
			return s.pop(), nil
		}
		if final { // a terminal frame always carries its event
			return Event{}, s.fail(violation("terminal frame without an event"))
		}
	}
}

// pop returns the next queued event; returning the terminal one finishes
// the stream.
func (s *httpStream) pop() Event {
	ev := s.queue[s.qi]
	s.queue[s.qi] = Event{}
	s.qi++
	if s.qi == len(s.queue) && s.final {
		s.finished.Store(true)
		s.release()
	}
	return ev
}

// bodyError classifies a body read failure.
func (s *httpStream) bodyError(ctx context.Context, err error) *Error {
	cause := context.Cause(s.reqCtx)
	switch {
	case cause == errIdle:
		return &Error{Phase: Body, Class: IdleTimeout, Dispatched: true, Err: errIdle}
	case cause == errCallerCanceled || cause == errClosed:
		c := ctx.Err()
		if c == nil {
			c = context.Canceled
		}
		return canceledError(Body, true, c)
	case errors.Is(err, errFrameTooLarge):
		return &Error{Phase: Body, Class: LimitExceeded, Dispatched: true, Err: fmt.Errorf("%w (MaxFrameBytes %d)", err, s.sse.maxFrame)}
	case errors.Is(err, errBodyTooLarge):
		return &Error{Phase: Body, Class: LimitExceeded, Dispatched: true, Err: fmt.Errorf("%w (MaxBodyBytes %d)", err, s.maxBody)}
	case err == io.EOF:
		return &Error{Phase: Body, Class: TerminalEOF, Dispatched: true, Message: "stream ended without response.completed"}
	}
	return &Error{Phase: Body, Class: BodyInterrupted, Dispatched: true, Err: err}
}

func (s *httpStream) fail(e *Error) error {
	if e.RequestID == "" {
		e.RequestID = s.requestID
	}
	s.err = e
	s.release()
	return e
}

// drainLimit and drainTimeout bound reading the rest of a completed body so
// its keep-alive connection can be reused.
const (
	drainLimit   = 64 << 10
	drainTimeout = time.Second
)

// release closes the body. After response.completed the tail (normally
// just the end of the chunked body) is drained in the background, bounded
// in bytes and time, so the connection returns to the pool; otherwise the
// request is aborted.
func (s *httpStream) release() {
	s.closeOnce.Do(func() {
		s.idleTimer.Stop()
		s.mu.Lock()
		if s.unwatch != nil {
			s.unwatch()
		}
		s.mu.Unlock()
		if !s.finished.Load() {
			s.cancel(errClosed)
			s.resp.Body.Close()
			return
		}
		go func() {
			t := time.AfterFunc(drainTimeout, func() { s.cancel(errClosed) })
			io.Copy(io.Discard, io.LimitReader(s.resp.Body, drainLimit))
			t.Stop()
			s.resp.Body.Close()
			s.cancel(errClosed)
		}()
	})
}

// Close releases the stream; it is safe to call more than once and from
// another goroutine than Next's.
func (s *httpStream) Close() error {
	s.release()
	return nil
}
