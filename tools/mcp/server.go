package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/octet-agent/octet/internal/proc"
	"github.com/octet-agent/octet/internal/sandbox"
	"github.com/octet-agent/octet/tools"
)

const (
	// maxTools bounds the tools one server may present.
	maxTools = 256
	// maxErrors is how many recent errors a server keeps for List.
	maxErrors = 8
	// maxErrorText bounds one error kept or logged.
	maxErrorText = 1024
	// maxFrameBytes bounds one JSON-RPC message from a server: a stdio
	// line, an HTTP answer, an event of an HTTP event stream.
	maxFrameBytes = 8 << 20
	// stableAfter is how long a connection must have lasted for its end
	// to reset the restart backoff.
	stableAfter = 10 * time.Second
	// pingEvery (Options.PingEvery) and pingTimeout are the liveness
	// check of a connected server (a streamable HTTP server that went
	// away closes nothing).
	pingEvery   = 5 * time.Second
	pingTimeout = 5 * time.Second
	// killGrace is how long a stopped server's tree gets between SIGTERM
	// and SIGKILL.
	killGrace = 2 * time.Second
)

// server supervises one configured server.
type server struct {
	m         *Manager
	spec      Spec
	transport string
	prefix    string

	listMu sync.Mutex // serializes listing and registering tools

	mu       sync.Mutex
	state    string
	reason   string
	restarts int
	errs     []string
	sess     *sdk.ClientSession
	conn     *conn // the connection sess belongs to
	loop     *loop // the supervise loop, nil when none runs
	// recycling: a timed-out call stopped the connection (recycle); the
	// supervise loop is restarting it and calls wait for it (await).
	// back is closed (and replaced) whenever that wait is over.
	recycling bool
	back      chan struct{}
	held      bool // Manager.Hold: registers no tools until started again
	presented []*definition
	infos     []ToolInfo

	// relisting: a relist runs; relistAgain: a change was announced
	// since it began, so it runs once more (notifications coalesce).
	relisting, relistAgain bool
}

func newServer(m *Manager, sp Spec) *server {
	s := &server{m: m, spec: sp, transport: "stdio", prefix: "mcp__" + sp.Name + "__", state: StateStarting, back: make(chan struct{})}
	if sp.URL != "" {
		s.transport = "http"
	}
	if sp.Blocked != "" {
		s.state, s.reason = StateDisabled, sp.Blocked
	}
	return s
}

func (s *server) info() ServerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	tl := slices.Clone(s.infos)
	if tl == nil {
		tl = []ToolInfo{}
	}
	return ServerInfo{
		Name: s.spec.Name, Transport: s.transport, State: s.state, Reason: s.reason,
		Restarts: s.restarts, Tools: tl, Errors: slices.Clone(s.errs),
	}
}

// errStopped is why the calls of a connection octet stopped (held,
// closed) were cancelled.
var errStopped = errors.New("the server was stopped")

// callContext is ctx, also cancelled when the connection whose session
// is cs closes, with the connection's end as its cause (errStopped when
// octet stopped it). stop releases it.
func (s *server) callContext(ctx context.Context, cs *sdk.ClientSession) (cctx context.Context, stop func()) {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	cctx, cancel := context.WithCancelCause(ctx)
	if c == nil || c.cs != cs {
		cancel(errStopped) // closed since cs was current
		return cctx, func() { cancel(nil) }
	}
	unhook := context.AfterFunc(c.calls, func() { cancel(context.Cause(c.calls)) })
	return cctx, func() { unhook(); cancel(nil) }
}

// current returns the live session, or why there is none.
func (s *server) current() (*sdk.ClientSession, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		return s.sess, ""
	}
	return nil, s.state + ": " + s.reason
}

