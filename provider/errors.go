package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Phase says how far a request got before it failed.
type Phase int

// Phases of one request.
const (
	// PreSend: nothing was written for this request (credential missing,
	// encoding failure, network positively unavailable).
	PreSend Phase = iota + 1
	// Opening: connecting, writing the request, awaiting response headers
	// (HTTP) or writing the response.create frame (WebSocket).
	Opening
	// Body: consuming the response stream.
	Body
)

// String returns "pre-send", "opening" or "body".
func (p Phase) String() string {
	switch p {
	case PreSend:
		return "pre-send"
	case Opening:
		return "opening"
	case Body:
		return "body"
	}
	return "unknown-phase"
}

// Class is what the agent's recovery policy branches on.
type Class int

// Failure classes.
const (
	// NetworkUnavailable: the OS reported no route (ENETUNREACH,
	// EHOSTUNREACH, ENETDOWN) while connecting, before any byte was sent.
	NetworkUnavailable Class = iota + 1
	// AuthUnavailable: no credential is configured; nothing was sent.
	AuthUnavailable
	// Connect: DNS, TLS, refused or timed-out connection (never "network
	// unavailable").
	Connect
	// ResponseHeaders: the request was (possibly) written but the response
	// headers never arrived (timeout, reset, EOF).
	ResponseHeaders
	// HTTPStatus: the server answered with a non-2xx status (or, over
	// WebSocket, an error frame carrying a status).
	HTTPStatus
	// StreamFailure: a provider frame could not be decoded; Decode says how.
	StreamFailure
	// BodyInterrupted: the body ended abruptly (reset, unexpected EOF).
	BodyInterrupted
	// TerminalEOF: the body ended cleanly without response.completed.
	TerminalEOF
	// ResponsesFailed: the server reported response.failed or an error
	// event; Code and Message say why.
	ResponsesFailed
	// ResponsesIncomplete: the server reported response.incomplete;
	// IncompleteReason says why.
	ResponsesIncomplete
	// IdleTimeout: no event arrived within the idle timeout.
	IdleTimeout
	// FallbackToHTTP: the WebSocket handshake was refused with 426; use HTTP.
	FallbackToHTTP
	// Canceled: the caller's context ended the call; not a provider fault.
	Canceled
	// InvalidRequest: the request could not be encoded or the transport is
	// busy with another stream; nothing was sent.
	InvalidRequest
	// LimitExceeded: a frame or the body exceeded the configured bound.
	LimitExceeded
	// ProtocolViolation: a well-formed frame broke the event protocol (for
	// example response.completed without a response object).
	ProtocolViolation
	// NotEventStream: the server answered 2xx with a body that is not an
	// event stream (ContentType says what it is): the base URL names
	// something other than the route's API. A configuration error.
	NotEventStream
)

var classNames = [...]string{
	NetworkUnavailable:  "network unavailable",
	AuthUnavailable:     "auth unavailable",
	Connect:             "connect",
	ResponseHeaders:     "response headers",
	HTTPStatus:          "http status",
	StreamFailure:       "stream failure",
	BodyInterrupted:     "body interrupted",
	TerminalEOF:         "terminal eof",
	ResponsesFailed:     "responses failed",
	ResponsesIncomplete: "responses incomplete",
	IdleTimeout:         "idle timeout",
	FallbackToHTTP:      "fallback to http",
	Canceled:            "canceled",
	InvalidRequest:      "invalid request",
	LimitExceeded:       "limit exceeded",
	ProtocolViolation:   "protocol violation",
	NotEventStream:      "not an event stream",
}

// String returns a short lower-case name such as "body interrupted".
func (c Class) String() string {
	if c > 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown-class"
}

// DecodeKind says which codec step failed for a StreamFailure.
type DecodeKind int

// Decode kinds.
const (
	DecodeNone DecodeKind = iota
	// DecodeJSON: a frame's payload is not valid JSON for its event.
	DecodeJSON
	// DecodeInvalidUTF8: a frame's payload is not valid UTF-8.
	DecodeInvalidUTF8
)

// String returns "json", "invalid-utf8" or "none".
func (d DecodeKind) String() string {
	switch d {
	case DecodeJSON:
		return "json"
	case DecodeInvalidUTF8:
		return "invalid-utf8"
	}
	return "none"
}

