package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/octet-agent/octet/provider"
)

// failureClass is the recovery policy's verdict on one provider failure:
// which budget, if any, may pay for replacing the failed request.
type failureClass int

const (
	// classFatal failures are never replaced: local request errors,
	// definite refusals, unknown error types.
	classFatal failureClass = iota
	// classCanceled is the run's own cancellation; it always wins.
	classCanceled
	// classPermanent is an explicit permanent provider code.
	classPermanent
	// classStream failures spend the stream-replacement allowance.
	classStream
	// classAdmission failures spend the opening/admission allowance.
	classAdmission
	// classNetworkWait is a positively classified pre-send outage that
	// waits without spending the inference budget.
	classNetworkWait
	// classFallback is a WebSocket handshake that asked for HTTP.
	classFallback
)

// classified is what the policy learns from one failure.
type classified struct {
	class        failureClass
	reason       string
	code         string
	message      string
	usageUnknown bool
	// hint is a Codex-style "try again in …" delay from the message.
	hint time.Duration
	// retryAfter is a valid provider Retry-After, never shortened.
	retryAfter    time.Duration
	hasRetryAfter bool
	// cut is true when a context deadline (the outage bound) ended the
	// attempt rather than the provider or the network.
	cut bool
}

// transientFailedCodes are response.failed / error-frame codes that name a
// transient server condition; they and unknown codes spend the stream
// allowance. Permanent codes are vetoed before this table is consulted.
var transientFailedCodes = map[string]bool{
	"server_error":        true,
	"internal_error":      true,
	"internal":            true,
	"unavailable":         true,
	"service_unavailable": true,
	"rate_limit_exceeded": true,
}

// knownIncompleteReasons are response.incomplete reasons with a definite,
// non-transient meaning; replaying the request would only repeat them.
var knownIncompleteReasons = map[string]bool{
	"max_output_tokens": true,
	"content_filter":    true,
}

// classify maps a failure onto the recovery classes. It is pure: the same
// failure always yields the same class, whatever the budgets say.
func classify(f Failure) classified {
	c := classified{class: classFatal, reason: "not_retryable"}
	var pe *provider.Error
	if !errors.As(f.Err, &pe) {
		switch {
		case errors.Is(f.Err, context.DeadlineExceeded):
			c.reason, c.cut = "deadline_exceeded", true
			c.usageUnknown = f.Dispatched
		case errors.Is(f.Err, context.Canceled):
			c.class, c.reason = classCanceled, "canceled"
		default:
			c.reason = "local_error"
			c.usageUnknown = f.Dispatched
		}
		return c
	}
	c.code, c.message = pe.Code, pe.Message
	c.usageUnknown = usageUnknown(f, pe)
	if pe.HasRetryAfter && pe.RetryAfter > 0 {
		c.retryAfter, c.hasRetryAfter = pe.RetryAfter, true
	}
	if h, ok := provider.ParseRetryHint(pe.Message); ok && h > 0 {
		c.hint = h
	}
	if pe.Class == provider.Canceled {
		// The loop handles the run's own cancellation before asking the
		// policy; a deadline here is a derived bound (the outage deadline)
		// and Decide judges it.
		if errors.Is(pe, context.DeadlineExceeded) {
			c.reason, c.cut = "deadline_exceeded", true
			return c
		}
		c.class, c.reason = classCanceled, "canceled"
		return c
	}
	if pe.Permanent() {
		if !provider.IsPermanentCode(c.code) {
			c.code = pe.Type
		}
		c.class, c.reason = classPermanent, "permanent:"+c.code
		return c
	}
	c.class, c.reason = classifyProviderError(pe)
	return c
}