// await returns the live session like current, first waiting while the
// server restarts after a recycle (a timed-out call), until it is back,
// its restart failed, it was held or stopped, or ctx ends. The wait is
// bounded by the restart's own bounds: the largest backoff and the
// startup timeout.
func (s *server) await(ctx context.Context) (*sdk.ClientSession, string) {
	timer := time.NewTimer(s.m.opts.MaxBackoff + s.spec.StartupTimeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		recycling, back := s.recycling, s.back
		s.mu.Unlock()
		if !recycling {
			return s.current()
		}
		select {
		case <-back:
		case <-ctx.Done():
			return s.current()
		case <-timer.C:
			return s.current()
		}
	}
}

// recycle stops the connection whose session is cs (a call on it timed
// out: the server may be hung, and every later call would wait out its
// timeout too). The session is withdrawn at once, so no later call
// reaches it; the supervise loop stops the connection (a stdio server's
// process tree), records why and restarts it after its backoff.
func (s *server) recycle(cs *sdk.ClientSession, why string) {
	s.mu.Lock()
	c := s.conn
	if s.sess != cs || c == nil {
		s.mu.Unlock()
		return // already recycled, or restarted since
	}
	s.sess, s.conn, s.recycling = nil, nil, true
	s.state, s.reason = StateDown, why
	s.mu.Unlock()
	select {
	case c.stop <- why:
	default:
	}
	s.m.log.Warn("MCP server recycled after a timed-out call", "server", s.spec.Name, "reason", why)
	s.m.changed()
}

// endRecycleLocked ends the wait of await: the server is back, or will
// not come back by itself. s.mu held.
func (s *server) endRecycleLocked() {
	if s.recycling {
		s.recycling = false
		close(s.back)
		s.back = make(chan struct{})
	}
}

// loop is one running supervise loop: cancel stops it, done is closed
// when it has ended (its connection closed, its process tree stopped).
type loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// restartFailed reports whether the server had given up, marking it
// starting again (the caller starts a supervise loop).
func (s *server) restartFailed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StateFailed || s.loop != nil {
		return false
	}
	s.state, s.reason = StateStarting, "re-enabled"
	return true
}

// start starts the supervise loop unless one runs (up as in supervise)
// and reports whether it did. The caller holds m.runMu.
func (s *server) start(up func()) bool {
	if s.m.closed {
		return false
	}
	s.mu.Lock()
	if s.loop != nil {
		s.mu.Unlock()
		return false
	}
	ctx, cancel := context.WithCancel(s.m.ctx)
	l := &loop{cancel: cancel, done: make(chan struct{})}
	s.loop, s.held = l, false
	if s.state == StateDisabled {
		s.state, s.reason = StateStarting, ""
	}
	s.mu.Unlock()
	s.m.wg.Add(1)
	go func() {
		defer s.m.wg.Done()
		defer close(l.done)
		defer func() {
			s.mu.Lock()
			if s.loop == l {
				s.loop = nil
			}
			s.mu.Unlock()
		}()
		defer cancel()
		s.supervise(ctx, up)
	}()
	return true
}

// hold stops the server's loop, if any, and withdraws its tools; it
// stays listed as disabled for reason. The caller holds m.runMu.
func (s *server) hold(reason string) {
	s.mu.Lock()
	l := s.loop
	s.held = true
	s.mu.Unlock()
	if l != nil {
		l.cancel()
		<-l.done
	}
	s.listMu.Lock()
	defer s.listMu.Unlock()
	s.mu.Lock()
	s.sess, s.conn = nil, nil
	s.endRecycleLocked()
	s.state, s.reason = StateDisabled, reason
	for i := range s.infos {
		if s.infos[i].State == ToolActive {
			s.infos[i].State, s.infos[i].Reason = ToolUnavailable, "the server is stopped: "+reason
		}
	}
	s.mu.Unlock()
	if s.m.opts.Host != nil {
		s.m.opts.Host.ReplaceGroup(s.prefix, nil)
	}
}