// Error is every failure the transports report. Its fields are wire facts;
// the policy that acts on them lives in the agent.
type Error struct {
	Phase Phase
	Class Class
	// Dispatched is true when request bytes may have reached the server, so
	// the request may have been accepted and usage is unknown. It is false
	// only when the transport knows no request byte was written.
	Dispatched bool
	// Status is the HTTP status (HTTPStatus, or a WebSocket error frame's).
	Status int
	// Handshake marks a status that answered a WebSocket handshake: the
	// request (response.create, written once the socket is open) was not
	// sent, whatever the status says.
	Handshake bool
	// Type, Code and Message come from the provider's error object.
	Type, Code, Message string
	// RetryAfter is the server's Retry-After (header, seconds or HTTP-date),
	// valid when HasRetryAfter. A "try again in" hint inside Message is not
	// folded in; see [ParseRetryHint].
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Decode says which codec step failed for StreamFailure.
	Decode DecodeKind
	// IncompleteReason is set for ResponsesIncomplete.
	IncompleteReason string
	// Response is the terminal response object of ResponsesFailed and
	// ResponsesIncomplete, when the server sent one (partial output, usage).
	Response *Response
	// RequestID is the server's request id, if known.
	RequestID string
	// RateLimits are the rate-limit headers that came with the failure.
	RateLimits RateLimits
	// LocalRefused is set on a Connect error when the endpoint is on
	// this machine (a loopback address) and refused the connection:
	// nothing listens there, which waiting does not change.
	LocalRefused bool
	// ContentType is the Content-Type of a NotEventStream answer.
	ContentType string
	// Err is the underlying cause, if any.
	Err error
}

