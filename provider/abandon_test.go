package provider_test

import (
	"context"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestAbandonedStreamLeavesTransportUsable: on every transport a stream
// whose response stalls after response.created and is then abandoned —
// its Next cancelled while blocked, cancelled between two Next calls, or
// closed — leaves the transport usable: the next request reaches the
// server and completes. Over WebSocket a stream whose context was
// cancelled while its owner had not yet closed it used to keep the
// transport busy, refusing the next request with ErrBusy.
func TestAbandonedStreamLeavesTransportUsable(t *testing.T) {
	abandon := map[string]func(t *testing.T, st provider.Stream, ctx context.Context, cancel context.CancelFunc){
		"cancel-blocked-next": func(t *testing.T, st provider.Stream, ctx context.Context, cancel context.CancelFunc) {
			time.AfterFunc(20*time.Millisecond, cancel)
			_, err := st.Next(ctx)
			if e := asError(t, err); e.Class != provider.Canceled || !e.Dispatched {
				t.Fatalf("cancelled Next: %v", e)
			}
		},
		"cancel-between-nexts": func(t *testing.T, st provider.Stream, ctx context.Context, cancel context.CancelFunc) {
			cancel() // the owner has not called Next again nor Close yet
		},
		"close": func(t *testing.T, st provider.Stream, ctx context.Context, cancel context.CancelFunc) {
			st.Close()
		},
	}
	for _, tc := range transports {
		for name, fn := range abandon {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				srv := providertest.New(t)
				srv.Enqueue(providertest.Stall(), providertest.Text("next answer"))
				tr := tc.make(t, srv)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				st, err := tr.Open(ctx, simpleRequest())
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close() // the owner's late Close, after the next request
				if ev, err := st.Next(ctx); err != nil || ev.Type != provider.EventCreated {
					t.Fatalf("first event %v, %v", ev, err)
				}
				fn(t, st, ctx, cancel)
				done := make(chan error, 1)
				go func() { _, err := run(t, tr, simpleRequest()); done <- err }()
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("the request after the abandoned stream: %v", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("the request after the abandoned stream hung")
				}
				if n := len(srv.Requests()); n != 2 {
					t.Fatalf("%d requests reached the server, want 2", n)
				}
			})
		}
	}
}
