package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/testlog"
	"github.com/octet-agent/octet/tools"
)

// serverBin is the testdata MCP server (built with the SDK) built once.
var serverBin string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		runHelper()
		return
	}
	if mode := os.Getenv(hostileEnv); mode != "" {
		runHostile(mode)
		return
	}
	dir, err := os.MkdirTemp("", "mcptest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverBin = filepath.Join(dir, "mcptest")
	if runtime.GOOS == "windows" {
		serverBin += ".exe"
	}
	cmd := exec.Command("go", "build", "-o", serverBin, "./testdata/mcptest")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the testdata MCP server: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type fixture struct {
	m      *Manager
	host   *tools.Host
	log    *testlog.Buffer
	broker *tools.Broker
}

func stdioSpec(name string, args ...string) Spec {
	return Spec{Name: name, Command: serverBin, Args: args, StartupTimeout: 30 * time.Second, ToolTimeout: 10 * time.Second}
}

func start(t *testing.T, opts Options) *fixture {
	t.Helper()
	f := &fixture{host: tools.NewHost(), log: &testlog.Buffer{}}
	if opts.Host == nil {
		opts.Host = f.host
	} else {
		f.host = opts.Host
	}
	opts.Logger = slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if opts.Workspace == "" {
		opts.Workspace = t.TempDir()
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	f.m = Start(context.Background(), opts)
	t.Cleanup(func() { f.m.Close() })
	f.broker = tools.NewBroker(tools.BrokerConfig{Policy: tools.UnsafeHost})
	return f
}

func (f *fixture) call(t *testing.T, tool, args string) (tools.Result, tools.ToolPolicyDecision) {
	t.Helper()
	return f.broker.Dispatch(context.Background(), f.host, tools.DispatchRequest{RunID: "r", CallID: "c", Tool: tool, Arguments: json.RawMessage(args)}, tools.DispatchObserver{})
}

func (f *fixture) server(t *testing.T, name string) ServerInfo {
	t.Helper()
	for _, s := range f.m.List() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no server %s in %+v", name, f.m.List())
	return ServerInfo{}
}

func toolState(s ServerInfo, tool string) string {
	for _, ti := range s.Tools {
		if ti.Tool == tool {
			return ti.State
		}
	}
	return ""
}

// waitFor polls cond (a real process restarts on its own time).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStdioToolsThroughHostAndBroker(t *testing.T) {
	f := start(t, Options{Servers: []Spec{stdioSpec("t")}})
	if s := f.server(t, "t"); s.State != StateRunning {
		t.Fatalf("state = %s (%s)", s.State, s.Reason)
	}
	for _, n := range []string{"mcp__t__echo", "mcp__t__add", "mcp__t__pid"} {
		tl, ok := f.host.Lookup(n)
		if !ok {
			t.Fatalf("%s not registered; host has %d tools", n, len(f.host.Tools()))
		}
		if tl.Concurrency() != tools.Sequential || tl.ReplaySafety() != tools.ReplayUnsafe {
			t.Errorf("%s: concurrency %v replay %v", n, tl.Concurrency(), tl.ReplaySafety())
		}
	}
	res, d := f.call(t, "mcp__t__echo", `{"text":"hi"}`)
	if d.Decision != tools.DecisionAllowed || d.Effect != tools.Extension || res.IsError || res.Text != "echo: hi" {
		t.Fatalf("echo: %+v %+v", res, d)
	}
	// readOnlyHint does not lower the classification.
	add, _ := f.host.Lookup("mcp__t__add")
	if eff, err := add.Classify(json.RawMessage(`{"a":1,"b":2}`)); err != nil || eff != tools.Extension {
		t.Errorf("add (readOnlyHint) classified %v, %v", eff, err)
	}
	// A tool failure is a tool error the model sees.
	res, _ = f.call(t, "mcp__t__fail", `{}`)
	if !res.IsError || !strings.Contains(res.Text, "it failed on purpose") {
		t.Errorf("fail: %+v", res)
	}
	// The server's stderr reached the log.
	if !strings.Contains(f.log.String(), "mcptest server starting") {
		t.Errorf("stderr not logged:\n%s", f.log.String())
	}
}

// countingApprover approves everything for the session and counts asks.
type countingApprover struct{ asked int }

func (a *countingApprover) Confirm(_ context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
	a.asked++
	return tools.Approval{Approved: true, Digest: req.Digest, ForSession: true}, nil
}

// recordingRules records every standing approval granted.
type recordingRules struct{ added []tools.StandingRule }

func (r *recordingRules) Rules() []tools.StandingRule { return r.added }
func (r *recordingRules) AddRule(sr tools.StandingRule) (tools.StandingRule, error) {
	sr.ID = "r" + strconv.Itoa(len(r.added))
	r.added = append(r.added, sr)
	return sr, nil
}

// TestExtensionTrustOnlyUnderFullAccess: unsafe_host admits an MCP call
// by policy (implicit trust: nobody is asked, no grant or standing rule
// is recorded); the controlled policies deny it without asking, so no
// approval can ever be persisted for it.
func TestExtensionTrustOnlyUnderFullAccess(t *testing.T) {
	f := start(t, Options{Servers: []Spec{stdioSpec("t")}})
	for _, p := range []tools.Policy{tools.UnsafeHost, tools.Controlled, tools.ControlledBashApproval} {
		ap, rules := &countingApprover{}, &recordingRules{}
		b := tools.NewBroker(tools.BrokerConfig{Policy: p, Approver: ap, Rules: rules})
		_, d := b.Dispatch(context.Background(), f.host, tools.DispatchRequest{CallID: "c", Tool: "mcp__t__add", Arguments: json.RawMessage(`{"a":1,"b":2}`)}, tools.DispatchObserver{})
		want := tools.ReasonPolicyDenied
		if p == tools.UnsafeHost {
			want = tools.ReasonPolicyAdmitted
		}
		if d.Reason != want || d.Effect != tools.Extension || ap.asked != 0 || len(rules.added) != 0 {
			t.Errorf("%s: %+v asked=%d rules=%d", p, d, ap.asked, len(rules.added))
		}
	}
}

func TestArgumentsValidatedBeforeAdmission(t *testing.T) {
	f := start(t, Options{Servers: []Spec{stdioSpec("t")}})
	for _, args := range []string{`{"text":5}`, `{}`, `[]`} {
		res, d := f.call(t, "mcp__t__echo", args)
		if d.Reason != tools.ReasonInvalidArguments || !res.IsError {
			t.Errorf("%s: %+v %+v", args, res, d)
		}
	}
}

func TestResultBoundedAndNeutralized(t *testing.T) {
	f := start(t, Options{Servers: []Spec{stdioSpec("t")}})
	res, d := f.call(t, "mcp__t__big", `{}`)
	if d.Decision != tools.DecisionAllowed {
		t.Fatal(d)
	}
	if len(res.Text) > tools.DefaultMaxResultBytes || res.Details["result_truncated"] != true {
		t.Errorf("result %d bytes, details %v", len(res.Text), res.Details)
	}
	if strings.Contains(res.Text, "\x1b") || strings.Contains(res.Text, "\u202e") || !strings.HasPrefix(res.Text, "red⟨U+202E⟩") {
		t.Errorf("not neutralized: %q", res.Text[:40])
	}
}

func TestMinimalEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-should-not-leak")
	t.Setenv("SOME_USER_SECRET", "x")
	sp := stdioSpec("t")
	sp.Env = map[string]string{"GIVEN": "1"}
	f := start(t, Options{Servers: []Spec{sp}})
	res, _ := f.call(t, "mcp__t__env", `{}`)
	names := strings.Split(res.Text, ",")
	has := func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
	if has("OPENAI_API_KEY") || has("SOME_USER_SECRET") || has("OCTET_PROC_GUARD") || !has("PATH") || !has("GIVEN") {
		t.Errorf("server environment: %s", res.Text)
	}
}

