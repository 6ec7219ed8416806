//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// hostileWorkspace is a workspace that shadows what a user-configured
// MCP command would find from inside it: a node_modules/.bin program
// (what npx runs) and a Python module named like the configured one.
// Each decoy touches decoy when it runs.
func hostileWorkspace(t *testing.T, decoy string) string {
	t.Helper()
	ws := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\ntouch %s\nexit 1\n", decoy)
	bin := filepath.Join(ws, "node_modules", ".bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "mcp-srv"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	py := fmt.Sprintf("open(%q, 'w').close()\nraise SystemExit(1)\n", decoy)
	if err := os.WriteFile(filepath.Join(ws, "octet_mcp_decoy.py"), []byte(py), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws
}

// authorityLSP is a real octet lsp launched as editors launch it: no
// policy flag (full access), with one user-configured MCP server.
type authorityLSP struct {
	c       *lspClient
	srv     *providertest.Server
	ws      string
	started string // touched by the configured server when it starts
	decoy   string // touched by any of the workspace's decoys
	notes   []map[string]any
}

// startAuthorityLSP configures server t as `sh -c "touch started; exec
// mcp-srv"` with node_modules/.bin (relative, as a project's npm setup
// would put it) before the real program's directory on its PATH.
func startAuthorityLSP(t *testing.T) *authorityLSP {
	t.Helper()
	bin := mcpTestServer(t)
	home, tmp := t.TempDir(), t.TempDir()
	good := filepath.Join(tmp, "good")
	if err := os.MkdirAll(good, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(good, "mcp-srv")); err != nil {
		t.Fatal(err)
	}
	a := &authorityLSP{started: filepath.Join(tmp, "started"), decoy: filepath.Join(tmp, "decoy-ran")}
	a.ws = hostileWorkspace(t, a.decoy)
	cfg := fmt.Sprintf("[mcp_servers.t]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"touch %s; exec mcp-srv\"]\nenabled = true\nenv = { PATH = \"node_modules/.bin:%s:/usr/bin:/bin\" }\n", a.started, good)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a.srv = providertest.New(t)
	a.c, _ = launchLSP(t, home, a.srv.URL(), a.ws, 120*time.Second)
	return a
}

// server returns server t of the session's octet/extensions/list.
func (a *authorityLSP) server(t *testing.T, sid string) map[string]any {
	t.Helper()
	res := a.c.call("octet/extensions/list", map[string]any{"sessionId": sid}, nil, &a.notes)
	servers, _ := res["servers"].([]any)
	if len(servers) != 1 {
		t.Fatalf("extensions/list = %v", res)
	}
	return servers[0].(map[string]any)
}

// offered prompts once and returns the names of the tools the request
// offered the model.
func (a *authorityLSP) offered(t *testing.T, sid string) []string {
	t.Helper()
	n := len(a.srv.Requests())
	a.srv.Enqueue(providertest.Text("ok"))
	if res := a.c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "hi"}, nil, &a.notes); res["outcome"] != "completed" {
		t.Fatalf("prompt: %v", res)
	}
	var names []string
	tl, _ := a.srv.Requests()[n].Body["tools"].([]any)
	for _, x := range tl {
		m, _ := x.(map[string]any)
		if name, _ := m["name"].(string); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func hasPrefixed(names []string, prefix string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestLSPAuthorityFollowsSessionPolicy: editors launch octet with full
// access and create sessions that ask. Such a session starts no MCP
// server and is offered neither MCP nor delegation tools; loosened to
// unsafe_host (within the launch policy) its server starts and both are
// offered; tightened again, the server is stopped before the call
// returns and neither is offered. Wherever it starts, a configured
// command never runs what the workspace provides.
func TestLSPAuthorityFollowsSessionPolicy(t *testing.T) {
	a := startAuthorityLSP(t)
	res := a.c.call("octet/session/new", map[string]any{"cwd": a.ws, "effectPolicy": "controlled_bash_approval"}, nil, &a.notes)
	sid, _ := res["sessionId"].(string)
	if sid == "" {
		t.Fatalf("session/new = %v", res)
	}
	if s := a.server(t, sid); s["state"] != "disabled" || !strings.Contains(fmt.Sprint(s["reason"]), "controlled_bash_approval (this session)") {
		t.Errorf("ask session: server = %v", s)
	}
	names := a.offered(t, sid)
	if hasPrefixed(names, "mcp__") || hasPrefixed(names, "agents_") {
		t.Errorf("ask session offered %v", names)
	}
	if exists(a.started) {
		t.Fatal("the MCP server started for a session that asks")
	}

	a.c.call("octet/session/setPolicy", map[string]any{"sessionId": sid, "effectPolicy": "unsafe_host"}, nil, &a.notes)
	deadline := time.Now().Add(60 * time.Second)
	for a.server(t, sid)["state"] != "running" {
		if time.Now().After(deadline) {
			t.Fatalf("server did not start after loosening: %v", a.server(t, sid))
		}
		time.Sleep(20 * time.Millisecond)
	}
	names = a.offered(t, sid)
	if !hasPrefixed(names, "mcp__t__") || !hasPrefixed(names, "agents_") {
		t.Errorf("unsafe_host session offered %v", names)
	}
	if exists(a.decoy) {
		t.Fatal("the workspace's node_modules/.bin program ran")
	}
	pid := serverPidOf(t, "mcp-srv")

	a.c.call("octet/session/setPolicy", map[string]any{"sessionId": sid, "effectPolicy": "controlled"}, nil, &a.notes)
	if s := a.server(t, sid); s["state"] != "disabled" {
		t.Errorf("tightened session: server = %v", s)
	}
	deadline = time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the MCP server %d still runs after the session was tightened", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	names = a.offered(t, sid)
	if hasPrefixed(names, "mcp__") || hasPrefixed(names, "agents_") {
		t.Errorf("tightened session offered %v", names)
	}
}

// serverPidOf finds the newest process (the highest pid) whose command
// line starts with prog or has it as an argument (the configured server
// execs into its program), from /proc.
func serverPidOf(t *testing.T, prog string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	best := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= best {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(b), "\x00")
		if slices.ContainsFunc(args, func(a string) bool { return a == prog || filepath.Base(a) == prog }) {
			best = pid
		}
	}
	if best == 0 {
		t.Fatalf("no process running %s", prog)
	}
	return best
}

// TestLSPSessionResumedAtItsPolicy: a session that recorded an ask
// policy is reopened (a new octet, as after a restart) without starting
// its MCP server, whatever the launch policy.
func TestLSPSessionResumedAtItsPolicy(t *testing.T) {
	a := startAuthorityLSP(t)
	res := a.c.call("octet/session/new", map[string]any{"cwd": a.ws, "effectPolicy": "controlled"}, nil, &a.notes)
	sid, _ := res["sessionId"].(string)
	// Fork it too: the fork asks as its source does.
	a.srv.Enqueue(providertest.Text("ok"))
	a.c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "hi"}, nil, &a.notes)
	tr := a.c.call("octet/session/transcript", map[string]any{"sessionId": sid}, nil, &a.notes)
	entries, _ := tr["entries"].([]any)
	if len(entries) == 0 {
		t.Fatalf("transcript = %v", tr)
	}
	last, _ := entries[len(entries)-1].(map[string]any)
	fork := a.c.call("octet/session/fork", map[string]any{"sessionId": sid, "entryId": last["id"]}, nil, &a.notes)
	fid, _ := fork["sessionId"].(string)
	if s := a.server(t, fid); s["state"] != "disabled" {
		t.Errorf("fork of an ask session: server = %v", s)
	}
	if names := a.offered(t, fid); hasPrefixed(names, "mcp__") || hasPrefixed(names, "agents_") {
		t.Errorf("fork of an ask session offered %v", names)
	}
	a.c.call("octet/session/close", map[string]any{"sessionId": sid}, nil, &a.notes)
	a.c.call("octet/session/resume", map[string]any{"sessionId": sid}, nil, &a.notes)
	if s := a.server(t, sid); s["state"] != "disabled" {
		t.Errorf("resumed ask session: server = %v", s)
	}
	if exists(a.started) {
		t.Fatal("the MCP server started for a session that asks")
	}
}

