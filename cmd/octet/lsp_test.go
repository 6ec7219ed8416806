//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// lspClient speaks Content-Length framed JSON-RPC to a real octet lsp
// process, as an editor does.
// lspCommand returns an `octet lsp` command bounded by timeout (killed when
// the test ends); callers set its environment before startLSP.
func lspCommand(t *testing.T, timeout time.Duration, flags ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return exec.CommandContext(ctx, octetBin, append([]string{"lsp"}, flags...)...)
}

// initialize does the LSP handshake of a client with no capabilities
// for the workspace ws.
func (c *lspClient) initialize(ws string) {
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "capabilities": map[string]any{}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
}

// startLSP starts cmd with piped stdin/stdout, capturing stderr, and
// returns a client on its pipes.
func startLSP(t *testing.T, cmd *exec.Cmd) (*lspClient, io.WriteCloser, *strings.Builder) {
	t.Helper()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &lspClient{t: t, in: stdin, out: bufio.NewReader(stdout)}, stdin, stderr
}

type lspClient struct {
	t    *testing.T
	in   io.WriteCloser
	out  *bufio.Reader
	next int
}

func (c *lspClient) send(msg map[string]any) {
	c.t.Helper()
	msg["jsonrpc"] = "2.0"
	b, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c.in, "Content-Length: %d\r\n\r\n%s", len(b), b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *lspClient) read() map[string]any {
	c.t.Helper()
	n := -1
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			c.t.Fatalf("read header: %v", err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.out, buf); err != nil {
		c.t.Fatalf("read body: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf, &m); err != nil {
		c.t.Fatalf("stdout carried a non-JSON frame: %q", buf)
	}
	return m
}

// call sends a request and returns its result, answering server requests
// with answer and collecting notifications on the way.
func (c *lspClient) call(method string, params any, answer func(map[string]any) any, notes *[]map[string]any) map[string]any {
	c.t.Helper()
	m := c.exchange(method, params, answer, notes)
	if m["error"] != nil {
		c.t.Fatalf("%s: error %v", method, m["error"])
	}
	res, _ := m["result"].(map[string]any)
	return res
}

// exchange sends a request and returns its response message, answering
// server requests with answer and collecting notifications on the way.
func (c *lspClient) exchange(method string, params any, answer func(map[string]any) any, notes *[]map[string]any) map[string]any {
	c.t.Helper()
	c.next++
	id := float64(c.next)
	c.send(map[string]any{"id": c.next, "method": method, "params": params})
	for {
		m := c.read()
		switch {
		case m["id"] == id && m["method"] == nil:
			return m
		case m["method"] != nil && m["id"] != nil: // server → client request
			var result any = nil
			if answer != nil {
				result = answer(m)
			}
			c.send(map[string]any{"id": m["id"], "result": result})
		case m["method"] != nil && notes != nil:
			*notes = append(*notes, m)
		}
	}
}

// TestLSPBinaryAgainstScriptedProvider starts the real octet lsp with
// OPENAI_BASE_URL pointing at a scripted server (the Neovim test's setup)
// and drives a prompt with an approved edit.
func TestLSPBinaryAgainstScriptedProvider(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(editTurns()...)
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("alpha\nbeta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := lspCommand(t, 60*time.Second, "--effect-policy", "controlled")
	cmd.Dir = t.TempDir() // never the workspace: the server must use rootUri
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "capabilities": map[string]any{
		"experimental": map[string]any{"octet": map[string]any{"confirmEffect": true, "events": true}}}, "trace": nil}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	res := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)
	sid, _ := res["sessionId"].(string)
	if sid == "" {
		t.Fatalf("session/new = %v", res)
	}
	pol, _ := res["effectiveToolPolicy"].(map[string]any)
	if ep, _ := pol["effect_policy"].(map[string]any); ep["value"] != "controlled" || ep["source"] != "flag" {
		t.Errorf("effectiveToolPolicy.effect_policy = %v", pol["effect_policy"])
	}
	var notes []map[string]any
	var confirms int
	result := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "change beta"}, func(req map[string]any) any {
		if req["method"] != "octet/confirmEffect" {
			return nil
		}
		confirms++
		p := req["params"].(map[string]any)
		return map[string]any{"decision": "approve", "digest": p["digest"]}
	}, &notes)
	if result["outcome"] != "completed" || confirms != 1 {
		t.Errorf("prompt result %v after %d confirmations\nstderr: %s", result, confirms, stderr.String())
	}
	got, _ := os.ReadFile(filepath.Join(ws, "notes.txt"))
	if string(got) != "alpha\ngamma\n" {
		t.Errorf("notes.txt = %q", got)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("octet lsp exit: %v\nstderr: %s", err, stderr.String())
	}
	var all []string
	for _, n := range notes {
		b, _ := json.Marshal(n)
		all = append(all, string(b))
	}
	assertNoSecret(t, append(all, stderr.String()), home, ws)
}