// supervise runs the server until ctx ends: connect, wait for the
// connection to end, restart after a bounded backoff. up is called
// once, when the first attempt succeeded or failed.
func (s *server) supervise(ctx context.Context, up func()) {
	var once sync.Once
	report := func() { once.Do(up) }
	defer report()
	backoff, failures := s.m.opts.Backoff, 0
	for {
		began := time.Now()
		c, err := s.connect(ctx)
		connected := err == nil
		if connected {
			report()
			err = c.wait(ctx, s.m.opts.PingEvery)
		}
		if c != nil {
			cause := err
			if ctx.Err() != nil || cause == nil {
				cause = errStopped
			}
			c.close(cause)
		}
		if ctx.Err() != nil {
			s.setSession(nil)
			return
		}
		if connected && time.Since(began) >= stableAfter {
			backoff, failures = s.m.opts.Backoff, 0
		}
		failures++
		s.down(err, connected, failures >= maxFailures)
		report()
		if failures >= maxFailures {
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, s.m.opts.MaxBackoff)
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
	}
}

// down records the end of a connection (or a failed start) and tells
// the log and OnChange.
func (s *server) down(err error, wasUp, giveUp bool) {
	msg := tools.NeutralizeText(clip(s.m.opts.Redact(err.Error()), maxErrorText))
	s.mu.Lock()
	s.sess, s.conn = nil, nil
	if !wasUp || giveUp { // a recycled server that did not come back
		s.endRecycleLocked()
	}
	s.state, s.reason = StateDown, msg
	if giveUp {
		s.state = StateFailed
		s.reason = fmt.Sprintf("gave up after %d consecutive failures: %s", maxFailures, msg)
		for i := range s.infos {
			if s.infos[i].State == ToolActive {
				s.infos[i].State, s.infos[i].Reason = ToolUnavailable, "the server failed; re-enable it with octet/extensions/enable"
			}
		}
	}
	s.errs = append(s.errs, msg)
	if len(s.errs) > maxErrors {
		s.errs = s.errs[len(s.errs)-maxErrors:]
	}
	s.mu.Unlock()
	if giveUp && s.m.opts.Host != nil {
		// A server that will not come back by itself stops advertising
		// tools that could only fail.
		s.m.opts.Host.ReplaceGroup(s.prefix, nil)
	}
	if wasUp {
		s.m.log.Warn("MCP server disconnected; restarting it", "server", s.spec.Name, "reason", msg)
	} else {
		s.m.log.Warn("MCP server failed to start", "server", s.spec.Name, "reason", msg)
	}
	if giveUp {
		s.m.log.Warn("MCP server failed repeatedly; not restarting it (octet/extensions/enable starts it again)", "server", s.spec.Name)
	}
	s.m.changed()
}

// setSession makes c the live connection (nil: none, the loop ended).
func (s *server) setSession(c *conn) {
	s.mu.Lock()
	s.sess, s.conn = nil, c
	if c != nil {
		s.sess = c.cs
		s.state, s.reason = StateRunning, ""
	}
	s.endRecycleLocked()
	s.mu.Unlock()
}

// conn is one connection: the session and, for stdio, its process.
type conn struct {
	cs     *sdk.ClientSession
	p      *proc.Process
	stderr *stderrLog
	stdout *stdoutCheck // a stdio server's stdout
	// refused is the HTTP status with which an HTTP server last refused
	// octet's credentials (0: never).
	refused *atomic.Int32
	// cleanup removes a sandboxed server's private temporary directory.
	cleanup func()
	// stop ends wait with its reason (server.recycle).
	stop chan string
	// calls ends when the connection is closed: the calls on it are
	// cancelled then, since the SDK's Close waits for every call in
	// flight (up to its tool_timeout_secs) before it closes anything.
	calls     context.Context
	stopCalls context.CancelCauseFunc
}

