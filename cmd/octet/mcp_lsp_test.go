//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// mcpLSP is a real octet lsp with MCP server "t" configured and a session.
type mcpLSP struct {
	c   *lspClient
	sid string
	srv *providertest.Server
	pid func() int // octet's pid
	// notes are the notifications read so far.
	notes []map[string]any
}

func startMCPLSP(t *testing.T, home string, serverArgs string) *mcpLSP {
	t.Helper()
	bin := mcpTestServer(t)
	cfg := fmt.Sprintf("[mcp_servers.t]\ncommand = %q\nargs = [%s]\nenabled = true\n", bin, serverArgs)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := providertest.New(t)
	ws := t.TempDir()
	c, cmd := launchLSP(t, home, srv.URL(), ws, 120*time.Second)
	res := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)
	sid, _ := res["sessionId"].(string)
	if sid == "" {
		t.Fatalf("session/new = %v", res)
	}
	return &mcpLSP{c: c, sid: sid, srv: srv, pid: func() int { return cmd.Process.Pid }}
}

// launchLSP starts a real octet lsp (flags added) on home and the
// provider at url, initialized for workspace ws with octet's events on;
// it is killed when the test ends.
func launchLSP(t *testing.T, home, url, ws string, limit time.Duration, flags ...string) (*lspClient, *exec.Cmd) {
	t.Helper()
	cmd := lspCommand(t, limit, flags...)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+url, "OPENAI_API_KEY="+fakeKey)
	c, _, _ := startLSP(t, cmd)
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "capabilities": map[string]any{
		"experimental": map[string]any{"octet": map[string]any{"events": true}}}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	return c, cmd
}

// server returns server t of octet/extensions/list.
func (l *mcpLSP) server(t *testing.T) map[string]any {
	t.Helper()
	res := l.c.call("octet/extensions/list", map[string]any{"sessionId": l.sid}, nil, &l.notes)
	servers, _ := res["servers"].([]any)
	if len(servers) != 1 {
		t.Fatalf("extensions/list = %v", res)
	}
	return servers[0].(map[string]any)
}

func toolStateOf(s map[string]any, tool string) string {
	tl, _ := s["tools"].([]any)
	for _, x := range tl {
		m := x.(map[string]any)
		if m["tool"] == tool {
			st, _ := m["state"].(string)
			return st
		}
	}
	return ""
}

var pidRE = regexp.MustCompile(`"output":"(\d+)"`)

// serverPid asks the model-side tool mcp__t__pid through a prompt.
func (l *mcpLSP) serverPid(t *testing.T, notes *[]map[string]any) int {
	t.Helper()
	n := len(l.srv.Requests())
	l.srv.Enqueue(providertest.Reply(providertest.FunctionCall("call_pid", "mcp__t__pid", `{}`)), providertest.Text("ok"))
	res := l.c.call("octet/prompt", map[string]any{"sessionId": l.sid, "text": "pid?"}, nil, notes)
	if res["outcome"] != "completed" {
		t.Fatalf("prompt: %v", res)
	}
	b, _ := json.Marshal(l.srv.Requests()[n+1].Input())
	all := pidRE.FindAllSubmatch(b, -1)
	if all == nil {
		t.Fatalf("no pid in %s", b)
	}
	pid, _ := strconv.Atoi(string(all[len(all)-1][1]))
	return pid
}

