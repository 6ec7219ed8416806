package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/tools"
)

// ProtocolVersion is the ACP version octet speaks.
const ProtocolVersion = 1

// Options configures Serve.
type Options struct {
	// Runtime builds each session's agent (the same as octet lsp's).
	Runtime *host.Runtime
	// Logger receives the server's logs (stderr: stdout is the protocol).
	Logger *slog.Logger
	// Version is octet's version, reported as agentInfo.version.
	Version string
	// ConfigError, when set, is the configuration problem found at
	// startup; session/new and session/load report it until the
	// configuration loads (NewAgent reads it anew).
	ConfigError error
	// MaxSessions bounds the sessions open on the connection (default
	// host.DefaultMaxSessions; a client that never sends session/close
	// keeps them, and each holds an agent, its tools and a session
	// file): opening one more releases the least recently used idle one,
	// which the next request naming it opens again.
	MaxSessions int
}

// Server is one ACP connection's state.
type Server struct {
	opts Options
	log  *slog.Logger
	c    *conn
	// host creates and opens the sessions.
	host *host.Host

	// openMu serializes opening existing sessions (load, resume).
	openMu sync.Mutex

	// sessions are the sessions open on the connection.
	sessions *host.Registry[*acpSession]

	mu          sync.Mutex
	initialized bool
	clientCaps  clientCapabilities
	// client is the client's name (initialize's clientInfo.name).
	client string
	// mcp are the MCP servers each session was opened with, to open it
	// again with them after the registry released it.
	mcp map[string][]host.MCPServer
	// cancels is the read order (conn's readOrder) of the last
	// session/cancel of each session known to the connection (a key of
	// mcp): a prompt read before it is cancelled, though its run started
	// after the cancel was handled — or after the session, released
	// meanwhile, was opened again for it.
	cancels map[string]int64
	// kids interrupt the exposed child sessions still active (the
	// subagents capability), by child session id.
	kids map[string]func() error
	// gone is set when the client is gone (end of input, or ctx done):
	// a prompt whose run starts after that is cancelled at once.
	gone bool
}

// clientCapabilities is what the client advertised at initialize.
type clientCapabilities struct {
	FS struct {
		ReadTextFile  bool `json:"readTextFile"`
		WriteTextFile bool `json:"writeTextFile"`
	} `json:"fs"`
	// Subagents is the unstable subagents capability: an object (even
	// {}) means the client understands child sessions.
	Subagents json.RawMessage `json:"subagents"`
	// Auth.Terminal: the client can run octet in a terminal to log in.
	Auth struct {
		Terminal bool `json:"terminal"`
	} `json:"auth"`
	// Session.Compaction: the client shows compaction_update.
	Session struct {
		Compaction json.RawMessage `json:"compaction"`
	} `json:"session"`
	// Meta.Octet.Notifications: the client takes octet's _octet/*
	// notifications.
	Meta struct {
		Octet struct {
			Notifications bool `json:"notifications"`
		} `json:"octet"`
	} `json:"_meta"`
}

// compaction reports whether the client advertised session.compaction.
func (c clientCapabilities) compaction() bool { return isObject(c.Session.Compaction) }

// extensions reports whether the client asked for _octet/*
// notifications.
func (c clientCapabilities) extensions() bool { return c.Meta.Octet.Notifications }

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '{' }

// caps is what the client advertised at initialize.
func (s *Server) caps() clientCapabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clientCaps
}

// subagents reports whether the client advertised the subagents
// capability.
func (c clientCapabilities) subagents() bool { return isObject(c.Subagents) }

// Serve speaks ACP on in and out until in ends, a write to out fails
// (the client stopped reading) or ctx is done, then cancels the runs
// still going and closes every session.
func Serve(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	if opts.Runtime == nil || opts.Runtime.NewAgent == nil {
		return errors.New("acp: Options.Runtime with a NewAgent is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{opts: opts, log: log, c: newConn(out, log), host: host.New(opts.Runtime, log), mcp: map[string][]host.MCPServer{}, cancels: map[string]int64{}, kids: map[string]func() error{}}
	s.sessions = host.NewRegistry[*acpSession](host.RegistryOptions{MaxOpen: opts.MaxSessions, Logger: log})
	defer s.host.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, s.clientGone)
	defer stop()
	read := make(chan error, 1)
	go func() { read <- s.c.serve(ctx, in, s.handle) }()
	var err error
	select {
	case err = <-read:
	case <-s.c.broken:
		// The client stopped reading: it is gone as surely as when its
		// input ends (which may never come while its process lives on).
		// The reader, blocked on the input, handles nothing more.
		s.log.Warn("the client stopped reading; stopping", "error", s.c.brokenErr)
		cancel()
		s.c.closePending()
	}
	// The client is gone: its runs are cancelled and settled, and their
	// prompts answered (into the void), before the sessions close; so
	// are the prompts read before the end whose runs start after it.
	s.clientGone()
	s.c.wg.Wait()
	s.sessions.CloseAll()
	return err
}

// handle dispatches one request or notification.
func (s *Server) handle(ctx context.Context, method string, raw json.RawMessage) (any, error) {
	switch method {
	case "initialize":
		return s.initialize(raw)
	case "authenticate":
		return s.authenticate(ctx, raw)
	case "session/new":
		return s.sessionNew(ctx, raw)
	case "session/load":
		return s.sessionLoad(ctx, raw)
	case "session/prompt":
		return s.prompt(ctx, raw)
	case "session/cancel":
		return nil, s.cancel(ctx, raw)
	case "session/set_mode":
		return s.setMode(ctx, raw)
	case "session/set_config_option":
		return s.setConfigOption(ctx, raw)
	case "session/list":
		return s.list(ctx, raw)
	case "session/resume":
		return s.sessionResume(ctx, raw)
	case "session/close":
		return s.sessionClose(raw)
	case "session/delete":
		return s.sessionDelete(raw)
	}
	return nil, &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("method %q is not part of octet's ACP dialect", truncate(method, 80))}
}

