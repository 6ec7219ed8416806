package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
)

// fakeEditor is an in-process editor: a real jsonrpc2 connection over
// net.Pipe to a real Server. It records every notification, answers
// server→client requests with the responders a test installs, and lets a
// test await conditions on what it has received (gopls
// test/integration/fake style).
type fakeEditor struct {
	t      *testing.T
	conn   jsonrpc2.Conn
	raw    net.Conn // client end, for raw writes (malformed frames)
	srv    *Server
	served chan error

	mu         sync.Mutex
	notes      []note
	requests   []note
	changed    chan struct{}
	responders map[string]func(params json.RawMessage) (any, error)
	// onNote, when set, sees each notification before it is recorded.
	onNote func(note)
	// reading is held while the editor reads nothing at all: its
	// connection's next read waits for it.
	reading sync.Mutex
}

// gatedConn is the editor's end of the pipe: each read first waits for
// the editor's reading gate.
type gatedConn struct {
	net.Conn
	e *fakeEditor
}

func (c gatedConn) Read(p []byte) (int, error) {
	c.e.reading.Lock()
	c.e.reading.Unlock() //nolint:staticcheck // a gate, not a critical section
	return c.Conn.Read(p)
}

// note is one message the editor received from the server.
type note struct {
	Method string
	Params json.RawMessage
}

// editorTimeout bounds every wait in these tests.
const editorTimeout = 20 * time.Second

// newEditor starts a server with opts on one end of a pipe and a client
// on the other. It does not initialize.
func newEditor(t *testing.T, opts Options) *fakeEditor {
	t.Helper()
	return newEditorCtx(t, context.Background(), opts)
}

// newEditorCtx is newEditor with the server's Serve context.
func newEditorCtx(t *testing.T, ctx context.Context, opts Options) *fakeEditor {
	t.Helper()
	cli, srvEnd := net.Pipe()
	e := &fakeEditor{
		t: t, raw: cli, served: make(chan error, 1),
		changed:    make(chan struct{}),
		responders: map[string]func(json.RawMessage) (any, error){},
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	e.srv = New(opts)
	go func() { e.served <- e.srv.Serve(ctx, srvEnd) }()
	e.conn = jsonrpc2.NewConn(jsonrpc2.NewHeaderStream(gatedConn{cli, e}))
	e.conn.Go(context.Background(), e.handle)
	t.Cleanup(func() {
		_ = cli.Close()
		select {
		case <-e.served:
		case <-time.After(editorTimeout):
			t.Errorf("server did not stop after the client closed")
		}
		done := make(chan struct{})
		go func() { _ = e.conn.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	})
	return e
}

// respond installs the answer to a server→client request method.
func (e *fakeEditor) respond(method string, f func(params json.RawMessage) (any, error)) {
	e.mu.Lock()
	e.responders[method] = f
	e.mu.Unlock()
}

func (e *fakeEditor) handle(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	n := note{Method: strings.Clone(req.Method()), Params: append(json.RawMessage(nil), req.Params()...)}
	if !req.IsCall() && e.onNote != nil {
		e.onNote(n)
	}
	e.mu.Lock()
	if req.IsCall() {
		e.requests = append(e.requests, n)
	} else {
		e.notes = append(e.notes, n)
	}
	close(e.changed)
	e.changed = make(chan struct{})
	f := e.responders[n.Method]
	e.mu.Unlock()
	if !req.IsCall() {
		return nil, nil
	}
	jsonrpc2.Async(ctx)
	if f == nil {
		return nil, jsonrpc2.NewError(jsonrpc2.MethodNotFound, "fake editor: no responder for "+n.Method)
	}
	res, err := f(n.Params)
	if err != nil {
		return nil, err
	}
	b, merr := json.Marshal(res)
	if merr != nil {
		return nil, merr
	}
	return json.RawMessage(b), nil
}

// call sends a request and decodes its result into out (if non-nil).
func (e *fakeEditor) call(method string, params, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), editorTimeout)
	defer cancel()
	var raw json.RawMessage
	_, err := e.conn.Call(ctx, method, params, &raw)
	if err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("decode %s result %s: %w", method, raw, err)
		}
	}
	return nil
}