// TestLSPMCPModuleNotFromWorkspace: `python3 -m NAME` configured by the
// user never imports a module the workspace holds under NAME (the server
// does not start in the workspace). Before, the repository's
// octet_mcp_decoy.py ran with the user's authority.
func TestLSPMCPModuleNotFromWorkspace(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	home, tmp := t.TempDir(), t.TempDir()
	decoy := filepath.Join(tmp, "decoy-ran")
	ws := hostileWorkspace(t, decoy)
	cfg := fmt.Sprintf("[mcp_servers.t]\ncommand = %q\nargs = [\"-m\", \"octet_mcp_decoy\"]\nenabled = true\nstartup_timeout_secs = 20\n", py)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := launchLSP(t, home, providertest.New(t).URL(), ws, 60*time.Second)
	res := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)
	a := &authorityLSP{c: c}
	s := a.server(t, res["sessionId"].(string))
	if exists(decoy) {
		t.Fatal("python3 -m imported the workspace's module")
	}
	if !strings.Contains(fmt.Sprint(s["reason"]), "No module named") {
		t.Errorf("server = %v", s)
	}
}

// TestACPModeStopsAndStartsClientMCPServers: the MCP servers an ACP
// client hands in follow the session's mode, not the launch policy: a
// mode that asks stops them (their tools no longer offered), unsafe_host
// starts them again, and a session loaded at a mode that asks never
// starts them.
func TestACPModeStopsAndStartsClientMCPServers(t *testing.T) {
	bin := mcpTestServer(t)
	home, ws := t.TempDir(), t.TempDir()
	srv := providertest.New(t)
	marker := filepath.Join(t.TempDir(), "started")
	env := []string{"OCTET_HOME=" + home, "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=" + fakeKey}
	c, _ := startACPProcess(t, env, 90*time.Second)
	must := func(method string, params any) json.RawMessage {
		t.Helper()
		res, e := c.call(method, params)
		if e != nil {
			t.Fatalf("%s: %s", method, e)
		}
		return res
	}
	must("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	servers := []any{map[string]any{"name": "c", "command": "/bin/sh", "args": []string{"-c", fmt.Sprintf("touch %s; exec %s", marker, bin)}, "env": []any{}}}
	var s struct{ SessionID string }
	json.Unmarshal(must("session/new", map[string]any{"cwd": ws, "mcpServers": servers}), &s)
	offered := func() string {
		t.Helper()
		n := len(srv.Requests())
		srv.Enqueue(providertest.Text("ok"))
		must("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{map[string]string{"type": "text", "text": "hi"}}})
		b, _ := json.Marshal(srv.Requests()[n].Body["tools"])
		return string(b)
	}
	if !strings.Contains(offered(), "mcp__c__echo") || !exists(marker) {
		t.Fatal("the client's server did not start under unsafe_host")
	}
	pid := serverPidOf(t, bin)
	must("session/set_mode", map[string]any{"sessionId": s.SessionID, "modeId": "controlled_bash_approval"})
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the client's MCP server %d still runs in a mode that asks", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tl := offered(); strings.Contains(tl, "mcp__c__") || strings.Contains(tl, "agents_") {
		t.Errorf("a mode that asks offered %s", tl)
	}
	must("session/set_mode", map[string]any{"sessionId": s.SessionID, "modeId": "unsafe_host"})
	deadline = time.Now().Add(60 * time.Second)
	for !strings.Contains(offered(), "mcp__c__echo") {
		if time.Now().After(deadline) {
			t.Fatal("the client's server did not start again under unsafe_host")
		}
	}

	// A session recorded at a mode that asks loads without starting it.
	must("session/set_mode", map[string]any{"sessionId": s.SessionID, "modeId": "controlled"})
	os.Remove(marker)
	c.stop()
	c, _ = startACPProcess(t, env, 60*time.Second)
	must("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}, "agentCapabilities": map[string]any{"loadSession": true}})
	must("session/load", map[string]any{"sessionId": s.SessionID, "cwd": ws, "mcpServers": servers})
	if tl := offered(); strings.Contains(tl, "mcp__c__") || exists(marker) {
		t.Errorf("a session loaded at a mode that asks started the client's server (offered %s)", tl)
	}
}

// TestLSPEnabledMCPToolReachesTheModel: a tool re-enabled with
// octet/extensions/enable is offered at the next request, with
// delegation on (the default tool list) and off (a --tools list). Before,
// the root agent with delegation on advertised a frozen copy of the tool
// registry, so an enabled tool was listed active but never offered.
func TestLSPEnabledMCPToolReachesTheModel(t *testing.T) {
	for _, tc := range []struct {
		name       string
		flags      []string
		delegation bool
	}{
		{"delegation on", nil, true},
		{"delegation off", []string{"--tools", "read,mcp__t__echo,mcp__t__add"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			startMCPLSP(t, home, "") // pins variant 1
			bin := mcpTestServer(t)
			cfg := fmt.Sprintf("[mcp_servers.t]\ncommand = %q\nargs = [\"-variant\", \"2\"]\nenabled = true\n", bin)
			if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := providertest.New(t)
			ws := t.TempDir()
			c, _ := launchLSP(t, home, srv.URL(), ws, 120*time.Second, tc.flags...)
			a := &authorityLSP{c: c, srv: srv}
			sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)
			names := a.offered(t, sid)
			if slices.Contains(names, "mcp__t__echo") || !slices.Contains(names, "mcp__t__add") {
				t.Fatalf("before enable: offered %v", names)
			}
			if got := hasPrefixed(names, "agents_"); got != tc.delegation {
				t.Errorf("delegation tools offered = %v, want %v", got, tc.delegation)
			}
			c.call("octet/extensions/enable", map[string]any{"sessionId": sid, "server": "t", "tools": []string{"echo"}}, nil, nil)
			if names := a.offered(t, sid); !slices.Contains(names, "mcp__t__echo") {
				t.Errorf("after enable: offered %v", names)
			}
		})
	}
}