// Error describes the failure. It never contains a credential.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("provider ")
	b.WriteString(e.Phase.String())
	b.WriteString(": ")
	b.WriteString(e.Class.String())
	if e.Status != 0 {
		fmt.Fprintf(&b, " %d", e.Status)
	}
	if e.Decode != DecodeNone {
		b.WriteString(" (decode ")
		b.WriteString(e.Decode.String())
		b.WriteString(")")
	}
	if e.Code != "" {
		b.WriteString(" code=")
		b.WriteString(e.Code)
	} else if e.Type != "" {
		b.WriteString(" type=")
		b.WriteString(e.Type)
	}
	if e.IncompleteReason != "" {
		b.WriteString(" reason=")
		b.WriteString(e.IncompleteReason)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Dispatched {
		b.WriteString(" [dispatched]")
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Permanent reports whether the error carries a permanent provider code
// ([IsPermanentCode]) in Code or Type.
func (e *Error) Permanent() bool {
	return IsPermanentCode(e.Code) || IsPermanentCode(e.Type)
}

// permanentCodes are provider codes that no retry can fix. They outrank
// retry- or context-sounding messages. The table holds the codes
// and spells out what its "policy" and "auth" groups mean:
//
//   - policy: cyber_policy, bio_policy, misalignment_policy_violation, and the
//     generic content_policy_violation / policy_violation;
//   - auth: invalid_api_key, invalid_authentication, authentication_error,
//     permission_denied, account_deactivated and
//     unsupported_country_region_territory (a credential or account the
//     server refuses; a missing credential is [AuthUnavailable] instead);
//   - quota: insufficient_quota, usage_not_included, billing_hard_limit_reached,
//     billing_not_active;
//   - request: invalid_prompt, context_length_exceeded;
//   - capacity denials: server_is_overloaded, slow_down.
var permanentCodes = map[string]bool{
	// policy
	"cyber_policy":                  true,
	"bio_policy":                    true,
	"misalignment_policy_violation": true,
	"content_policy_violation":      true,
	"policy_violation":              true,
	// auth
	"invalid_api_key":                      true,
	"invalid_authentication":               true,
	"authentication_error":                 true,
	"permission_denied":                    true,
	"account_deactivated":                  true,
	"unsupported_country_region_territory": true,
	// quota
	"insufficient_quota":         true,
	"usage_not_included":         true,
	"billing_hard_limit_reached": true,
	"billing_not_active":         true,
	// request
	"invalid_prompt":          true,
	"context_length_exceeded": true,
	// capacity denials
	"server_is_overloaded": true,
	"slow_down":            true,
}

// IsPermanentCode reports whether a provider error code (or type) is
// permanent: policy, auth, quota (insufficient_quota, usage_not_included),
// invalid_prompt, context_length_exceeded, server_is_overloaded, slow_down,
// cyber_policy, bio_policy and misalignment_policy_violation among them.
// Matching ignores ASCII case and surrounding space.
func IsPermanentCode(code string) bool {
	code = strings.TrimSpace(code)
	return code != "" && permanentCodes[strings.ToLower(code)]
}

// IsRequestCode reports whether a provider code blames the request itself
// (invalid_image, unsupported_parameter, image_too_large, …): sending the
// same body again can only repeat it.
func IsRequestCode(code string) bool {
	return strings.HasPrefix(code, "invalid_") || strings.HasPrefix(code, "unsupported_") ||
		strings.HasSuffix(code, "_too_large") || strings.HasSuffix(code, "_not_found")
}

// maxRetryHint bounds a "try again in" hint, like Retry-After.
const maxRetryHint = maxRetryAfter

// ParseRetryHint finds a "try again in …" hint in a provider message and
// returns its delay: Go-style durations as OpenAI writes them ("1.898s",
// "250ms", "20ms", "1m30s", "6m0s") and a number followed by a unit word
// ("3 seconds", "1 second", "2 minutes", "12.5 milliseconds", "1 hour").
// Hints beyond a day are clamped to a day.
func ParseRetryHint(message string) (time.Duration, bool) {
	lower := strings.ToLower(message)
	const key = "try again in"
	i := strings.Index(lower, key)
	if i < 0 {
		return 0, false
	}
	rest := strings.TrimLeft(lower[i+len(key):], " \t")
	d, ok := compactDuration(rest)
	if !ok {
		d, ok = wordDuration(rest)
	}
	if !ok || d < 0 {
		return 0, false
	}
	return min(d, maxRetryHint), true
}

// compactDuration parses a leading Go-style duration token ("1.5s",
// "1m30s") that ends at a space, a sentence mark or the end of s.
func compactDuration(s string) (time.Duration, bool) {
	n := 0
	for n < len(s) && (s[n] >= '0' && s[n] <= '9' || s[n] == '.' || s[n] >= 'a' && s[n] <= 'z') {
		n++
	}
	tok := strings.TrimRight(s[:n], ".")
	if tok == "" || tok[0] < '0' || tok[0] > '9' {
		return 0, false
	}
	d, err := time.ParseDuration(tok)
	return d, err == nil
}

// hintUnits maps the unit words of a spelled-out hint to their scale.
var hintUnits = map[string]time.Duration{
	"ms": time.Millisecond, "msec": time.Millisecond, "msecs": time.Millisecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
}

// wordDuration parses "<decimal> <unit word>" at the start of s.
func wordDuration(s string) (time.Duration, bool) {
	n := decimalPrefix(s)
	if n == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(s[:n], 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	rest := strings.TrimLeft(s[n:], " \t")
	w := 0
	for w < len(rest) && rest[w] >= 'a' && rest[w] <= 'z' {
		w++
	}
	scale, ok := hintUnits[rest[:w]]
	if !ok {
		return 0, false
	}
	return scaleDuration(v, scale)
}

// decimalPrefix returns the length of the leading "digits[.digits]" of s.
func decimalPrefix(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n == 0 {
		return 0
	}
	if n+1 < len(s) && s[n] == '.' && s[n+1] >= '0' && s[n+1] <= '9' {
		n++
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
	}
	return n
}

// scaleDuration multiplies v by scale, clamping to a day so huge values
// never overflow into a negative duration.
func scaleDuration(v float64, scale time.Duration) (time.Duration, bool) {
	if v < 0 || v != v {
		return 0, false
	}
	if v*float64(scale) >= float64(maxRetryAfter) {
		return maxRetryAfter, true
	}
	return time.Duration(v * float64(scale)), true
}

// canceledError reports a context cancellation in phase p.
func canceledError(p Phase, dispatched bool, cause error) *Error {
	if cause == nil {
		cause = context.Canceled
	}
	return &Error{Phase: p, Class: Canceled, Dispatched: dispatched, Err: cause}
}

// IsCanceled reports whether err is a cancellation rather than a fault.
func IsCanceled(err error) bool {
	if pe, ok := errors.AsType[*Error](err); ok {
		return pe.Class == Canceled
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