func TestStartupFailureReported(t *testing.T) {
	var changes sync.WaitGroup
	changes.Add(1)
	var once sync.Once
	f := start(t, Options{Servers: []Spec{stdioSpec("bad", "-fail")}, Backoff: time.Hour, OnChange: func() { once.Do(changes.Done) }})
	s := f.server(t, "bad")
	if s.State != StateDown || !strings.Contains(s.Reason, "missing configuration file") {
		t.Errorf("state %s reason %q", s.State, s.Reason)
	}
	changes.Wait()
	if lg := f.log.String(); !strings.Contains(lg, "MCP server failed to start") || !strings.Contains(lg, "missing configuration file") {
		t.Errorf("log:\n%s", lg)
	}
	sp := stdioSpec("nocmd")
	sp.Command = "octet-no-such-mcp-server"
	f = start(t, Options{Servers: []Spec{sp}, Backoff: time.Hour})
	if s := f.server(t, "nocmd"); !strings.Contains(s.Reason, "not found on PATH") {
		t.Errorf("missing command: %+v", s)
	}
}

func TestBlockedServerNeverStarts(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses /bin/sh")
	}
	marker := filepath.Join(t.TempDir(), "started")
	sp := Spec{Name: "b", Command: "/bin/sh", Args: []string{"-c", "touch " + marker + "; exec " + serverBin},
		StartupTimeout: 30 * time.Second, ToolTimeout: time.Second, Blocked: "effect_policy controlled"}
	f := start(t, Options{Servers: []Spec{sp}})
	s := f.server(t, "b")
	if s.State != StateDisabled || s.Reason != "effect_policy controlled" || len(f.host.Tools()) != 0 {
		t.Errorf("blocked server: %+v, %d tools", s, len(f.host.Tools()))
	}
	if _, err := f.m.Enable("b", nil); err == nil {
		t.Error("Enable started a blocked server")
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a blocked server's command ran")
	}
	// The same spec unblocked does run (the marker test can fail).
	sp.Blocked = ""
	start(t, Options{Servers: []Spec{sp}})
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("unblocked server did not run: %v", err)
	}
}