// connect starts the server (a stdio server's process under its guard),
// initializes the session and registers its tools, all within the
// startup timeout.
func (s *server) connect(ctx context.Context) (*conn, error) {
	sctx, cancel := context.WithTimeout(ctx, s.spec.StartupTimeout)
	defer cancel()
	c := &conn{stop: make(chan string, 1)}
	c.calls, c.stopCalls = context.WithCancelCause(context.Background())
	var tr sdk.Transport
	if s.transport == "http" {
		if s.spec.BearerTokenEnv != "" && s.spec.BearerToken == "" {
			return nil, fmt.Errorf("bearer_token_env_var %s is not set in octet's environment: set it (export %s=...) before starting octet, or remove bearer_token_env_var from [mcp_servers.%s]", s.spec.BearerTokenEnv, s.spec.BearerTokenEnv, s.spec.Name)
		}
		c.refused = new(atomic.Int32)
		tr = &sdk.StreamableClientTransport{Endpoint: s.spec.URL, HTTPClient: s.httpClient(c.refused), MaxRetries: 1, MaxEventSize: maxFrameBytes}
	} else {
		var err error
		if tr, err = s.startProcess(c); err != nil {
			return nil, err
		}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "octet", Version: "1"}, &sdk.ClientOptions{
		// roots, without listChanged: the workspace is the session's
		// and never changes.
		Capabilities: &sdk.ClientCapabilities{RootsV2: &sdk.RootCapabilities{}},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			s.announceRelist()
		},
	})
	if ws := s.m.opts.Workspace; ws != "" {
		client.AddRoots(&sdk.Root{URI: fileURI(ws), Name: filepath.Base(ws)})
	}
	cs, err := client.Connect(sctx, tr, nil)
	if err != nil {
		return c, s.startError(c, fmt.Errorf("initialize: %w", err), sctx)
	}
	c.cs = cs
	if _, err := s.list(sctx, cs, false); err != nil {
		return c, s.startError(c, fmt.Errorf("list tools: %w", err), sctx)
	}
	s.setSession(c)
	s.m.changed()
	return c, nil
}

// startError adds what the server wrote to stderr, and the timeout, to a
// failed start.
func (s *server) startError(c *conn, err error, ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		advice := fmt.Sprintf(": if the server is only slow to start, raise startup_timeout_secs in [mcp_servers.%s]", s.spec.Name)
		if s.spec.FromClient {
			advice = "" // the client's server: no table to raise it in
		}
		err = fmt.Errorf("%w (startup_timeout_secs %d exceeded%s)", err, int(s.spec.StartupTimeout.Seconds()), advice)
	}
	if c.p != nil {
		select {
		case <-c.p.Exited():
			st, _ := c.p.Wait()
			err = fmt.Errorf("%w; the server process ended (%s)", err, st)
		default:
		}
	}
	err = c.withStdoutHint(err)
	if c.refused != nil {
		if code := c.refused.Load(); code != 0 {
			err = fmt.Errorf("%w; %s", err, s.credentialsAdvice(int(code)))
		}
	}
	if c.stderr != nil {
		if tail := c.stderr.tail(); tail != "" {
			err = fmt.Errorf("%w; its stderr ended with: %s", err, tail)
		}
	}
	return err
}

// credentialsAdvice says what to do when an HTTP server refused octet's
// credentials with code.
func (s *server) credentialsAdvice(code int) string {
	where := fmt.Sprintf("set bearer_token_env_var (or headers) in [mcp_servers.%s] to a valid token", s.spec.Name)
	if s.spec.FromClient {
		where = "the client that handed the server in must send a valid token in its headers"
	}
	return fmt.Sprintf("the server refused octet's credentials (HTTP %d %s): %s; octet does not sign in with OAuth", code, http.StatusText(code), where)
}