// mustCall is call that fails the test on error.
func (e *fakeEditor) mustCall(method string, params, out any) {
	e.t.Helper()
	if err := e.call(method, params, out); err != nil {
		e.t.Fatalf("%s: %v", method, err)
	}
}

func (e *fakeEditor) notify(method string, params any) {
	e.t.Helper()
	if err := e.conn.Notify(context.Background(), method, params); err != nil {
		e.t.Fatalf("notify %s: %v", method, err)
	}
}

// initialize performs the handshake with the given client capabilities.
func (e *fakeEditor) initialize(root string, experimental map[string]any) map[string]any {
	e.t.Helper()
	params := map[string]any{
		"processId": nil,
		"rootUri":   "file://" + root,
		"capabilities": map[string]any{
			"window":       map[string]any{"workDoneProgress": true},
			"experimental": map[string]any{"octet": experimental},
		},
		"trace": nil,
	}
	var res map[string]any
	e.mustCall("initialize", params, &res)
	e.notify("initialized", map[string]any{})
	return res
}

// await blocks until cond holds over the received notifications.
func (e *fakeEditor) await(what string, cond func(notes []note) bool) {
	e.t.Helper()
	deadline := time.After(editorTimeout)
	for {
		e.mu.Lock()
		ok := cond(e.notes)
		ch := e.changed
		e.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			e.t.Fatalf("timed out waiting for %s; received:\n%s", what, e.dump())
		}
	}
}

// awaitRequest blocks until the server has sent a request of method.
func (e *fakeEditor) awaitRequest(method string) json.RawMessage {
	e.t.Helper()
	deadline := time.After(editorTimeout)
	for {
		e.mu.Lock()
		var found json.RawMessage
		for _, r := range e.requests {
			if r.Method == method {
				found = r.Params
			}
		}
		ch := e.changed
		e.mu.Unlock()
		if found != nil {
			return found
		}
		select {
		case <-ch:
		case <-deadline:
			e.t.Fatalf("timed out waiting for request %s; received:\n%s", method, e.dump())
		}
	}
}

func (e *fakeEditor) dump() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for _, n := range e.notes {
		fmt.Fprintf(&b, "  notify %s %s\n", n.Method, n.Params)
	}
	for _, n := range e.requests {
		fmt.Fprintf(&b, "  request %s %s\n", n.Method, n.Params)
	}
	return b.String()
}

// eventsOf returns the decoded octet/event params of a run, in order.
func (e *fakeEditor) eventsOf(runID string) []eventNote {
	e.mu.Lock()
	defer e.mu.Unlock()
	return eventsIn(e.notes, runID)
}

// eventNote is a decoded octet/event.
type eventNote struct {
	SessionID string         `json:"sessionId"`
	RunID     string         `json:"runId"`
	Seq       int64          `json:"seq"`
	Event     map[string]any `json:"event"`
}

func eventsIn(notes []note, runID string) []eventNote {
	var out []eventNote
	for _, n := range notes {
		if n.Method != "octet/event" {
			continue
		}
		var ev eventNote
		if json.Unmarshal(n.Params, &ev) == nil && (runID == "" || ev.RunID == runID) {
			out = append(out, ev)
		}
	}
	return out
}

// hasEvent reports whether run has an event of kind.
func hasEvent(kind, runID string) func([]note) bool {
	return func(notes []note) bool {
		for _, ev := range eventsIn(notes, runID) {
			if ev.Event["kind"] == kind {
				return true
			}
		}
		return false
	}
}

// codeOf returns the JSON-RPC error code of err (0 if none).
func codeOf(err error) jsonrpc2.Code {
	var w *jsonrpc2.Error
	for err != nil {
		if x, ok := err.(*jsonrpc2.Error); ok {
			w = x
			break
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			break
		}
		err = u.Unwrap()
	}
	if w == nil {
		return 0
	}
	return w.Code
}