func TestAllowlistAndOffered(t *testing.T) {
	sp := stdioSpec("t")
	sp.Offered = func(n string) bool { return n != "env" }
	f := start(t, Options{Servers: []Spec{sp}, Allowed: func(n string) bool { return n != "mcp__t__pid" }})
	if _, ok := f.host.Lookup("mcp__t__env"); ok {
		t.Error("disabled_tools tool registered")
	}
	if _, ok := f.host.Lookup("mcp__t__pid"); ok {
		t.Error("tool outside the allowlist registered")
	}
	if _, ok := f.host.Lookup("mcp__t__echo"); !ok {
		t.Error("echo missing")
	}
	s := f.server(t, "t")
	if toolState(s, "env") != ToolExcluded || toolState(s, "pid") != ToolExcluded {
		t.Errorf("tools: %+v", s.Tools)
	}
}

func TestChangedDefinitionWithheld(t *testing.T) {
	home := t.TempDir()
	pins := OpenPins(home)
	f := start(t, Options{Servers: []Spec{stdioSpec("t")}, Pins: pins})
	if _, ok := f.host.Lookup("mcp__t__echo"); !ok {
		t.Fatal("echo not registered at first enable")
	}
	f.m.Close()
	st, err := os.Stat(filepath.Join(home, PinsFile))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("pins file mode %v", st.Mode().Perm())
	}
	// The server now presents a different description for echo.
	f = start(t, Options{Servers: []Spec{stdioSpec("t", "-variant", "2")}, Pins: OpenPins(home)})
	s := f.server(t, "t")
	if toolState(s, "echo") != ToolChanged || toolState(s, "add") != ToolActive {
		t.Fatalf("tools: %+v", s.Tools)
	}
	if _, ok := f.host.Lookup("mcp__t__echo"); ok {
		t.Fatal("changed tool registered")
	}
	if !strings.Contains(f.log.String(), "MCP tool withheld") {
		t.Error("withholding not logged")
	}
	res, d := f.call(t, "mcp__t__echo", `{"text":"x"}`)
	if d.Reason != tools.ReasonUnknownTool || !res.IsError {
		t.Errorf("withheld call: %+v", d)
	}
	if _, err := f.m.Enable("t", []string{"pid"}); err == nil {
		t.Error("Enable accepted a tool that is not withheld")
	}
	got, err := f.m.Enable("t", []string{"mcp__t__echo"})
	if err != nil || len(got) != 1 {
		t.Fatalf("Enable: %v %v", got, err)
	}
	if res, _ := f.call(t, "mcp__t__echo", `{"text":"x"}`); res.Text != "echo: x" {
		t.Errorf("re-enabled echo: %+v", res)
	}
	f.m.Close()
	// The new pin persisted.
	f = start(t, Options{Servers: []Spec{stdioSpec("t", "-variant", "2")}, Pins: OpenPins(home)})
	if toolState(f.server(t, "t"), "echo") != ToolActive {
		t.Errorf("re-pin not persisted: %+v", f.server(t, "t").Tools)
	}
}