// startProcess starts a stdio server under a process guard.
func (s *server) startProcess(c *conn) (sdk.Transport, error) {
	ws := s.m.opts.Workspace
	env := serverEnv(s.spec.Env, ws)
	path, err := lookCommand(s.spec.Command, pathOf(env))
	if err != nil {
		return nil, err
	}
	dir := s.spec.Cwd
	if dir == "" {
		dir = s.m.opts.Dir
	}
	if dir == "" {
		return nil, errors.New("no working directory for the server: set cwd in its configuration")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.spec.Command, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("start %s: %w", s.spec.Command, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("start %s: %w", s.spec.Command, err)
	}
	box, env, err := s.sandbox(c, path, env)
	if err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("start %s: %w", s.spec.Command, err)
	}
	p, err := proc.Start(proc.Command{
		Path: path, Args: append([]string{s.spec.Command}, s.spec.Args...), Dir: dir,
		Env: env, Stdin: inR, Stdout: outW, Stderr: errW, Grace: killGrace, Sandbox: box,
	})
	closeAll(inR, outW, errW)
	if err != nil {
		closeAll(inW, outR, errR)
		if c.cleanup != nil {
			c.cleanup()
		}
		return nil, fmt.Errorf("start %s: %w", s.spec.Command, err)
	}
	c.p = p
	c.stderr = newStderrLog(s.m.log, s.spec.Name, s.m.opts.Redact)
	go c.stderr.drain(errR)
	c.stdout = newStdoutCheck(outR)
	return &sdk.IOTransport{Reader: c.stdout, Writer: inW, MaxLineLength: maxFrameBytes}, nil
}

// sandbox is the sandbox Spec of a stdio server whose configuration asks
// for one (nil otherwise), with its environment pointing TMPDIR at the
// server's private temporary directory, removed when the server stops.
// The server's program is readable wherever it is. A host without a
// sandbox refuses to start such a server rather than run it unconfined.
func (s *server) sandbox(c *conn, path string, env []string) (*sandbox.Spec, []string, error) {
	p := s.spec.Sandbox
	if p != tools.SandboxReadOnly && p != tools.SandboxWorkspaceWrite {
		return nil, env, nil
	}
	st := sandbox.Probe()
	if !st.Available() {
		return nil, nil, fmt.Errorf("its configuration asks for the %s sandbox, which this host cannot apply: %s", p, st.Reason)
	}
	tmp, err := os.MkdirTemp("", "octet-mcp-")
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox temporary directory: %w", err)
	}
	c.cleanup = func() { os.RemoveAll(tmp) }
	spec := &sandbox.Spec{
		Profile: p, Workspace: s.m.opts.Workspace, Shell: path, TempDir: tmp,
		Protected: sandbox.ProtectedNames, Namespace: st.Namespaces,
	}
	for _, r := range s.spec.SandboxPaths.ReadPaths {
		if filepath.IsAbs(r) {
			spec.ReadPaths = append(spec.ReadPaths, r)
		}
	}
	for _, w := range s.spec.SandboxPaths.WritePaths {
		if filepath.IsAbs(w) {
			spec.WritePaths = append(spec.WritePaths, w)
		}
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "TMPDIR=") {
			out = append(out, kv)
		}
	}
	return spec, append(out, "TMPDIR="+tmp), nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// lookCommand finds a command without a slash on path (the server's
// PATH, its workspace entries already removed), an absolute command as
// it is.
func lookCommand(cmd, path string) (string, error) {
	if strings.ContainsRune(cmd, '/') || (runtime.GOOS == "windows" && strings.ContainsRune(cmd, '\\')) {
		if !filepath.IsAbs(cmd) {
			return "", fmt.Errorf("command %q: a path must be absolute", cmd)
		}
		return cmd, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		// LookPath of a path checks that file (with PATHEXT on Windows).
		if p, err := exec.LookPath(filepath.Join(dir, cmd)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found on PATH (entries in the workspace and relative entries are not searched): give an absolute command", cmd)
}

// fileURI is the file: URI of an absolute path.
func fileURI(p string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(p)}
	if runtime.GOOS == "windows" {
		u.Path = "/" + u.Path
	}
	return u.String()
}

// wait blocks until the connection ends (the session closed, the process
// exited, the server stopped answering pings) or ctx is done.
func (c *conn) wait(ctx context.Context, every time.Duration) error {
	closed := make(chan error, 1)
	go func() { closed <- c.cs.Wait() }()
	var exited <-chan struct{}
	if c.p != nil {
		exited = c.p.Exited()
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-closed:
			if err == nil {
				err = errors.New("connection closed")
			}
			return c.withStdoutHint(fmt.Errorf("connection to the server closed: %w", err))
		case <-exited:
			st, _ := c.p.Wait()
			return fmt.Errorf("the server process ended (%s)", st)
		case why := <-c.stop:
			return errors.New(why)
		case <-tick.C:
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := c.cs.Ping(pctx, nil)
			cancel()
			if err != nil && ctx.Err() == nil && transportFailure(err) {
				return fmt.Errorf("the server stopped answering: %w", err)
			}
		}
	}
}