// TestLSPProjectConfigPerWorkspace: each session's policy comes from its
// own workspace's .octet/config.toml, which can only tighten.
func TestLSPProjectConfigPerWorkspace(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".octet"), 0o755)
	os.WriteFile(filepath.Join(ws, ".octet", "config.toml"), []byte("allow_write = false\neffect_policy = \"unsafe_host\"\n"), 0o644)
	cmd := lspCommand(t, 60*time.Second, "--safe-mode")
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL=http://127.0.0.1:1/v1")
	c, stdin, stderr := startLSP(t, cmd)
	c.initialize(ws)
	res := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)
	pol, _ := res["effectiveToolPolicy"].(map[string]any)
	check := func(key string, value any, source string) {
		t.Helper()
		got, _ := pol[key].(map[string]any)
		if got["value"] != value || got["source"] != source {
			t.Errorf("%s = %v, want %v from %s", key, got, value, source)
		}
	}
	check("allow_write", false, "project_config")
	check("effect_policy", "controlled_bash_approval", "flag") // the project's unsafe_host is ignored
	check("workspace_confinement", true, "flag")
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v", err)
	}
	if !strings.Contains(stderr.String(), "effect_policy ignored") {
		t.Errorf("stderr lacks the ignored-setting warning:\n%s", stderr.String())
	}
}

