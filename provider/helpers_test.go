package provider_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// transportCase names a way of reaching the scripted server.
type transportCase struct {
	name string
	make func(t *testing.T, srv *providertest.Server) provider.Transport
}

func httpTransport(t *testing.T, srv *providertest.Server) provider.Transport {
	return provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey})
}

func wsTransport(t *testing.T, srv *providertest.Server) provider.Transport {
	ws := provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), APIKey: testKey})
	t.Cleanup(func() { ws.Close() })
	return ws
}

func inProcessTransport(t *testing.T, srv *providertest.Server) provider.Transport {
	return provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey, RoundTripper: srv.RoundTripper()})
}

// testKey is a fake credential; tests assert it never leaks.
const testKey = "sk-test-SECRET-0123456789"

var transports = []transportCase{
	{"http", httpTransport},
	{"websocket", wsTransport},
	{"inprocess", inProcessTransport},
}

// socketTransports are the two real-socket transports.
var socketTransports = transports[:2]

func simpleRequest() *provider.Request {
	return &provider.Request{Model: "gpt-5.1-codex", Input: []provider.Item{{Type: provider.ItemMessage, Role: "user", Text: "hi"}}}
}

// run opens one request and collects its events until EOF or an error.
func run(t *testing.T, tr provider.Transport, req *provider.Request) ([]provider.Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := tr.Open(ctx, req)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var evs []provider.Event
	for {
		ev, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// completed returns the response of the final EventCompleted.
func completed(t *testing.T, evs []provider.Event) *provider.Response {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].Type != provider.EventCompleted {
		t.Fatalf("stream did not end with EventCompleted: %d events", len(evs))
	}
	return evs[len(evs)-1].Response
}

// deltas concatenates the deltas of one event type.
func deltas(evs []provider.Event, typ provider.EventType) string {
	var s string
	for _, e := range evs {
		if e.Type == typ {
			s += e.Delta
		}
	}
	return s
}

func asError(t *testing.T, err error) *provider.Error {
	t.Helper()
	pe, ok := errors.AsType[*provider.Error](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *provider.Error", err, err)
	}
	return pe
}
