package agent

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/octet-agent/octet/provider"
)

// FallbackTransport sends requests over the Responses WebSocket until the
// recovery policy decides the WebSocket has failed too often (or the
// handshake asked for HTTP); from then on it sends over HTTP for the rest
// of its life, as Codex does. The switch happens only through
// [FallbackTransport.FallbackToHTTP], which the loop calls for a
// RetryDecision with FallbackHTTP set; the transport itself never retries.
// Replacement budgets live in the policy and survive the switch.
type FallbackTransport struct {
	ws     provider.Transport
	http   provider.Transport
	onHTTP atomic.Bool
}

var (
	_ provider.Transport       = (*FallbackTransport)(nil)
	_ provider.FeatureReporter = (*FallbackTransport)(nil)
	_ HTTPFallback             = (*FallbackTransport)(nil)
)

// NewFallbackTransport returns a transport that starts on ws and falls
// back to http.
func NewFallbackTransport(ws, http provider.Transport) *FallbackTransport {
	return &FallbackTransport{ws: ws, http: http}
}

// Open sends req over the current transport; a native compaction (an
// HTTP endpoint) always over HTTP.
func (t *FallbackTransport) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	if t.onHTTP.Load() || req.Compact {
		return t.http.Open(ctx, req)
	}
	return t.ws.Open(ctx, req)
}

// FallbackToHTTP moves every later request to HTTP and retires the
// WebSocket connection when the WebSocket transport can be closed.
func (t *FallbackTransport) FallbackToHTTP() {
	if t.onHTTP.Swap(true) {
		return
	}
	if c, ok := t.ws.(io.Closer); ok {
		_ = c.Close()
	}
}

// OnHTTP reports whether the transport has fallen back to HTTP.
func (t *FallbackTransport) OnHTTP() bool { return t.onHTTP.Load() }

// SendsWarmups reports whether a warm-up can be sent now: on the
// WebSocket, before the fallback to HTTP.
func (t *FallbackTransport) SendsWarmups() bool { return !t.onHTTP.Load() && sendsWarmups(t.ws) }

// EndpointFeatures returns the features both endpoints grant: a feature
// must survive the fallback to count.
func (t *FallbackTransport) EndpointFeatures() provider.ResponsesFeatures {
	return endpointFeatures(t.ws) & endpointFeatures(t.http)
}

func endpointFeatures(tr provider.Transport) provider.ResponsesFeatures {
	if fr, ok := tr.(provider.FeatureReporter); ok {
		return fr.EndpointFeatures()
	}
	return 0
}
