package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/host"
)

// Default limits; Options fields override them.
const (
	// DefaultApprovalTimeout is how long an approval request waits for the
	// editor before it counts as a denial.
	DefaultApprovalTimeout = 5 * time.Minute
	// DefaultRequestTimeout bounds every other server→client request.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultEventBuffer is how many recent events each session keeps for
	// octet/session/resume.
	DefaultEventBuffer = host.DefaultEventBuffer
	// DefaultEventBufferBytes bounds the same buffer by encoded size.
	DefaultEventBufferBytes = host.DefaultEventBufferBytes
	// DefaultSessionIdleTimeout is how long an open session without a run
	// and without requests stays open before it is released.
	DefaultSessionIdleTimeout = host.DefaultSessionIdleTimeout
	// DefaultMaxSessions bounds the sessions one server keeps open.
	DefaultMaxSessions = host.DefaultMaxSessions
	// settleTimeout bounds how long shutdown and exit wait for cancelled runs.
	settleTimeout = 30 * time.Second
	// replyTimeout bounds how long settled runs' answers may take to write.
	replyTimeout = 5 * time.Second
)

// ErrExitWithoutShutdown is returned by Serve when the client sent exit
// without a preceding shutdown (LSP asks for exit status 1 then).
var ErrExitWithoutShutdown = errors.New("exit notification received before shutdown")

// Options configures one server. Everything built from configuration and
// flags arrives here; the server parses no flags and reads no environment.
type Options struct {
	// Runtime builds sessions and their agents. Required.
	Runtime *host.Runtime
	// Logger receives the server's logs (stderr in octet lsp). When the
	// client asks for them, logs are also sent as window/logMessage.
	Logger *slog.Logger
	// ApprovalTimeout bounds each approval request (default 5 minutes).
	ApprovalTimeout time.Duration
	// RequestTimeout bounds other server→client requests (default 10 s).
	RequestTimeout time.Duration
	// EventBuffer and EventBufferBytes bound each session's replay buffer.
	EventBuffer      int
	EventBufferBytes int
	// SessionIdleTimeout releases an open session that has had no run,
	// no pending approval and no request naming it for this long (default
	// 15 minutes); octet/session/resume opens it again.
	SessionIdleTimeout time.Duration
	// MaxSessions bounds the open sessions (default 32): opening one more
	// releases the least recently used idle session, or is refused when
	// every open session has a run.
	MaxSessions int
	// Version is reported in serverInfo.
	Version string
	// ConfigError, when set, is a configuration problem found before
	// serving (a config.toml mistake, unusable credentials). The server
	// serves anyway, so the editor gets its handshake, and shows the error
	// with window/showMessage once the client is initialized; the requests
	// that need the configuration report it themselves (Runtime.NewAgent
	// fails with it).
	ConfigError error

	// parentPoll is how often the editor's processId is checked.
	parentPoll time.Duration
}

func (o *Options) fill() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ApprovalTimeout <= 0 {
		o.ApprovalTimeout = DefaultApprovalTimeout
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = DefaultEventBuffer
	}
	if o.EventBufferBytes <= 0 {
		o.EventBufferBytes = DefaultEventBufferBytes
	}
	if o.SessionIdleTimeout <= 0 {
		o.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.parentPoll <= 0 {
		o.parentPoll = 2 * time.Second
	}
	if o.Version == "" {
		o.Version = "devel"
	}
}

// lifecycle is the LSP server state.
type lifecycle int

const (
	stateNew          lifecycle = iota // before initialize
	stateInitialized                   // initialize answered
	stateShuttingDown                  // shutdown received
)

// Server is one editor connection. Create it with New and run it with
// Serve; a Server serves exactly one connection.
type Server struct {
	opts Options
	log  *slog.Logger
	conn jsonrpc2.Conn
	// host creates, opens and lists the sessions (nil without a Runtime).
	host *host.Host
	// sessions are the sessions the server holds open.
	sessions *host.Registry[*host.OpenSession]

	// ctx lives as long as the connection; runs derive from it.
	ctx    context.Context
	cancel context.CancelFunc

	exitOnce sync.Once
	exitCh   chan struct{}

	parentGoneOnce sync.Once
	parentGone     chan struct{}

	// handlerWG counts prompt handlers still driving a run; replyWG counts
	// their answers not yet written.
	handlerWG sync.WaitGroup
	replyWG   sync.WaitGroup
	stream    *tolerantStream
	docs      *documents // the editor's open documents (documents.go)

	mu        sync.Mutex
	state     lifecycle
	sawShut   bool
	caps      clientCaps
	workspace string
	// client is the editor's name (initialize's clientInfo.name).
	client    string
	trace     string
	runs      map[string]*runState
	byRequest map[jsonrpc2.ID]*runState
	byToken   map[string]*runState
	ended     *endedRuns
	// childRuns are the runs of delegated children (delegation.go).
	childRuns map[string]team.Snapshot
	// childEvents are the events sent of delegated children's sessions,
	// by session id (childsessions.go); childRings orders the ones that
	// hold a replay buffer, oldest first.
	childEvents map[string]*childEvents
	childRings  []string
	tokenSeq    int64
	// awaitingReply holds the request ids of long requests (prompts) whose
	// answer has not been written yet; replyWG counts them.
	awaitingReply map[jsonrpc2.ID]bool
	defaultID     string
}