// TestLSPMCPServerLifecycle: octet/extensions/list shows the running
// server and its tools; a killed server comes back (extensions_changed,
// restarts counted, its tool answers again); and no server process
// survives octet's SIGKILL.
func TestLSPMCPServerLifecycle(t *testing.T) {
	l := startMCPLSP(t, t.TempDir(), "")
	s := l.server(t)
	if s["state"] != "running" || s["transport"] != "stdio" || toolStateOf(s, "echo") != "active" {
		t.Fatalf("server = %v", s)
	}
	var notes []map[string]any
	pid := l.serverPid(t, &notes)
	from := len(l.notes)
	syscall.Kill(pid, syscall.SIGKILL)
	l.awaitChanged(t, from)
	deadline := time.Now().Add(60 * time.Second)
	for {
		s = l.server(t)
		if s["state"] == "running" && s["restarts"].(float64) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not come back: %v", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	notes = nil
	pid2 := l.serverPid(t, &notes)
	if pid2 == pid {
		t.Fatal("same pid after the kill")
	}
	syscall.Kill(l.pid(), syscall.SIGKILL)
	deadline = time.Now().Add(20 * time.Second)
	for syscall.Kill(pid2, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid2, syscall.SIGKILL)
			t.Fatalf("MCP server %d survived octet's SIGKILL", pid2)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLSPMCPChangedDefinitionWithheld: a server whose tool definition
// changed since it was pinned has that tool withheld (listed as changed,
// not advertised) until octet/extensions/enable re-pins it.
func TestLSPMCPChangedDefinitionWithheld(t *testing.T) {
	home := t.TempDir()
	l := startMCPLSP(t, home, "")
	if toolStateOf(l.server(t), "echo") != "active" {
		t.Fatal("echo not active at first enable")
	}
	l = startMCPLSP(t, home, `"-variant", "2"`)
	s := l.server(t)
	if toolStateOf(s, "echo") != "changed" || toolStateOf(s, "add") != "active" {
		t.Fatalf("after the change: %v", s)
	}
	res := l.c.call("octet/extensions/enable", map[string]any{"sessionId": l.sid, "server": "t", "tools": []string{"echo"}}, nil, &l.notes)
	if p, _ := res["pinned"].([]any); len(p) != 1 || p[0] != "echo" {
		t.Fatalf("enable = %v", res)
	}
	if toolStateOf(l.server(t), "echo") != "active" {
		t.Error("echo not active after enable")
	}
	l.awaitChanged(t, 0)
}

// awaitChanged waits for an extensions_changed event after notification
// index from.
func (l *mcpLSP) awaitChanged(t *testing.T, from int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, n := range l.notes[from:] {
			if p, _ := n["params"].(map[string]any); p != nil {
				if ev, _ := p["event"].(map[string]any); ev["kind"] == "extensions_changed" && p["sessionId"] == l.sid {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no extensions_changed event in %v", l.notes)
		}
		l.server(t)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExecMCPCallNotReplayedAfterCrash: octet is SIGKILLed while an MCP
// call runs; continuing the session records that call as indeterminate
// and never calls the tool again.
func TestExecMCPCallNotReplayedAfterCrash(t *testing.T) {
	calls := filepath.Join(t.TempDir(), "calls")
	x, _ := mcpExecEnv(t, true, "",
		providertest.Reply(providertest.FunctionCall("call_hang", "mcp__t__hang", fmt.Sprintf(`{"path":%q}`, calls))),
	)
	cmd := exec.Command(octetBin, "exec", "--json", "hang")
	cmd.Dir = x.ws
	for k, v := range x.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, _ := os.ReadFile(calls); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the MCP call never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	file := x.oneSession(t)
	id := sessionIDOf(file)
	x.srv.Enqueue(providertest.Text("resumed"))
	r := runCLI(t, x.ws, x.vars, "exec", "--session", id, "again")
	if r.code != exitOK {
		t.Fatalf("continue: %d %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(calls); strings.Count(string(b), "called") != 1 {
		t.Errorf("the MCP tool ran %d times", strings.Count(string(b), "called"))
	}
	ledger, _ := os.ReadFile(file)
	if !strings.Contains(string(ledger), `"crash_recovery":"indeterminate"`) {
		t.Errorf("no indeterminate result in the ledger:\n%s", ledger)
	}
}

// TestLSPMCPStartupFailureLogged: octet lsp logs why a server did not
// start, and octet/extensions/list carries the reason.
func TestLSPMCPStartupFailureLogged(t *testing.T) {
	bin := mcpTestServer(t)
	home, ws := t.TempDir(), t.TempDir()
	cfg := fmt.Sprintf("[mcp_servers.t]\ncommand = %q\nargs = [\"-fail\"]\nenabled = true\n", bin)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := providertest.New(t)
	cmd := lspCommand(t, 60*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	c.initialize(ws)
	res := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)
	l := &mcpLSP{c: c, sid: res["sessionId"].(string)}
	if s := l.server(t); s["state"] != "restarting" || !strings.Contains(s["reason"].(string), "missing configuration file") {
		t.Errorf("server = %v", s)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	cmd.Wait()
	if lg := stderr.String(); !strings.Contains(lg, "MCP server failed to start") || !strings.Contains(lg, "missing configuration file") {
		t.Errorf("octet lsp stderr:\n%s", lg)
	}
}
