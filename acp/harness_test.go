package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/internal/testlog"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// stackOpts selects the in-process runtime of a test.
type stackOpts struct {
	policy   tools.Policy
	maxTurns int
	recovery bool
	// maxSessions is Options.MaxSessions (0: the default).
	maxSessions int
	// runtime, when set, changes the runtime before it serves.
	runtime func(*host.Runtime)
}

// testRuntime is the real agent, tools and broker over the scripted
// provider, as cmd/octet builds them (without configuration files).
func testRuntime(t *testing.T, prov *providertest.Server, home string, o stackOpts) *host.Runtime {
	rt := hosttest.New(t, hosttest.Options{
		Home: home, Provider: prov, Policy: o.policy, MaxTurns: o.maxTurns,
		Recovery: o.recovery, Backoff: 10 * time.Millisecond,
	}).Runtime
	if o.runtime != nil {
		o.runtime(rt)
	}
	return rt
}

// peer is a Go ACP client of an in-process Serve.
type peer struct {
	t    *testing.T
	w    io.WriteCloser
	ws   string
	home string
	prov *providertest.Server
	done chan error

	mu      sync.Mutex
	nextID  int
	waiting map[string]chan message
	notes   []message
	// onRequest answers the server's requests (nil: method not found).
	onRequest func(m message) (any, *rpcError)
	// wire validates what octet sends against the ACP schema.
	wire *wireCheck
	// readDone is closed when the reader has seen the server's output end.
	readDone chan struct{}
	// out is the client's end of the server's output.
	out *io.PipeReader
	// logs are the server's logs.
	logs testlog.Buffer
}

func newPeer(t *testing.T, o stackOpts) *peer {
	t.Helper()
	return newPeerAt(t, o, providertest.New(t), t.TempDir(), t.TempDir())
}

// newPeerAt is newPeer with the given provider, octet home and workspace
// (a second connection to the sessions of a first).
func newPeerAt(t *testing.T, o stackOpts, prov *providertest.Server, home, ws string) *peer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &peer{t: t, w: inW, ws: ws, home: home, prov: prov, done: make(chan error, 1), waiting: map[string]chan message{},
		wire: newWireCheck(loadSchemas(t)), readDone: make(chan struct{}), out: outR}
	go func() {
		err := Serve(context.Background(), inR, outW, Options{Runtime: testRuntime(t, prov, home, o), Logger: slog.New(slog.NewTextHandler(&p.logs, nil)), Version: "test", MaxSessions: o.maxSessions})
		outW.Close()
		p.done <- err
	}()
	go p.read(outR)
	t.Cleanup(func() {
		inW.Close()
		select {
		case err := <-p.done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after stdin closed")
		}
		<-p.readDone
	})
	return p
}

func (p *peer) read(r io.Reader) {
	defer close(p.readDone)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			p.t.Errorf("server wrote a line that is not JSON: %q", sc.Text())
			continue
		}
		if err := p.wire.fromOctet(sc.Bytes()); err != nil {
			p.t.Errorf("octet sent a message the ACP schema refuses: %v\n%s", err, sc.Bytes())
		}
		switch {
		case m.Method != "" && len(m.ID) > 0:
			go p.answer(m)
		case m.Method != "":
			p.mu.Lock()
			p.notes = append(p.notes, m)
			p.mu.Unlock()
		default:
			p.mu.Lock()
			ch := p.waiting[string(m.ID)]
			p.mu.Unlock()
			if ch != nil {
				ch <- m
			} else {
				p.mu.Lock()
				p.notes = append(p.notes, m) // an answer to a raw line
				p.mu.Unlock()
			}
		}
	}
}

func (p *peer) answer(m message) {
	var res any
	var rerr *rpcError
	if p.onRequest != nil {
		res, rerr = p.onRequest(m)
	} else {
		rerr = &rpcError{Code: codeMethodNotFound, Message: "no"}
	}
	out := message{JSONRPC: "2.0", ID: m.ID, Error: rerr}
	if rerr == nil {
		out.Result, _ = json.Marshal(res)
	}
	p.send(out)
}

func (p *peer) send(m message) {
	m.JSONRPC = "2.0"
	b, _ := json.Marshal(m)
	p.raw(string(b))
}

// raw writes one line as is.
func (p *peer) raw(line string) {
	for l := range strings.SplitSeq(line, "\n") {
		p.wire.fromClient([]byte(l))
	}
	if _, err := io.WriteString(p.w, line+"\n"); err != nil {
		p.t.Errorf("write to server: %v", err)
	}
}