// transportFailure tells a lost connection from a server's JSON-RPC
// error answer (a server without ping is still alive).
func transportFailure(err error) bool {
	_, answered := errors.AsType[*jsonrpc.Error](err)
	return !answered
}

// withStdoutHint adds to err what to do about a stray stdout line, if
// the server wrote one.
func (c *conn) withStdoutHint(err error) error {
	if c.stdout == nil {
		return err
	}
	if h := c.stdout.hint(); h != "" {
		return fmt.Errorf("%w; %s", err, h)
	}
	return err
}

// close cancels the calls in flight (for cause: why the connection
// ended), ends the session and stops a stdio server's whole process
// tree.
func (c *conn) close(cause error) {
	c.stopCalls(cause)
	if c.cs != nil {
		c.cs.Close()
	}
	if c.p != nil {
		c.p.Terminate()
		c.p.Wait()
	}
	if c.cleanup != nil {
		c.cleanup()
	}
}

// httpClient sends the configured headers and bearer token and never
// follows a redirect (it would carry them elsewhere). refused keeps the
// status of the last answer refusing them (401, 403).
func (s *server) httpClient(refused *atomic.Int32) *http.Client {
	return &http.Client{
		Transport: &headerTransport{base: http.DefaultTransport, headers: s.spec.Headers, token: s.spec.BearerToken, refused: refused},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	token   string
	refused *atomic.Int32
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	if t.token != "" {
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		t.refused.Store(int32(resp.StatusCode))
	}
	if err == nil && resp.Body != nil && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The SDK reads a JSON answer (or an error body) whole: bound
		// it as a stdio line is (an event stream is bounded per event).
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: maxFrameBytes}
	}
	return resp, err
}

// boundedBody fails a read once more than its bound has been read.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errBodyTooLarge
	}
	return n, err
}

// errBodyTooLarge says an HTTP server's answer exceeded maxFrameBytes.
var errBodyTooLarge = fmt.Errorf("the server's HTTP response is larger than %d MiB", maxFrameBytes>>20)

// announceRelist re-reads the tool list after the server announced a
// change, on a goroutine of its own. Announcements made while one
// re-read runs are coalesced into one more, so a server flooding
// tools/list_changed gets a few tools/list requests, not one each.
func (s *server) announceRelist() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.relisting {
		s.relistAgain = true
		return
	}
	s.relisting = true
	go func() {
		for {
			s.relist()
			s.mu.Lock()
			again := s.relistAgain
			s.relistAgain, s.relisting = false, again
			s.mu.Unlock()
			if !again {
				return
			}
		}
	}()
}

// relist re-reads the tool list after the server announced a change,
// until the connection closes (its Close waits for the request).
func (s *server) relist() {
	cs, _ := s.current()
	if cs == nil {
		return
	}
	live, stop := s.callContext(s.m.ctx, cs)
	defer stop()
	ctx, cancel := context.WithTimeout(live, s.spec.StartupTimeout)
	defer cancel()
	changed, err := s.list(ctx, cs, true)
	if err != nil {
		if live.Err() != nil {
			return // the connection closed: nothing to list
		}
		s.m.log.Warn("MCP server tool list failed", "server", s.spec.Name, "reason", clip(s.m.opts.Redact(err.Error()), maxErrorText))
		return
	}
	if changed {
		s.m.changed()
	}
}

