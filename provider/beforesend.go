package provider

import (
	"bytes"
	"context"
	"fmt"
	"sync"
)

// BeforeSendNotifier is implemented by transports that honour
// [WithBeforeSend]: they call its function at the last moment before the
// request's first byte is written. A caller that must record a dispatch
// durably before sending (a write-ahead log) does it in that function
// with such a transport, and before Open with any other.
type BeforeSendNotifier interface {
	NotifiesBeforeSend() bool
}

type beforeSendKey struct{}

// WithBeforeSend returns a copy of ctx carrying f. The HTTP and WebSocket
// transports call f at most once per Open, after credentials are resolved,
// the request is encoded and a connection is established (so pre-send
// waiting and refused connections never call it), and before the first
// byte of the request is written. If f fails, nothing is sent and Open
// returns a PreSend error of class InvalidRequest wrapping f's error.
func WithBeforeSend(ctx context.Context, f func() error) context.Context {
	return context.WithValue(ctx, beforeSendKey{}, f)
}

// beforeSend is the once-only hook of one Open.
type beforeSend struct {
	mu     sync.Mutex
	f      func() error
	called bool
	err    error
}

// beforeSendOf returns the hook carried by ctx, or nil.
func beforeSendOf(ctx context.Context) *beforeSend {
	f, _ := ctx.Value(beforeSendKey{}).(func() error)
	if f == nil {
		return nil
	}
	return &beforeSend{f: f}
}

// call runs the hook the first time and returns its result every time.
func (b *beforeSend) call() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.called {
		b.called = true
		b.err = b.f()
	}
	return b.err
}

// failed returns the hook's error, if it was called and failed.
func (b *beforeSend) failed() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// beforeSendError is Open's error when the hook failed: nothing was sent.
func beforeSendError(err error) *Error {
	return &Error{Phase: PreSend, Class: InvalidRequest, Err: fmt.Errorf("before sending the request: %w", err)}
}

// NotifiesBeforeSend reports that HTTP honours [WithBeforeSend].
func (h *HTTP) NotifiesBeforeSend() bool { return true }

// NotifiesBeforeSend reports that WebSocket honours [WithBeforeSend].
func (w *WebSocket) NotifiesBeforeSend() bool { return true }

// hookedBody is a request body that runs the before-send hook on its first
// read and fails the read (so nothing of the body is sent) if it fails.
type hookedBody struct {
	r    *bytes.Reader
	hook *beforeSend
}

func (b *hookedBody) Read(p []byte) (int, error) {
	if err := b.hook.call(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}

func (b *hookedBody) Close() error { return nil }