// TestLSPHostileWorkspaceFiles: a workspace whose AGENTS.md and
// .octet/config.toml are FIFOs (which nobody will ever write) neither
// hangs its own octet/session/new nor another workspace's, and a
// workspace AGENTS.md that links to a file outside is not loaded; each
// skipped file is named in a warning on stderr.
func TestLSPHostileWorkspaceFiles(t *testing.T) {
	home, hostile, other := t.TempDir(), t.TempDir(), t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.md")
	os.WriteFile(outside, []byte("OUTSIDE-SECRET"), 0o600)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(hostile, ".octet"), 0o755))
	must(syscall.Mkfifo(filepath.Join(hostile, ".octet", "config.toml"), 0o644))
	must(syscall.Mkfifo(filepath.Join(hostile, "AGENTS.md"), 0o644))
	must(os.Symlink(outside, filepath.Join(other, "AGENTS.md")))
	// A hang shows as the process killed at this deadline (read: EOF).
	cmd := lspCommand(t, 20*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL=http://127.0.0.1:1/v1")
	c, stdin, stderr := startLSP(t, cmd)
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + hostile, "capabilities": map[string]any{}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	for _, ws := range []string{hostile, other} {
		if res := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil); res["sessionId"] == nil {
			t.Errorf("session/new in %s: %v", ws, res)
		}
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	cmd.Wait()
	for _, want := range []string{
		filepath.Join(hostile, ".octet", "config.toml") + ": skipped: it is a FIFO",
		filepath.Join(hostile, "AGENTS.md") + ": skipped: it is a FIFO",
		filepath.Join(other, "AGENTS.md") + ": skipped: it (or a directory above it) is a symbolic link",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// TestLSPStartupErrors: conflicting flags fail at startup, exit 2, and
// not one byte on stdout (the protocol channel).
func TestLSPStartupErrors(t *testing.T) {
	cmd := exec.Command(octetBin, "lsp", "--safe-mode", "--effect-policy", "controlled")
	cmd.Env = append(os.Environ(), "OCTET_HOME="+t.TempDir())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Run()
	if cmd.ProcessState.ExitCode() != exitUsage || out.Len() != 0 || !strings.Contains(errb.String(), "conflicts") {
		t.Errorf("conflict: exit %d stdout %q stderr %q", cmd.ProcessState.ExitCode(), out.String(), errb.String())
	}
}

// TestLSPConfigTypoServesAnyway: a mistake in config.toml used to make
// octet lsp exit before the handshake (the editor saw only a crash). It
// serves, shows the file:line error with window/showMessage, answers every
// request that needs the configuration with it, and once the file is fixed
// the next session/new works without a restart.
func TestLSPConfigTypoServesAnyway(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	file := filepath.Join(home, "config.toml")
	os.WriteFile(file, []byte("model = \"gpt-5\"\ntools = [\"read\", \"telnet\"]\n"), 0o644)
	cmd := lspCommand(t, 30*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL=http://127.0.0.1:9/v1", "OPENAI_API_KEY="+fakeKey, "GORACE=atexit_sleep_ms=0")
	c, stdin, stderr := startLSP(t, cmd)
	init := c.call("initialize", map[string]any{"rootUri": "file://" + ws, "capabilities": map[string]any{}}, nil, nil)
	if init["capabilities"] == nil {
		t.Fatalf("initialize = %v\nstderr: %s", init, stderr.String())
	}
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	where := file + ":2:"
	m := c.read()
	p, _ := m["params"].(map[string]any)
	if msg, _ := p["message"].(string); m["method"] != "window/showMessage" || p["type"] != float64(1) || !strings.Contains(msg, where) {
		t.Errorf("first message after initialized = %v, want window/showMessage naming %s", m, where)
	}
	for _, req := range []struct {
		method string
		params any
	}{
		{"octet/session/new", map[string]any{}},
		{"workspace/executeCommand", map[string]any{"command": "octet.prompt", "arguments": []any{"hi"}}},
	} {
		c.next++
		c.send(map[string]any{"id": c.next, "method": req.method, "params": req.params})
		m := c.read()
		e, _ := m["error"].(map[string]any)
		if msg, _ := e["message"].(string); m["id"] != float64(c.next) || !strings.Contains(msg, where) || !strings.Contains(msg, `"telnet"`) {
			t.Errorf("%s with a broken config = %v, want an error naming %s", req.method, m, where)
		}
	}
	os.WriteFile(file, []byte("model = \"gpt-5\"\n"), 0o644)
	if res := c.call("octet/session/new", map[string]any{}, nil, nil); res["sessionId"] == nil {
		t.Errorf("session/new after the fix = %v", res)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v\nstderr: %s", err, stderr.String())
	}
}

// TestLSPStdoutClosedMidRun: an editor that closes its end of octet's
// stdout while a run streams used to kill octet with SIGPIPE before the run
// was settled. The write fails instead, the client counts as gone, and the
// run is cancelled and settled durably before octet exits.
func TestLSPStdoutClosedMidRun(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text(strings.Repeat("slow ", 40)).StallAfter(5))
	home, ws := t.TempDir(), t.TempDir()
	cmd := lspCommand(t, 30*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey, "GORACE=atexit_sleep_ms=0")
	stdout, _ := cmd.StdoutPipe()
	stdin, _ := cmd.StdinPipe()
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &lspClient{t: t, in: stdin, out: bufio.NewReader(stdout)}
	c.call("initialize", map[string]any{"rootUri": "file://" + ws, "capabilities": map[string]any{
		"experimental": map[string]any{"octet": map[string]any{"events": true}}}}, nil, nil)
	sid, _ := c.call("octet/session/new", map[string]any{}, nil, nil)["sessionId"].(string)
	c.send(map[string]any{"id": 50, "method": "octet/prompt", "params": map[string]any{"sessionId": sid, "text": "go"}})
	for {
		m := c.read()
		if p, _ := m["params"].(map[string]any); p != nil {
			if ev, _ := p["event"].(map[string]any); ev["kind"] == "output_delta" {
				break
			}
		}
	}
	stdout.Close() // the editor stops reading
	// Its next request's answer cannot be written.
	c.send(map[string]any{"id": 51, "method": "octet/session/list", "params": map[string]any{}})
	err := cmd.Wait()
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		t.Fatalf("octet lsp died of %v\nstderr: %s", st.Signal(), stderr.String())
	}
	_ = err
	sess, ierr := session.Inspect(filepath.Join(home, "sessions", sid+".jsonl"))
	if ierr != nil {
		t.Fatal(ierr)
	}
	defer sess.Close()
	if cps := sess.Checkpoints(); len(cps) != 1 || cps[0].Outcome != "cancelled" {
		t.Errorf("checkpoints %+v, want the run settled as cancelled\nstderr: %s", cps, stderr.String())
	}
}

// TestLSPBinaryWebSocketAndContextReload runs the real octet lsp with
// transport = "websocket": a session's prompts go over one Responses
// WebSocket connection, and after AGENTS.md changes the same open session
// sends the new text without being reopened.
func TestLSPBinaryWebSocketAndContextReload(t *testing.T) {
	srv := providertest.New(t)
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("transport = \"websocket\"\nruntime_profile = \"codex\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agentsMD := filepath.Join(ws, "AGENTS.md")
	if err := os.WriteFile(agentsMD, []byte("rule one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := lspCommand(t, 60*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	c.initialize(ws)
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)
	prompt := func(text string) {
		t.Helper()
		srv.Enqueue(providertest.Text("ok"))
		if res := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": text}, nil, nil); res["outcome"] != "completed" {
			t.Fatalf("prompt %q: %v\nstderr: %s", text, res, stderr.String())
		}
	}
	instructions := func(i int) string { s, _ := srv.Requests()[i].Body["instructions"].(string); return s }
	prompt("first")
	if !strings.Contains(instructions(0), "rule one") {
		t.Fatalf("first request instructions = %q", instructions(0))
	}
	if err := os.WriteFile(agentsMD, []byte("rule two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The watcher debounces; prompt the same open session until a request
	// carries the new rule (the reload is asynchronous, never lost).
	deadline := time.Now().Add(15 * time.Second)
	for n := 1; ; n++ {
		prompt(fmt.Sprintf("again %d", n))
		if got := instructions(n); strings.Contains(got, "rule two") {
			if strings.Contains(got, "rule one") {
				t.Errorf("reloaded instructions still hold the old rule: %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("AGENTS.md change never reached the open session: %q", instructions(n))
		}
		time.Sleep(100 * time.Millisecond)
	}
	reqs := srv.Requests()
	for i, r := range reqs {
		if r.Transport != "websocket" || r.RemoteAddr != reqs[0].RemoteAddr {
			t.Errorf("request %d went over %s from %s, want the session's one websocket (%s)", i, r.Transport, r.RemoteAddr, reqs[0].RemoteAddr)
		}
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("octet lsp exit: %v\nstderr: %s", err, stderr.String())
	}
}

// TestLSPExitWithPipeOpen: after shutdown and exit the process ends at
// once, even though the editor keeps its end of stdin open (Neovim and
// VS Code wait for the process, then kill it).
func TestLSPExitWithPipeOpen(t *testing.T) {
	home := t.TempDir()
	cmd := lspCommand(t, 30*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL=http://127.0.0.1:9/v1", "OPENAI_API_KEY="+fakeKey, "OCTET_LOG=debug",
		"GORACE=atexit_sleep_ms=0") // the race runtime otherwise sleeps 1 s at exit
	c, stdin, stderr := startLSP(t, cmd)
	defer stdin.Close()
	c.call("initialize", map[string]any{"rootUri": "file://" + t.TempDir(), "capabilities": map[string]any{}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	c.call("shutdown", nil, nil, nil)
	start := time.Now()
	c.send(map[string]any{"method": "exit"})
	if err := cmd.Wait(); err != nil {
		t.Errorf("octet lsp exit: %v\nstderr: %s", err, stderr.String())
	}
	// The server's close timeout is 2 s; a prompt exit is far below it.
	if d := time.Since(start); d > time.Second {
		t.Errorf("octet lsp took %v to exit after exit with stdin still open\nstderr: %s", d, stderr.String())
	}
}

// TestLSPWithoutKey: octet lsp without any API key still serves the
// protocol (an editor gets its handshake), and octet/session/new answers
// with the actionable credentials message; no session file is left.
func TestLSPWithoutKey(t *testing.T) {
	home := t.TempDir()
	cmd := lspCommand(t, 30*time.Second)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "OCTET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "OCTET_HOME="+home, "GORACE=atexit_sleep_ms=0")
	c, stdin, stderr := startLSP(t, cmd)
	init := c.call("initialize", map[string]any{"rootUri": "file://" + t.TempDir(), "capabilities": map[string]any{}}, nil, nil)
	if init["capabilities"] == nil {
		t.Fatalf("initialize = %v", init)
	}
	c.send(map[string]any{"id": 99, "method": "octet/session/new", "params": map[string]any{}})
	m := c.read()
	e, _ := m["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if m["id"] != float64(99) || e["code"] != float64(-32013) || !strings.Contains(msg, "OPENAI_API_KEY") || !strings.Contains(msg, filepath.Join(home, "credentials")) {
		t.Errorf("session/new without a key = %v", m)
	}
	if files, _ := filepath.Glob(filepath.Join(home, "sessions", "*")); len(files) != 0 {
		t.Errorf("session files left after the refusal: %v", files)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v\nstderr: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no OpenAI API key") {
		t.Errorf("stderr does not say why: %s", stderr.String())
	}
}

// TestLSPUnreachableProviderExplained: a prompt against a provider nobody
// listens on fails with the actionable sentence in the octet/prompt error
// and in the window/showMessage a stock client is shown.
func TestLSPUnreachableProviderExplained(t *testing.T) {
	home := t.TempDir()
	// Declared without recovery authority, so the refused connection ends
	// the run at once instead of spending the opening allowance.
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("runtime_profile = \"none\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := lspCommand(t, 60*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL=http://127.0.0.1:9/v1", "OPENAI_API_KEY="+fakeKey, "GORACE=atexit_sleep_ms=0")
	c, _, stderr := startLSP(t, cmd)
	c.call("initialize", map[string]any{"rootUri": "file://" + t.TempDir(), "capabilities": map[string]any{}}, nil, nil)
	sid, _ := c.call("octet/session/new", map[string]any{}, nil, nil)["sessionId"].(string)
	var notes []map[string]any
	res := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "hi"}, nil, &notes)
	const hint = "no server is listening at http://127.0.0.1:9/v1: start it, or check OPENAI_BASE_URL"
	if msg, _ := res["error"].(string); res["outcome"] != "failed" || !strings.Contains(msg, hint) {
		t.Errorf("prompt result %v, want failed with %q", res, hint)
	}
	shown := false
	for _, n := range notes {
		if n["method"] == "window/showMessage" {
			msg, _ := n["params"].(map[string]any)["message"].(string)
			shown = shown || strings.Contains(msg, hint)
		}
	}
	if !shown {
		t.Errorf("no window/showMessage with the hint; notifications: %v", notes)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v\nstderr: %s", err, stderr.String())
	}
}