// New returns a server for one connection.
func New(opts Options) *Server {
	opts.fill()
	s := &Server{
		opts:   opts,
		exitCh: make(chan struct{}),

		parentGone: make(chan struct{}),
		runs:       make(map[string]*runState),
		byRequest:  make(map[jsonrpc2.ID]*runState),
		byToken:    make(map[string]*runState),
		childRuns:  make(map[string]team.Snapshot),

		childEvents: make(map[string]*childEvents),

		awaitingReply: make(map[jsonrpc2.ID]bool),
		ended:         newEndedRuns(1024),
		trace:         "off",
	}
	s.log = slog.New(&clientLogHandler{inner: opts.Logger.Handler(), srv: s})
	s.sessions = host.NewRegistry[*host.OpenSession](host.RegistryOptions{MaxOpen: opts.MaxSessions, Settle: settleTimeout, Logger: s.log})
	s.docs = newDocuments(s)
	if opts.Runtime != nil {
		s.host = host.New(opts.Runtime, nil) // rule-book warnings go to slog.Default()
	}
	return s
}

// Serve runs the protocol on in/out until the client sends exit, the input
// ends or ctx is cancelled. It cancels and settles every run before it
// returns. It returns nil after shutdown+exit or end of input,
// ErrExitWithoutShutdown after an exit without shutdown, and ctx.Err()
// when ctx was cancelled.
func Serve(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	return New(opts).Serve(ctx, rwc{in, out})
}

// Serve runs the protocol over conn; see the package function Serve.
func (s *Server) Serve(ctx context.Context, conn io.ReadWriteCloser) error {
	if s.host == nil {
		return errors.New("server: Options.Runtime is required")
	}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	defer s.cancel()

	stream := newTolerantStream(conn, s.opts.Logger)
	stream.onResponse = s.replyWritten
	s.stream = stream
	s.conn = jsonrpc2.NewConn(stream, jsonrpc2.WithCodec(lspCodec{}))
	s.conn.Go(s.ctx, s.handle)
	go s.sessions.ReleaseIdleUntil(s.ctx, s.opts.SessionIdleTimeout)

	var err error
	select {
	case <-s.exitCh:
		s.mu.Lock()
		if !s.sawShut {
			err = ErrExitWithoutShutdown
		}
		s.mu.Unlock()
	case <-stream.ended():
		s.log.Info("input ended; stopping")
	case <-stream.broken():
		// The client is gone as surely as when its input ends: cancel
		// and settle the runs (their records reach the session files).
		s.opts.Logger.Warn("the client stopped reading; stopping", "error", stream.brokenErr)
	case <-s.parentGone:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.mu.Lock()
	s.state = stateShuttingDown
	s.mu.Unlock()
	s.settleRuns()
	// Close gracefully first: it waits for in-flight handlers, so the
	// answers of the settled prompts are written before the stream closes.
	// s.ctx stays alive until then (a cancelled context drops writes).
	closed := make(chan error, 1)
	go func() { closed <- s.conn.Close() }()
	t := time.NewTimer(2 * time.Second)
	select {
	case cerr := <-closed:
		if cerr != nil && !isClosedErr(cerr) {
			s.opts.Logger.Debug("closing connection", "error", cerr)
		}
	case <-t.C:
		// A reader blocked in a read the transport cannot interrupt
		// (a terminal, say) must not keep the process alive.
		s.opts.Logger.Debug("connection close timed out")
	}
	t.Stop()
	s.cancel()
	_ = conn.Close()
	s.sessions.CloseAll()
	_ = s.host.Close()
	return err
}

// handle is the root of the ordered handler chain: it recovers panics,
// keeps notifications from ever failing, gates the lifecycle and dispatches.
func (s *Server) handle(ctx context.Context, req *jsonrpc2.Request) (result any, err error) {
	method := req.Method()
	isCall := req.IsCall()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("handler panicked", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			if isCall {
				result, err = nil, jsonrpc2.Errorf(jsonrpc2.InternalError, "internal error handling %s: %v", method, r)
			} else {
				result, err = nil, nil
			}
		}
	}()
	if !isCall {
		s.handleNotification(ctx, method, req.Params())
		return nil, nil
	}
	res, herr := s.handleCall(ctx, req)
	if herr != nil {
		if !isWireError(herr) {
			code := jsonrpc2.InternalError
			if _, ok := errors.AsType[*host.InputError](herr); ok {
				code = jsonrpc2.InvalidParams // the host refused what was asked
			}
			herr = jsonrpc2.NewError(code, herr.Error())
		}
		herr = validUTF8Error(herr)
		s.log.Debug("request failed", "method", method, "error", herr)
		return nil, herr
	}
	return res, nil
}