// decode decodes params into v, refusing what does not decode.
func decode(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return invalidParams("params are required")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return invalidParams("params do not decode: %v", err)
	}
	return nil
}

func (s *Server) initialize(raw json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion *int               `json:"protocolVersion"`
		Capabilities    clientCapabilities `json:"clientCapabilities"`
		ClientInfo      struct {
			Name string `json:"name"`
		} `json:"clientInfo"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	if p.ProtocolVersion == nil {
		return nil, invalidParams("protocolVersion is required (octet speaks ACP version %d)", ProtocolVersion)
	}
	s.mu.Lock()
	s.initialized = true
	s.clientCaps = p.Capabilities
	s.client = p.ClientInfo.Name
	s.mu.Unlock()
	// Negotiation: octet answers with the version it speaks; a client
	// asking for another one decides whether to go on.
	return map[string]any{
		"protocolVersion": ProtocolVersion,
		"agentCapabilities": map[string]any{
			"loadSession": true,
			"sessionCapabilities": map[string]any{
				"list": map[string]any{}, "resume": map[string]any{}, "close": map[string]any{}, "delete": map[string]any{},
			},
			"promptCapabilities": map[string]any{
				"image": true, "audio": false, "embeddedContext": true,
			},
			"mcpCapabilities": map[string]any{"http": true, "sse": false},
		},
		"agentInfo":   map[string]any{"name": "octet", "title": "octet", "version": s.opts.Version},
		"authMethods": authMethods(p.Capabilities),
	}, nil
}

// editor is the sessions' host.AgentSpec.Editor: the client's name
// (ACP has no open documents to list).
func (s *Server) editor() (string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client, nil
}

// ready refuses session methods before initialize.
func (s *Server) ready() (clientCapabilities, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.initialized {
		return clientCapabilities{}, &rpcError{Code: codeInvalidRequest, Message: "initialize first"}
	}
	return s.clientCaps, nil
}

// sessionParams are the common params of session/new, load and resume.
type sessionParams struct {
	SessionID  string            `json:"sessionId"`
	Cwd        string            `json:"cwd"`
	MCPServers []json.RawMessage `json:"mcpServers"`
}

// checkCwd refuses a cwd that is not an absolute directory.
func checkCwd(cwd string) error {
	if cwd == "" || !filepath.IsAbs(cwd) {
		return invalidParams("cwd must be an absolute path, got %q", truncate(cwd, 200))
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return invalidParams("cwd %s is not a directory", truncate(cwd, 200))
	}
	return nil
}

// sessionRequest is the client's capabilities and the params of a
// session/new, load or resume, once initialized.
func (s *Server) sessionRequest(raw json.RawMessage) (clientCapabilities, sessionParams, error) {
	var p sessionParams
	caps, err := s.ready()
	if err == nil {
		err = decode(raw, &p)
	}
	return caps, p, err
}

func (s *Server) sessionNew(ctx context.Context, raw json.RawMessage) (any, error) {
	caps, p, err := s.sessionRequest(raw)
	if err != nil {
		return nil, err
	}
	if err := checkCwd(p.Cwd); err != nil {
		return nil, err
	}
	mcp, err := mcpServersOf(p.MCPServers)
	if err != nil {
		return nil, err
	}
	as, err := s.attach(caps, mcp, func(b host.Binding) (*host.Session, error) {
		// A refused creation leaves nothing behind.
		return s.host.Create(ctx, host.Spec{Cwd: filepath.Clean(p.Cwd)}, b)
	})
	if err != nil {
		return nil, err
	}
	res := as.state()
	res["sessionId"] = as.ID()
	// The client knows the session once it has the answer.
	return followed{res, as.ready}, nil
}

// attach opens a session with open (the host's create or open, given
// this connection's binding: the session's approver, its client files
// and children's hooks, the client's MCP servers) and registers it.
func (s *Server) attach(caps clientCapabilities, mcp []host.MCPServer, open func(host.Binding) (*host.Session, error)) (*acpSession, error) {
	// Room first: a session refused for the bound leaves nothing behind.
	if err := s.sessions.MakeRoom(); err != nil {
		return nil, limitError(err)
	}
	as := &acpSession{srv: s, subagents: caps.subagents()}
	b := host.Binding{
		Approver: as, MCPServers: mcp, Editor: func(string) func() (string, []string) { return s.editor },
		Delegation: func(_ string, cfg *team.Config) { as.delegation(cfg) },
	}
	if caps.FS.ReadTextFile || caps.FS.WriteTextFile {
		b.Documents = func(workspace string) tools.Documents {
			as.files = &clientFiles{s: as, root: workspace, read: caps.FS.ReadTextFile, write: caps.FS.WriteTextFile}
			return as.files
		}
	}
	hs, err := open(b)
	if errors.Is(err, host.ErrAuthRequired) {
		return nil, authRequired(err)
	}
	if err != nil {
		// A missing key at startup is not worth repeating: the person
		// may have logged in since.
		startErr := s.opts.ConfigError
		if _, ok := errors.AsType[*host.AgentError](err); ok && startErr != nil && !errors.Is(err, startErr) && !errors.Is(startErr, host.ErrAuthRequired) {
			err = fmt.Errorf("%w (at startup: %v)", err, startErr)
		}
		return nil, err
	}
	as.OpenSession = host.NewOpenSession(hs, 0, 0)
	got, err := s.sessions.Add(as)
	if err != nil || got != as {
		_ = hs.Close()
	}
	if err != nil {
		return nil, limitError(err)
	}
	if got == as {
		s.mu.Lock()
		s.mcp[as.ID()] = mcp
		s.mu.Unlock()
	}
	return got, nil
}

// limitError is the answer to a session refused for the open-session
// bound (host.LimitError).
func limitError(err error) error {
	if _, ok := errors.AsType[*host.LimitError](err); ok {
		return &rpcError{Code: codeInvalidRequest, Message: fmt.Sprintf("%v (session/cancel, session/close)", err)}
	}
	return err
}

// session returns the open session id, marked used. A session the
// connection's registry released by itself (idle, for the open-session
// bound) is opened again, with the MCP servers it was opened with.
func (s *Server) session(ctx context.Context, id string) (*acpSession, error) {
	caps, err := s.ready()
	if err != nil {
		return nil, err
	}
	as, err := s.sessions.Use(id)
	if errors.Is(err, host.ErrReleased) {
		s.log.Info("reopening a released session", "session", id)
		return s.load(ctx, caps, id, s.mcpOf(id))
	}
	if err != nil {
		return nil, notOpenError(id)
	}
	return as, nil
}

// notOpenError answers a request naming a session that is not open on
// the connection.
func notOpenError(id string) error {
	return &rpcError{Code: codeResourceNotFound, Message: fmt.Sprintf("session %q is not open on this connection: use session/new or session/load", truncate(id, 80))}
}

// mcpOf is the MCP servers session id was opened with.
func (s *Server) mcpOf(id string) []host.MCPServer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mcp[id]
}

// cancel handles session/cancel: the session's prompt is cancelled,
// also one the client sent before this cancel whose run has not started
// yet (Server.cancels), the session's reopening included.
func (s *Server) cancel(ctx context.Context, raw json.RawMessage) error {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if err := decode(raw, &p); err != nil {
		return err
	}
	if _, err := s.ready(); err != nil {
		return err
	}
	if s.cancelKid(p.SessionID) {
		return nil
	}
	known := false
	if n, ok := readOrder(ctx); ok {
		known = s.noteCancel(p.SessionID, n)
	}
	as, ok := s.sessions.Lookup(p.SessionID)
	switch {
	case ok:
		as.cancelPrompt()
	case !known:
		return notOpenError(p.SessionID)
	}
	return nil
}

// noteCancel records that a cancel of session id was read as message n,
// when the connection knows the session; it reports whether it does.
func (s *Server) noteCancel(id string, n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.mcp[id]; !known {
		return false
	}
	s.cancels[id] = max(s.cancels[id], n)
	return true
}

// clientGone records that the client is gone and cancels every
// session's prompt.
func (s *Server) clientGone() {
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
	s.cancelAll()
}

// cancelledAtStart reports whether a prompt read as message n of
// session id (ok false: its read order is not known) is cancelled before
// its run goes on: a session/cancel was read after it, or the client is
// gone.
func (s *Server) cancelledAtStart(id string, n int64, ok bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone || ok && s.cancels[id] > n
}

// cancelAll cancels every session's prompt (the client is gone).
func (s *Server) cancelAll() {
	for _, as := range s.sessions.All() {
		as.cancelPrompt()
	}
}

// update sends one session/update.
func (s *Server) update(sessionID string, u any) {
	if err := s.c.notify("session/update", map[string]any{"sessionId": sessionID, "update": u}); err != nil {
		s.log.Debug("session/update not sent", "error", err)
	}
}

// truncate bounds client text quoted back in errors and logs.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
