package provider_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestBeforeSend: on every transport (both sockets and a custom
// RoundTripper, which never reports GotConn) the hook runs once per Open
// before the request is written (twice over one kept connection), a failing
// hook keeps the request from being sent at all, and a refused connection
// never calls it.
func TestBeforeSend(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			srv := providertest.New(t)
			transport := tr.make(t, srv)
			if n, ok := transport.(provider.BeforeSendNotifier); !ok || !n.NotifiesBeforeSend() {
				t.Fatal("transport does not report NotifiesBeforeSend")
			}
			srv.Enqueue(providertest.Text("a"), providertest.Text("b"), providertest.Text("c"))
			calls := 0
			ok := func() error {
				calls++
				if got := len(srv.Requests()); got != calls-1 {
					t.Errorf("hook call %d ran after the request reached the server (%d requests)", calls, got)
				}
				return nil
			}
			for range 2 {
				ctx, cancel := context.WithTimeout(provider.WithBeforeSend(context.Background(), ok), 10*time.Second)
				st, err := transport.Open(ctx, simpleRequest())
				if err != nil {
					t.Fatal(err)
				}
				for err == nil {
					_, err = st.Next(ctx)
				}
				st.Close()
				cancel()
			}
			if calls != 2 || len(srv.Requests()) != 2 {
				t.Fatalf("%d hook calls, %d requests; want 2, 2", calls, len(srv.Requests()))
			}
			boom := errors.New("disk full")
			_, err := transport.Open(provider.WithBeforeSend(context.Background(), func() error { return boom }), simpleRequest())
			var pe *provider.Error
			if !errors.As(err, &pe) || !errors.Is(err, boom) || pe.Dispatched || pe.Phase != provider.PreSend {
				t.Fatalf("failing hook: err %v; want an undispatched PreSend error wrapping the hook's", err)
			}
			time.Sleep(50 * time.Millisecond)
			if n := len(srv.Requests()); n != 2 {
				t.Fatalf("the request was sent although the hook failed (%d requests)", n)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		h := provider.NewHTTP(provider.HTTPConfig{BaseURL: "http://" + addr + "/v1"})
		called := false
		_, err = h.Open(provider.WithBeforeSend(context.Background(), func() error { called = true; return nil }), simpleRequest())
		if err == nil || called {
			t.Fatalf("refused connection: err %v, hook called %v; want an error and no call", err, called)
		}
	})
}
