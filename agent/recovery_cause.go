package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/octet-agent/octet/provider"
)

// maxCauseBytes bounds a failure description.
const maxCauseBytes = 200

// describeFailure names a failed provider attempt as it is, for people:
// "cannot connect to the provider: connection refused", "the provider
// answered HTTP 503: …", "the response stream ended before it completed".
// It is what provider_retry.cause carries. It never contains a credential
// (provider errors are scrubbed) and is bounded.
func describeFailure(err error) string {
	pe, ok := errors.AsType[*provider.Error](err)
	if !ok {
		if err == nil {
			return "unknown failure"
		}
		return bound(err.Error())
	}
	var s string
	switch pe.Class {
	case provider.NetworkUnavailable:
		s = "the network is unavailable: " + netCause(pe.Err)
	case provider.AuthUnavailable:
		s = "the provider credential is unavailable" + detail(pe.Message, pe.Err)
	case provider.Connect:
		s = "cannot connect to the provider: " + netCause(pe.Err)
		if pe.LocalRefused {
			s += "; " + pe.Message
		}
	case provider.NotEventStream:
		s = pe.Message
	case provider.ResponseHeaders:
		s = "the provider did not answer the request: " + netCause(pe.Err)
	case provider.HTTPStatus:
		s = fmt.Sprintf("the provider answered HTTP %d", pe.Status) + detail(pe.Message, nil)
	case provider.StreamFailure:
		s = "the response stream carried a malformed frame (" + pe.Decode.String() + ")"
	case provider.BodyInterrupted:
		s = "the response stream was interrupted: " + netCause(pe.Err)
	case provider.TerminalEOF:
		s = "the response stream ended before the response completed"
	case provider.IdleTimeout:
		s = "the provider sent nothing within the idle timeout"
	case provider.ResponsesFailed:
		s = "the provider failed the response" + code(pe.Code) + detail(pe.Message, nil)
	case provider.ResponsesIncomplete:
		s = "the response ended incomplete" + code(pe.IncompleteReason)
	case provider.FallbackToHTTP:
		s = "the provider refused the WebSocket; switching to HTTP"
	default:
		s = pe.Error()
	}
	return bound(s)
}

// netCause is the operating system's word for a network failure
// ("connection refused", "no such host", "timed out"), without addresses.
func netCause(err error) string {
	if err == nil {
		return "no detail"
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		if dns.IsNotFound {
			return "the host name does not resolve"
		}
		return "name resolution failed: " + dns.Err
	}
	if errno, ok := errors.AsType[syscall.Errno](err); ok {
		return errno.Error()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the connection was closed"
	}
	if errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err) || strings.Contains(err.Error(), "timeout") {
		return "timed out"
	}
	if sc, ok := errors.AsType[*os.SyscallError](err); ok {
		return sc.Err.Error()
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

func code(c string) string {
	if c == "" {
		return " (no reason given)"
	}
	return " (" + c + ")"
}

func detail(msg string, err error) string {
	switch {
	case msg != "":
		return ": " + msg
	case err != nil:
		return ": " + err.Error()
	}
	return ""
}

// bound keeps s to maxCauseBytes on a rune boundary, on one line.
func bound(s string) string { return clipText(strings.Join(strings.Fields(s), " "), maxCauseBytes) }

// MaxToolErrorEventBytes bounds a failed call's result in its
// tool_finished event (the whole result is in the session).
const MaxToolErrorEventBytes = 1 << 10

// clipText keeps s to n bytes on a rune boundary, marking a cut with "…".
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
