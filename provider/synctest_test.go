package provider_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestVirtualTimeBounds drives the in-process RoundTripper under
// testing/synctest: the default 300 s idle timeout and 120 s open timeout
// fire at exactly their virtual deadlines, and a slow but healthy body
// (a 250 s gap) is not cut.
func TestVirtualTimeBounds(t *testing.T) {
	t.Run("idle timeout 300s", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := providertest.NewInProcess(t)
			srv.Enqueue(providertest.Stall())
			tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), RoundTripper: srv.RoundTripper()})
			ctx := context.Background()
			st, err := tr.Open(ctx, simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if ev, err := st.Next(ctx); err != nil || ev.Type != provider.EventCreated {
				t.Fatalf("first event: %v %v", ev.Type, err)
			}
			start := time.Now()
			_, err = st.Next(ctx)
			if e := asError(t, err); e.Class != provider.IdleTimeout || !e.Dispatched {
				t.Fatalf("got %v", e)
			}
			if d := time.Since(start); d != provider.DefaultIdleTimeout {
				t.Fatalf("idle fired after %v, want %v", d, provider.DefaultIdleTimeout)
			}
		})
	})
	t.Run("open timeout 120s", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: "http://127.0.0.1:9/v1", RoundTripper: blockingRT{}})
			start := time.Now()
			_, err := tr.Open(context.Background(), simpleRequest())
			if e := asError(t, err); e.Class != provider.ResponseHeaders || !e.Dispatched || e.Phase != provider.Opening {
				t.Fatalf("got %v", e)
			}
			if d := time.Since(start); d != provider.DefaultOpenTimeout {
				t.Fatalf("open timeout after %v", d)
			}
		})
	})
	t.Run("slow healthy body", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := providertest.NewInProcess(t)
			srv.Enqueue(providertest.Text("slow but fine").Pace(250 * time.Second))
			tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), RoundTripper: srv.RoundTripper()})
			openCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			st, err := tr.Open(openCtx, simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			n := 0
			for {
				_, err := st.Next(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("after %d events: %v", n, err)
				}
				n++
			}
			frames := providertest.Text("slow but fine").FrameCount()
			if d := time.Since(start); d != time.Duration(frames)*250*time.Second {
				t.Fatalf("took %v for %d frames", d, frames)
			}
		})
	})
	t.Run("caller cancel while stalled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := providertest.NewInProcess(t)
			srv.Enqueue(providertest.Stall())
			tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), RoundTripper: srv.RoundTripper()})
			st, err := tr.Open(context.Background(), simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 42*time.Second)
			defer cancel()
			st.Next(ctx)
			_, err = st.Next(ctx)
			if e := asError(t, err); e.Class != provider.Canceled || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v", e)
			}
		})
	})
}
