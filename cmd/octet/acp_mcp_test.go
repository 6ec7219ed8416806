package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// acpClient speaks newline-delimited JSON-RPC to a real `octet acp`.
type acpClient struct {
	t   *testing.T
	in  *json.Encoder
	out *bufio.Scanner
	id  int
	// stop closes its stdin and waits for octet to exit.
	stop func()
}

// call sends a request and returns its result or error, skipping the
// notifications before it.
func (c *acpClient) call(method string, params any) (result, rpcErr json.RawMessage) {
	c.t.Helper()
	c.id++
	if err := c.in.Encode(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params}); err != nil {
		c.t.Fatal(err)
	}
	for c.out.Scan() {
		var m struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(c.out.Bytes(), &m); err != nil {
			c.t.Fatalf("octet acp wrote %q: %v", c.out.Text(), err)
		}
		if m.Method == "" && m.ID != nil && *m.ID == c.id {
			return m.Result, m.Error
		}
	}
	c.t.Fatalf("octet acp ended before answering %s: %v", method, c.out.Err())
	return nil, nil
}

// startACPProcess starts a real `octet acp` with env added to the
// test's environment, killed after limit, and returns a client on its
// stdio and its stderr. The process is stopped when the test ends.
func startACPProcess(t *testing.T, env []string, limit time.Duration, args ...string) (*acpClient, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(octetBin, append([]string{"acp"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(limit, func() { cmd.Process.Kill() })
	t.Cleanup(func() { timer.Stop(); stdin.Close(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	return &acpClient{t: t, in: json.NewEncoder(stdin), out: sc, stop: func() { stdin.Close(); cmd.Wait() }}, stderr
}

// TestACPSessionMCPServers: MCP servers handed in by session/new start
// under the rules of configured ones — under unsafe_host their tools reach
// the model; under controlled and --offline they never start; a malformed
// entry is refused with an error and no session.
func TestACPSessionMCPServers(t *testing.T) {
	bin := mcpTestServer(t)
	for _, tc := range []struct {
		name  string
		args  []string
		start bool
	}{
		{"unsafe_host", nil, true},
		{"controlled", []string{"--effect-policy", "controlled"}, false},
		{"offline", []string{"--offline"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, ws := t.TempDir(), t.TempDir()
			srv := providertest.New(t)
			srv.Enqueue(providertest.Text("ok"))
			marker := filepath.Join(t.TempDir(), "started")
			c, stderr := startACPProcess(t, []string{"OCTET_HOME=" + home, "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=" + fakeKey}, 60*time.Second, tc.args...)
			if _, e := c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}); e != nil {
				t.Fatalf("initialize: %s", e)
			}
			if _, e := c.call("session/new", map[string]any{"cwd": ws, "mcpServers": []any{
				map[string]any{"name": "c", "args": []string{}, "env": []any{}},
			}}); e == nil || !strings.Contains(string(e), "needs a command") {
				t.Fatalf("a stdio server without a command: error %s", e)
			}
			res, e := c.call("session/new", map[string]any{"cwd": ws, "mcpServers": []any{map[string]any{
				"name": "c", "command": "/bin/sh", "args": []string{"-c", fmt.Sprintf("touch %s; exec %s", marker, bin)},
				"env": []any{map[string]string{"name": "MCPTEST", "value": "1"}},
			}}})
			if e != nil {
				t.Fatalf("session/new: %s", e)
			}
			var s struct{ SessionID string }
			json.Unmarshal(res, &s)
			if _, e := c.call("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{map[string]string{"type": "text", "text": "hi"}}}); e != nil {
				t.Fatalf("session/prompt: %s\n%s", e, stderr.String())
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d provider requests", len(reqs))
			}
			tools, _ := json.Marshal(reqs[0].Body["tools"])
			if got := strings.Contains(string(tools), "mcp__c__echo"); got != tc.start {
				t.Errorf("mcp__c__echo offered = %v, want %v: %.300s\n%s", got, tc.start, tools, stderr.String())
			}
			if _, err := os.Stat(marker); (err == nil) != tc.start {
				t.Errorf("server started = %v, want %v\n%s", err == nil, tc.start, stderr.String())
			}
		})
	}
}