// list reads the server's tools, checks them against their pins and
// registers the admitted ones in the host; when onlyChanged is set, a
// list the same as the one presented before is left as registered.
// changed reports whether the list was registered. A server whose
// capabilities name no tools (one offering only resources or prompts)
// and that has no tools/list method has none.
func (s *server) list(ctx context.Context, cs *sdk.ClientSession, onlyChanged bool) (changed bool, err error) {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	defs, err := listTools(ctx, cs)
	if err != nil {
		return false, err
	}
	markDuplicates(defs)
	if onlyChanged && s.samePresented(defs) {
		return false, nil
	}
	return true, s.register(defs)
}

// maxToolPages bounds the pages of one tools/list: a server whose list
// never ends (a next cursor on every page, its pages empty) would
// otherwise be asked until the startup timeout.
const maxToolPages = 64

// listTools reads the server's tools, page by page, at most maxTools of
// them in maxToolPages pages. A server whose capabilities name no tools
// and that has no tools/list method has none.
func listTools(ctx context.Context, cs *sdk.ClientSession) ([]*definition, error) {
	var defs []*definition
	params := &sdk.ListToolsParams{}
	for range maxToolPages {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			if len(defs) == 0 && params.Cursor == "" && !offersTools(cs) && methodNotFound(err) {
				return nil, nil // no tools
			}
			return nil, err
		}
		for _, t := range res.Tools {
			if len(defs) == maxTools {
				return nil, fmt.Errorf("the server presents more than %d tools", maxTools)
			}
			defs = append(defs, newDefinition(t))
		}
		if res.NextCursor == "" {
			return defs, nil
		}
		params = &sdk.ListToolsParams{Cursor: res.NextCursor}
	}
	return nil, fmt.Errorf("the server's tool list did not end after %d pages (each tools/list answer named a next page): a server bug; update or fix the server", maxToolPages)
}

// samePresented reports whether defs are the definitions presented
// before, in the same order.
func (s *server) samePresented(defs []*definition) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.presented != nil && slices.EqualFunc(s.presented, defs, func(a, b *definition) bool {
		return a.name == b.name && a.digest == b.digest && a.invalid == b.invalid
	})
}

// markDuplicates makes invalid every valid definition whose name
// another one has too: which of them a call would reach is the server's
// choice, not the one pinned or shown. (An invalid one keeps its reason;
// its name is only a shown form.)
func markDuplicates(defs []*definition) {
	count := make(map[string]int, len(defs))
	for _, d := range defs {
		if d.invalid == "" {
			count[d.name]++
		}
	}
	for _, d := range defs {
		if d.invalid == "" && count[d.name] > 1 {
			d.invalid = fmt.Sprintf("the server presents more than one tool named %q", d.name)
		}
	}
}

// offersTools reports whether the server's capabilities name tools.
func offersTools(cs *sdk.ClientSession) bool {
	ir := cs.InitializeResult()
	return ir != nil && ir.Capabilities != nil && ir.Capabilities.Tools != nil
}

// methodNotFound reports whether err is the server's "method not found"
// answer.
func methodNotFound(err error) bool {
	je, ok := errors.AsType[*jsonrpc.Error](err)
	return ok && je.Code == jsonrpc.CodeMethodNotFound
}