func pidOf(t *testing.T, f *fixture) int {
	t.Helper()
	res, _ := f.call(t, "mcp__t__pid", `{}`)
	pid, err := strconv.Atoi(res.Text)
	if err != nil {
		t.Fatalf("pid: %+v", res)
	}
	return pid
}

func TestKilledServerComesBack(t *testing.T) {
	var mu sync.Mutex
	changes := 0
	f := start(t, Options{Servers: []Spec{stdioSpec("t")}, Backoff: 50 * time.Millisecond, OnChange: func() {
		mu.Lock()
		changes++
		mu.Unlock()
	}})
	pid := pidOf(t, f)
	killPid(t, pid)
	waitFor(t, "a restart", func() bool { s := f.server(t, "t"); return s.State == StateRunning && s.Restarts >= 1 })
	if got := pidOf(t, f); got == pid {
		t.Fatal("same server process after kill")
	}
	if res, _ := f.call(t, "mcp__t__echo", `{"text":"back"}`); res.Text != "echo: back" {
		t.Errorf("after restart: %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if changes < 2 {
		t.Errorf("OnChange called %d times", changes)
	}
	if !strings.Contains(f.log.String(), "MCP server disconnected; restarting it") {
		t.Errorf("log:\n%s", f.log.String())
	}
}

func TestCallWhileDownIsAToolError(t *testing.T) {
	f := start(t, Options{Servers: []Spec{stdioSpec("t")}, Backoff: time.Hour})
	killPid(t, pidOf(t, f))
	waitFor(t, "the server down", func() bool { return f.server(t, "t").State == StateDown })
	res, d := f.call(t, "mcp__t__echo", `{"text":"x"}`)
	if d.Decision != tools.DecisionAllowed || !res.IsError || !strings.Contains(res.Text, `MCP server "t" is not running`) {
		t.Errorf("call while down: %+v %+v", res, d)
	}
}

func TestStreamableHTTP(t *testing.T) {
	url := startHTTPServer(t, "-token", "secret-token-123")
	sp := Spec{Name: "h", URL: url, BearerTokenEnv: "H_TOKEN", BearerToken: "secret-token-123", Headers: map[string]string{"X-Test": "1"},
		StartupTimeout: 30 * time.Second, ToolTimeout: 10 * time.Second}
	f := start(t, Options{Servers: []Spec{sp}})
	if s := f.server(t, "h"); s.State != StateRunning || s.Transport != "http" {
		t.Fatalf("http server: %+v", s)
	}
	if res, _ := f.call(t, "mcp__h__echo", `{"text":"web"}`); res.Text != "echo: web" {
		t.Errorf("echo over http: %+v", res)
	}
	// Without its token the server refuses, and the reason says so.
	sp.BearerToken = ""
	f = start(t, Options{Servers: []Spec{sp}, Backoff: time.Hour})
	if s := f.server(t, "h"); s.State != StateDown || !strings.Contains(s.Reason, "H_TOKEN is not set") {
		t.Errorf("missing token: %+v", s)
	}
	sp.BearerToken = "wrong-token-456"
	f = start(t, Options{Servers: []Spec{sp}, Backoff: time.Hour})
	if s := f.server(t, "h"); s.State != StateDown || !strings.Contains(strings.ToLower(s.Reason), "unauthorized") {
		t.Errorf("wrong token: %+v", s)
	}
}

// startHTTPServer runs the testdata server on streamable HTTP.
func startHTTPServer(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(serverBin, append([]string{"-http", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("http server: %v", err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		t.Fatalf("http server said %q", line)
	}
	return url
}

// TestToolListChanged: a tool the server adds at run time is listed
// (announced) but withheld as new: it was not pinned at first enable.
func TestToolListChanged(t *testing.T) {
	changes := make(chan struct{}, 16)
	f := start(t, Options{Servers: []Spec{stdioSpec("t")}, OnChange: func() {
		select {
		case changes <- struct{}{}:
		default:
		}
	}})
	for len(changes) > 0 {
		<-changes
	}
	if res, _ := f.call(t, "mcp__t__grow", `{}`); res.Text != "grew" {
		t.Fatalf("grow: %+v", res)
	}
	waitFor(t, "the re-list", func() bool { return toolState(f.server(t, "t"), "grown") == ToolNew })
	if _, ok := f.host.Lookup("mcp__t__grown"); ok {
		t.Error("a tool added after the first enable was registered")
	}
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Error("no change announced")
	}
	if _, err := f.m.Enable("t", []string{"grown"}); err != nil {
		t.Fatal(err)
	}
	if res, _ := f.call(t, "mcp__t__grown", `{}`); res.Text != "grown" {
		t.Errorf("grown after enable: %+v", res)
	}
}

// TestHTTPServerReconnects: a streamable HTTP server that goes away is
// noticed (ping), calls get a tool error, and when it is back on its
// address the connection and its tools return.
func TestHTTPServerReconnects(t *testing.T) {
	addr := "127.0.0.1:" + freePort(t)
	stop := startHTTPServerAt(t, addr)
	sp := Spec{Name: "h", URL: "http://" + addr + "/mcp", StartupTimeout: 5 * time.Second, ToolTimeout: 5 * time.Second}
	f := start(t, Options{Servers: []Spec{sp}, Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, PingEvery: 100 * time.Millisecond})
	if res, _ := f.call(t, "mcp__h__echo", `{"text":"1"}`); res.Text != "echo: 1" {
		t.Fatalf("echo: %+v", res)
	}
	stop()
	waitFor(t, "the server noticed down", func() bool { return f.server(t, "h").State == StateDown })
	if res, _ := f.call(t, "mcp__h__echo", `{"text":"2"}`); !res.IsError {
		t.Errorf("call while down: %+v", res)
	}
	startHTTPServerAt(t, addr)
	waitFor(t, "the reconnect", func() bool { return f.server(t, "h").State == StateRunning })
	if res, _ := f.call(t, "mcp__h__echo", `{"text":"3"}`); res.Text != "echo: 3" {
		t.Errorf("echo after reconnect: %+v", res)
	}
}

// startHTTPServerAt runs the testdata server on streamable HTTP at addr
// and returns a function that kills it.
func startHTTPServerAt(t *testing.T, addr string) (stop func()) {
	t.Helper()
	cmd := exec.Command(serverBin, "-http", addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	t.Cleanup(stop)
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("http server: %v", err)
	}
	return stop
}