// handleNotification never returns an error: in jsonrpc2 v1.0.1 a failing
// notification handler ends the connection.
func (s *Server) handleNotification(ctx context.Context, method string, params jsonrpc2.RawMessage) {
	switch method {
	case "exit":
		s.exitOnce.Do(func() { close(s.exitCh) })
		return
	case "$/cancelRequest":
		s.cancelRequest(params)
		return
	}
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	if st == stateNew {
		s.log.Debug("dropping notification before initialize", "method", method)
		return
	}
	switch method {
	case "initialized":
		if err := s.opts.ConfigError; err != nil {
			s.notify("window/showMessage", &protocol.ShowMessageParams{
				Type:    protocol.MessageTypeError,
				Message: "octet cannot start sessions: " + err.Error() + " (fix it; the next octet/session/new reads it again)",
			})
		}
	case "$/setTrace":
		var p struct {
			Value string `json:"value"`
		}
		if err := decodeParams(params, &p); err != nil {
			s.log.Warn("bad $/setTrace params", "error", err)
			return
		}
		s.setTrace(p.Value)
	case "window/workDoneProgress/cancel":
		s.cancelProgress(params)
	default:
		if s.handleDocument(method, params) {
			return
		}
		if !strings.HasPrefix(method, "$/") {
			s.log.Debug("ignoring unknown notification", "method", method)
		}
	}
}

// handleCall dispatches a request after the lifecycle gate.
func (s *Server) handleCall(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	method := req.Method()
	params := req.Params()
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	switch {
	case method == "initialize":
		if st != stateNew {
			return nil, jsonrpc2.NewError(jsonrpc2.InvalidRequest, "initialize was already received")
		}
		return s.initialize(params)
	case st == stateNew:
		return nil, jsonrpc2.NewError(jsonrpc2.ServerNotInitialized, fmt.Sprintf("server not initialized: %s received before initialize", method))
	case method == "shutdown":
		return s.shutdown(ctx)
	case st == stateShuttingDown:
		return nil, jsonrpc2.NewError(jsonrpc2.InvalidRequest, fmt.Sprintf("%s received after shutdown", method))
	}
	h, ok := s.methods()[method]
	if !ok {
		return nil, jsonrpc2.NewError(jsonrpc2.MethodNotFound, fmt.Sprintf("method not found: %s", method))
	}
	return h(ctx, req, params)
}

type methodHandler func(ctx context.Context, req *jsonrpc2.Request, params jsonrpc2.RawMessage) (any, error)

func (s *Server) methods() map[string]methodHandler {
	return map[string]methodHandler{
		"octet/session/new":        s.sessionNew,
		"octet/session/list":       s.sessionList,
		"octet/session/resume":     s.sessionResume,
		"octet/session/branch":     s.sessionBranch,
		"octet/session/close":      s.sessionClose,
		"octet/session/compact":    s.sessionCompact,
		"octet/session/diff":       s.sessionDiff,
		"octet/session/rewind":     s.sessionRewind,
		"octet/session/rename":     s.sessionRename,
		"octet/session/fork":       s.sessionFork,
		"octet/session/delete":     s.sessionDelete,
		"octet/session/transcript": s.sessionTranscript,
		"octet/models":             s.models,
		"octet/prompt":             s.prompt,
		"octet/cancel":             s.cancelRun,
		"octet/steer":              s.steer,
		"octet/followUp":           s.followUp,
		"octet/finishNow":          s.finishNow,
		"octet/setReasoning":       s.setReasoning,
		"octet/setModel":           s.setModel,
		"octet/policy":             s.policy,
		"octet/session/setPolicy":  s.sessionSetPolicy,
		"octet/approvals/list":     s.approvalsList,
		"octet/approvals/revoke":   s.approvalsRevoke,
		"octet/extensions/list":    s.extensionsList,
		"octet/extensions/enable":  s.extensionsEnable,
		"workspace/executeCommand": s.executeCommand,
	}
}