// register decides each presented tool's state and replaces the
// server's group in the host with the active ones.
func (s *server) register(defs []*definition) error {
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if held {
		// Manager.Hold withdrew the tools; a late listing must not
		// bring them back.
		return nil
	}
	pins, known := s.m.opts.Pins.Server(s.spec.Name)
	pinErr := s.m.opts.Pins.Check()
	if pinErr != nil {
		s.m.log.Warn("MCP tools withheld: the pins cannot be read", "server", s.spec.Name, "reason", pinErr.Error())
	}
	if !known {
		// First enable: pin every valid definition as presented (one
		// made valid later appears as new).
		pins = make(map[string]string, len(defs))
		for _, d := range defs {
			if d.invalid == "" {
				pins[d.name] = d.digest
			}
		}
		if err := s.m.opts.Pins.Set(s.spec.Name, pins); err != nil {
			return fmt.Errorf("pin tool definitions: %w", err)
		}
	}
	var active []tools.Tool
	infos := make([]ToolInfo, 0, len(defs))
	for _, d := range defs {
		full := s.prefix + d.name
		in := ToolInfo{Name: full, Tool: d.name, Digest: d.digest, State: ToolActive}
		pinned, ok := pins[d.name]
		switch {
		case d.invalid != "":
			in.State, in.Reason = ToolInvalid, d.invalid
		case len(full) > maxName:
			in.State, in.Reason = ToolInvalid, "mcp__<server>__<tool> is longer than 64 characters"
		case !ok && pinErr != nil:
			in.State, in.Reason = ToolNew, "withheld: "+pinErr.Error()
		case !ok:
			in.State, in.Reason = ToolNew, "not pinned: it appeared after the server was first enabled; re-enable it to use it"
		case pinned != d.digest:
			in.State, in.PinnedDigest, in.Reason = ToolChanged, pinned, "its definition changed since it was pinned; review it and re-enable it to use it"
		case s.spec.Offered != nil && !s.spec.Offered(d.name):
			in.State, in.Reason = ToolExcluded, "enabled_tools / disabled_tools"
		case s.m.opts.Allowed != nil && !s.m.opts.Allowed(full):
			in.State, in.Reason = ToolExcluded, "not in the tools allowlist"
		}
		if in.State == ToolActive {
			active = append(active, &Tool{srv: s, def: d, name: full})
		}
		if in.State == ToolChanged || in.State == ToolNew {
			s.m.log.Warn("MCP tool withheld", "server", s.spec.Name, "tool", d.name, "state", in.State)
		}
		infos = append(infos, in)
	}
	if s.m.opts.Host != nil {
		if err := s.m.opts.Host.ReplaceGroup(s.prefix, active); err != nil {
			// A schema the host cannot compile: that tool is left out.
			s.m.log.Warn("MCP tools not registered", "server", s.spec.Name, "reason", clip(err.Error(), maxErrorText))
			for i := range infos {
				if infos[i].State == ToolActive {
					if _, ok := s.m.opts.Host.Lookup(infos[i].Name); !ok {
						infos[i].State, infos[i].Reason = ToolInvalid, "its input schema is not a usable JSON schema for an object"
					}
				}
			}
		}
	}
	s.mu.Lock()
	s.presented, s.infos = defs, infos
	s.mu.Unlock()
	return nil
}

// repin pins the presented definitions of the named withheld tools
// (every withheld tool when names is empty) and registers them.
func (s *server) repin(names []string) ([]string, error) {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	s.mu.Lock()
	defs, infos := s.presented, s.infos
	s.mu.Unlock()
	pins, _ := s.m.opts.Pins.Server(s.spec.Name)
	if pins == nil {
		pins = map[string]string{}
	}
	var done []string
	for i, d := range defs {
		if st := infos[i].State; st != ToolChanged && st != ToolNew {
			continue
		}
		if len(names) > 0 && !slices.Contains(names, d.name) && !slices.Contains(names, s.prefix+d.name) {
			continue
		}
		pins[d.name] = d.digest
		done = append(done, d.name)
	}
	for _, n := range names {
		if !slices.Contains(done, strings.TrimPrefix(n, s.prefix)) {
			return nil, fmt.Errorf("MCP server %q has no withheld tool %q", s.spec.Name, n)
		}
	}
	if err := s.m.opts.Pins.Set(s.spec.Name, pins); err != nil {
		return nil, fmt.Errorf("pin tool definitions: %w", err)
	}
	return done, s.register(defs)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