// call sends a request and returns its answer.
func (p *peer) call(method string, params any) message {
	p.t.Helper()
	p.mu.Lock()
	p.nextID++
	id := strconv.Itoa(p.nextID)
	ch := make(chan message, 1)
	p.waiting[id] = ch
	p.mu.Unlock()
	raw, _ := json.Marshal(params)
	p.send(message{ID: json.RawMessage(id), Method: method, Params: raw})
	select {
	case m := <-ch:
		return m
	case <-time.After(30 * time.Second):
		p.t.Fatalf("%s: no answer", method)
		return message{}
	}
}

// ok calls and decodes a successful result into res.
func (p *peer) ok(method string, params, res any) {
	p.t.Helper()
	m := p.call(method, params)
	if m.Error != nil {
		p.t.Fatalf("%s: %v", method, m.Error)
	}
	if res != nil {
		if err := json.Unmarshal(m.Result, res); err != nil {
			p.t.Fatalf("%s result %s: %v", method, m.Result, err)
		}
	}
}

// initialize initializes the connection as a client that takes octet's
// _octet/* notifications, with the fs capabilities when fs is set.
func (p *peer) initialize(fs bool) {
	p.t.Helper()
	p.initializeWith(map[string]any{
		"fs":    map[string]bool{"readTextFile": fs, "writeTextFile": fs},
		"_meta": map[string]any{"octet": map[string]any{"notifications": true}},
	})
}

// initializeWith initializes the connection with the client capabilities
// caps.
func (p *peer) initializeWith(caps map[string]any) {
	p.t.Helper()
	p.ok("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": caps}, nil)
}

func (p *peer) newSession() string {
	p.t.Helper()
	var res struct{ SessionID string }
	p.ok("session/new", map[string]any{"cwd": p.ws, "mcpServers": []any{}}, &res)
	return res.SessionID
}

// prompt sends text and returns the stop reason.
func (p *peer) prompt(id, text string) string {
	p.t.Helper()
	var res struct{ StopReason string }
	p.ok("session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]any{"type": "text", "text": text}}}, &res)
	return res.StopReason
}

// asked is one session/request_permission a peer answered: its tool
// call's title and content.
type asked struct {
	title   string
	content []map[string]any
}

// permissions are the permission requests a peer answered.
type permissions struct {
	mu    sync.Mutex
	asked []asked
}

func (ps *permissions) list() []asked {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return slices.Clone(ps.asked)
}

// answerPermissions answers every session/request_permission with the
// option optionID, recording what it showed; other requests go to other
// (nil: method not found).
func (p *peer) answerPermissions(optionID string, other func(m message) (any, *rpcError)) *permissions {
	ps := &permissions{}
	p.onRequest = func(m message) (any, *rpcError) {
		if m.Method != "session/request_permission" {
			if other == nil {
				return nil, &rpcError{Code: codeMethodNotFound, Message: m.Method}
			}
			return other(m)
		}
		var req struct {
			ToolCall struct {
				Title   string
				Content []map[string]any
			}
		}
		_ = json.Unmarshal(m.Params, &req)
		ps.mu.Lock()
		ps.asked = append(ps.asked, asked{req.ToolCall.Title, req.ToolCall.Content})
		ps.mu.Unlock()
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": optionID}}, nil
	}
	return ps
}

// awaitServe waits (up to 10 s) for Serve to return after what, and
// leaves its error for the cleanup.
func (p *peer) awaitServe(what string) {
	p.t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(10 * time.Second):
		p.t.Fatalf("Serve did not return after %s\n%s", what, p.logs.String())
	}
}

// notifications returns the notifications of method received so far.
func (p *peer) notifications(method string) []json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []json.RawMessage
	for _, m := range p.notes {
		if m.Method == method {
			out = append(out, m.Params)
		}
	}
	return out
}

// stray returns the answers to raw lines (responses with no waiter).
func (p *peer) stray() []message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []message
	for _, m := range p.notes {
		if m.Method == "" {
			out = append(out, m)
		}
	}
	return out
}

// updates returns the session/update notifications of kind received so
// far (their update objects).
func (p *peer) updates(kind string) []map[string]any {
	var out []map[string]any
	for _, raw := range p.notifications("session/update") {
		var n struct{ Update map[string]any }
		if json.Unmarshal(raw, &n) == nil && n.Update["sessionUpdate"] == kind {
			out = append(out, n.Update)
		}
	}
	return out
}