// shutdown cancels every run, waits for them to settle and answers null.
// It releases the reader first so that the answers the runs are still
// waiting for (approvals, progress creation) can be read meanwhile.
func (s *Server) shutdown(ctx context.Context) (any, error) {
	s.mu.Lock()
	s.state = stateShuttingDown
	s.sawShut = true
	s.mu.Unlock()
	jsonrpc2.Async(ctx)
	s.settleRuns()
	return nil, nil
}

// replyWritten is called by the stream after each response frame: a
// long request's run counts as settled only once its answer is on the
// wire (jsonrpc2 writes the answer after the handler returns, and refuses
// to write once Close has begun).
func (s *Server) replyWritten(id jsonrpc2.ID) {
	s.mu.Lock()
	waiting := s.awaitingReply[id]
	delete(s.awaitingReply, id)
	s.mu.Unlock()
	if waiting {
		s.replyWG.Done()
	}
}

// settleRuns cancels every active run and waits (bounded) until each one
// has ended and its prompt's answer has been written (or the client is
// gone, so it never will be).
func (s *Server) settleRuns() {
	s.cancelAllRuns("server shutting down")
	if !waitGroup(&s.handlerWG, nil, settleTimeout) {
		s.log.Error("runs did not settle in time", "timeout", settleTimeout)
		return
	}
	if !waitGroup(&s.replyWG, s.clientGone(), replyTimeout) {
		s.log.Warn("prompt answers were not written in time", "timeout", replyTimeout)
	}
}

// clientGone is closed once the client can no longer receive answers:
// its input ended or a write to it failed.
func (s *Server) clientGone() <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		select {
		case <-s.stream.ended():
		case <-s.stream.broken():
		}
		close(gone)
	}()
	return gone
}

// waitGroup waits for wg, for stop to close, or for timeout; it reports
// false only on timeout.
func waitGroup(wg *sync.WaitGroup, stop <-chan struct{}, timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-stop:
		return true
	case <-t.C:
		return false
	}
}

// notify sends a notification, logging (never returning) a failure.
func (s *Server) notify(method string, params any) {
	if err := s.conn.Notify(context.WithoutCancel(s.ctx), method, params); err != nil {
		s.opts.Logger.Debug("notify failed", "method", method, "error", err)
	}
}

// call sends a server→client request with a timeout. The result is
// returned raw for the caller to decode leniently. When ctx ends first, a
// $/cancelRequest is sent for the request.
func (s *Server) call(ctx context.Context, timeout time.Duration, method string, params any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var raw jsonrpc2.RawMessage
	id, err := s.conn.Call(ctx, method, params, &raw)
	if ctx.Err() != nil && id.IsValid() {
		s.notify("$/cancelRequest", cancelParams(id))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return json.RawMessage(raw), nil
}

// cancelParams are the params of $/cancelRequest for the server's own
// request id, as the client saw it (wireRequestID).
func cancelParams(id jsonrpc2.ID) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":%q}`, wireRequestID(id)))
}

// rwc joins a reader and a writer into the ReadWriteCloser jsonrpc2 wants.
type rwc struct {
	io.Reader
	io.Writer
}

// Close closes whichever halves are closable.
func (c rwc) Close() error {
	var errs []error
	if cl, ok := c.Reader.(io.Closer); ok {
		errs = append(errs, cl.Close())
	}
	if cl, ok := c.Writer.(io.Closer); ok && any(c.Writer) != any(c.Reader) {
		errs = append(errs, cl.Close())
	}
	return errors.Join(errs...)
}

// validUTF8Error returns err with its message made valid UTF-8: jsonrpc2
// writes error messages as they are, and stdout must carry valid JSON.
func validUTF8Error(err error) error {
	w, ok := errors.AsType[*jsonrpc2.Error](err)
	if !ok || utf8.ValidString(w.Message) {
		return err
	}
	return &jsonrpc2.Error{Code: w.Code, Message: strings.ToValidUTF8(w.Message, "\uFFFD"), Data: w.Data}
}

func isWireError(err error) bool {
	var w *jsonrpc2.Error
	return errors.As(err, &w)
}

func isClosedErr(err error) bool {
	return err == nil || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "closed")
}

// cancelAllRuns cancels every active run with reason and reports how many
// there were. The set is snapshotted under the lock and cancelled outside
// it, since a cancel may call back into the server.
func (s *Server) cancelAllRuns(reason string) int {
	s.mu.Lock()
	runs := make([]*runState, 0, len(s.runs))
	for _, r := range s.runs {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.cancel(reason)
	}
	return len(runs)
}