// classifyProviderError handles a provider failure whose code is not
// permanent.
func classifyProviderError(pe *provider.Error) (failureClass, string) {
	switch pe.Class {
	case provider.NetworkUnavailable:
		if pe.Phase == provider.PreSend && !pe.Dispatched {
			return classNetworkWait, "network_unavailable"
		}
		// Not positively pre-send: only the finite opening allowance.
		return classAdmission, "network_unavailable_after_send"
	case provider.AuthUnavailable:
		if pe.Phase == provider.PreSend && !pe.Dispatched {
			return classNetworkWait, "auth_unavailable"
		}
		return classFatal, "auth_unavailable_after_send"
	case provider.Connect:
		if pe.LocalRefused {
			// Nothing listens on this machine's port: a local server
			// that is not running. Waiting cannot help.
			return classFatal, "connection_refused_local"
		}
		return classAdmission, "connect"
	case provider.NotEventStream:
		// The base URL names something other than the route's API: a
		// configuration error no retry can fix.
		return classFatal, "not_event_stream"
	case provider.ResponseHeaders:
		return classAdmission, "response_headers"
	case provider.HTTPStatus:
		return classifyStatus(pe)
	case provider.StreamFailure:
		switch pe.Decode {
		case provider.DecodeJSON:
			return classStream, "stream_decode_json"
		case provider.DecodeInvalidUTF8:
			return classStream, "stream_decode_utf8"
		}
		return classFatal, "stream_failure"
	case provider.BodyInterrupted:
		return classStream, "body_interrupted"
	case provider.TerminalEOF:
		return classStream, "terminal_eof"
	case provider.IdleTimeout:
		if pe.Phase == provider.Body {
			return classStream, "idle_timeout"
		}
		return classAdmission, "response_headers_timeout"
	case provider.ResponsesFailed:
		if transientFailedCodes[pe.Code] || !provider.IsRequestCode(pe.Code) {
			// Transient and unknown terminal reasons, before assistant
			// persistence, spend the stream allowance.
			return classStream, failedReason("response_failed", pe.Code)
		}
		return classFatal, failedReason("response_failed", pe.Code)
	case provider.ResponsesIncomplete:
		if knownIncompleteReasons[pe.IncompleteReason] {
			return classFatal, failedReason("response_incomplete", pe.IncompleteReason)
		}
		return classStream, failedReason("response_incomplete", pe.IncompleteReason)
	case provider.FallbackToHTTP:
		return classFallback, "websocket_fallback"
	}
	return classFatal, "provider_error"
}

// classifyStatus handles an HTTP status failure (or a WebSocket error frame
// carrying one).
func classifyStatus(pe *provider.Error) (failureClass, string) {
	reason := fmt.Sprintf("http_%d", pe.Status)
	switch {
	case pe.Status == http.StatusRequestTimeout:
		return classStream, reason
	case pe.Status >= 500 && pe.Status <= 599:
		return classAdmission, reason
	case pe.Code == "rate_limit_exceeded" && pe.Phase == provider.Body:
		// A rate limit reported after generation started (an error frame
		// in the body) is the post-generation case Codex retries.
		return classStream, reason + ":rate_limit_exceeded"
	}
	return classFatal, reason
}

func failedReason(prefix, detail string) string {
	if detail == "" {
		return prefix + ":unknown"
	}
	return prefix + ":" + detail
}

// usageUnknown reports whether a failure may hide accepted, billable work:
// any failure after the request may have reached the provider, except a
// definite refusal status. HTTP 5xx and 408 carry unknown usage, even
// without a dispatch flag — a gateway failure can hide accepted upstream
// work — unless they answered a WebSocket handshake, which comes before
// the request (response.create) is written.
func usageUnknown(f Failure, pe *provider.Error) bool {
	if pe.Class == provider.NotEventStream {
		// A web page is not billed; a JSON document could be a completion
		// the server did not stream.
		return strings.Contains(pe.ContentType, "json")
	}
	if pe.Class == provider.HTTPStatus {
		if pe.Handshake && !f.Dispatched {
			return false // nothing was sent
		}
		return pe.Status >= 500 || pe.Status == http.StatusRequestTimeout || pe.Phase == provider.Body
	}
	if pe.Phase == provider.Body {
		return true
	}
	return f.Dispatched || pe.Dispatched
}
