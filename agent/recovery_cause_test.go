package agent

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/octet-agent/octet/provider"
)

// TestDescribeFailureNamesTheFailure: provider_retry.cause says what
// failed in words, not as a stream interruption, without addresses.
func TestDescribeFailureNamesTheFailure(t *testing.T) {
	dial := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 443}, Err: os.NewSyscallError("connect", errno)}
	}
	tests := []struct {
		err  error
		want string
	}{
		{&provider.Error{Phase: provider.Opening, Class: provider.Connect, Err: dial(syscall.ECONNREFUSED)}, "cannot connect to the provider: connection refused"},
		{&provider.Error{Phase: provider.Opening, Class: provider.Connect, Err: &net.DNSError{Err: "no such host", Name: "api.example", IsNotFound: true}}, "cannot connect to the provider: the host name does not resolve"},
		{&provider.Error{Phase: provider.PreSend, Class: provider.NetworkUnavailable, Err: dial(syscall.ENETUNREACH)}, "the network is unavailable: network is unreachable"},
		{&provider.Error{Phase: provider.PreSend, Class: provider.AuthUnavailable, Message: "no API key configured"}, "the provider credential is unavailable: no API key configured"},
		{&provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 520, Message: "unknown error"}, "the provider answered HTTP 520: unknown error"},
		{&provider.Error{Phase: provider.Body, Class: provider.TerminalEOF, Dispatched: true}, "the response stream ended before the response completed"},
		{&provider.Error{Phase: provider.Body, Class: provider.ResponsesFailed, Code: "mystery"}, "the provider failed the response (mystery)"},
		{&provider.Error{Phase: provider.Body, Class: provider.ResponsesIncomplete}, "the response ended incomplete (no reason given)"},
		{&provider.Error{Phase: provider.Opening, Class: provider.ResponseHeaders, Err: errors.New("awaiting response headers: open timeout")}, "the provider did not answer the request: timed out"},
	}
	for _, tt := range tests {
		got := describeFailure(tt.err)
		if got != tt.want {
			t.Errorf("describeFailure(%v) = %q, want %q", tt.err, got, tt.want)
		}
		if strings.Contains(got, "10.1.2.3") {
			t.Errorf("cause %q names an address", got)
		}
	}
	long := describeFailure(&provider.Error{Class: provider.HTTPStatus, Status: 500, Message: strings.Repeat("é", 500)})
	if len(long) > maxCauseBytes+len("…") || !strings.HasSuffix(long, "…") {
		t.Errorf("unbounded cause (%d bytes)", len(long))
	}
}
