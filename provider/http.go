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
	// (OPENAI_BASE_URL); requests go to BaseURL + "/responses".
	BaseURL string
	// APIKey is the bearer credential. It never appears in errors or logs.
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
	// Headers are added to every request (never Authorization).
	Headers http.Header
	// Features are the endpoint side of Responses qualification.
	Features ResponsesFeatures
	// Logger receives debug records (never credentials); nil discards.
	Logger *slog.Logger
}

// HTTP is the Responses transport over HTTP server-sent events. It is safe
// for concurrent use; every Open sends exactly one POST.
type HTTP struct {
	cfg      HTTPConfig
	url      string
	client   *http.Client
	logURL   string // url without userinfo, for logs
	reliable bool   // the RoundTripper fires httptrace hooks faithfully
	noAuth   bool
	log      *slog.Logger
}

var (
	_ Transport       = (*HTTP)(nil)
	_ FeatureReporter = (*HTTP)(nil)
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
	h := &HTTP{cfg: cfg, url: strings.TrimRight(cfg.BaseURL, "/") + "/responses", log: cfg.Logger}
	h.logURL = redactURL(h.url)
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
	h.noAuth = cfg.NoAuth || isLoopbackURL(cfg.BaseURL)
	return h
}

// setHeaders adds the configured headers (never Authorization) and the
// bearer key, when there is one, to hr.
func (h *HTTP) setHeaders(hr *http.Request, key string) {
	for k, vs := range h.cfg.Headers {
		if http.CanonicalHeaderKey(k) == "Authorization" {
			continue
		}
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	if key != "" {
		hr.Header.Set("Authorization", "Bearer "+key)
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

// isLoopbackURL reports whether raw names a loopback host.
func isLoopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// EndpointFeatures returns the configured endpoint features.
func (h *HTTP) EndpointFeatures() ResponsesFeatures { return h.cfg.Features }

// URL returns the request URL with any userinfo password redacted.
func (h *HTTP) URL() string { return h.logURL }

// CloseIdleConnections closes pooled keep-alive connections.
func (h *HTTP) CloseIdleConnections() { h.client.CloseIdleConnections() }

// redactURL hides a password in raw's userinfo.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparsable URL]"
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
	body, err := req.EncodeHTTP()
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
	hr, err := http.NewRequestWithContext(httptrace.WithClientTrace(reqCtx, trace), http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		stop()
		cancel(nil)
		return nil, &Error{Phase: PreSend, Class: InvalidRequest, Err: scrubErr(fmt.Errorf("build request: %w", err), key)}
	}
	h.setHeaders(hr, key)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
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
	s := &httpStream{
		resp:      resp,
		reqCtx:    reqCtx,
		cancel:    cancel,
		idle:      h.cfg.IdleTimeout,
		maxBody:   h.cfg.MaxBodyBytes,
		requestID: resp.Header.Get("X-Request-Id"),
		rl:        ParseRateLimits(resp.Header),
	}
	s.body = &limitedBody{r: resp.Body, n: h.cfg.MaxBodyBytes}
	s.sse = NewSSEReader(s.body, int(min(h.cfg.MaxFrameBytes, int64(^uint(0)>>1))))
	s.idleTimer = time.AfterFunc(time.Hour, func() { cancel(errIdle) })
	s.idleTimer.Stop()
	return s, nil
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
		RequestID: resp.Header.Get("X-Request-Id"), RateLimits: ParseRateLimits(resp.Header)}
	e.RetryAfter, e.HasRetryAfter = RetryAfterFromHeader(resp.Header, nowFunc())
	parseErrorBody(e, b)
	e.Message = scrub(e.Message, key)
	return e
}

// parseErrorBody fills Type/Code/Message from {"error":{...}} or keeps a
// bounded text excerpt.
func parseErrorBody(e *Error, b []byte) {
	var body struct {
		Error   *wireError `json:"error"`
		Message flexString `json:"message"`
	}
	if err := json.Unmarshal(b, &body); err == nil && (body.Error != nil || body.Message != "") {
		if body.Error != nil {
			e.Type, e.Code, e.Message = string(body.Error.Type), string(body.Error.Code), string(body.Error.Message)
		} else {
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

	dec       decoder
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
		if err != nil {
			return Event{}, s.fail(s.bodyError(ctx, err))
		}
		if len(frame.Data) == 6 && string(frame.Data) == "[DONE]" {
			return Event{}, s.fail(&Error{Phase: Body, Class: TerminalEOF, Dispatched: true, Message: "[DONE] before response.completed"})
		}
		ev, st, derr := s.dec.decode(frame.Data)
		if derr != nil {
			return Event{}, s.fail(derr)
		}
		if !st.emit {
			continue
		}
		if st.final {
			s.finished.Store(true)
			s.release()
		}
		return ev, nil
	}
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
