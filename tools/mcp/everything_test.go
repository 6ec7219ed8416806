package mcp

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// everythingDefault is where .ci/run installs
// @modelcontextprotocol/server-everything (npm).
const everythingDefault = "/tmp/octet-ci-mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

// everythingServer returns node and the third-party server's entry point,
// or skips the test saying how to get them.
func everythingServer(t *testing.T) (node, entry string) {
	t.Helper()
	entry = os.Getenv("OCTET_TEST_MCP_EVERYTHING")
	if entry == "" {
		entry = everythingDefault
	}
	if _, err := os.Stat(entry); err != nil {
		t.Skipf("@modelcontextprotocol/server-everything is not installed at %s (.ci/run installs it; or set OCTET_TEST_MCP_EVERYTHING to its dist/index.js)", entry)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH; the server-everything test needs it")
	}
	return node, entry
}

// TestThirdPartyServerEverything runs the MCP project's own reference
// server, which this test did not write, over stdio.
func TestThirdPartyServerEverything(t *testing.T) {
	node, entry := everythingServer(t)
	t.Setenv("OPENAI_API_KEY", "sk-everything-must-not-see-this")
	sp := Spec{Name: "everything", Command: node, Args: []string{entry, "stdio"}, Cwd: filepath.Dir(entry),
		StartupTimeout: 60 * time.Second, ToolTimeout: 30 * time.Second}
	f := start(t, Options{Servers: []Spec{sp}})
	s := f.server(t, "everything")
	if s.State != StateRunning {
		t.Fatalf("server-everything: %+v", s)
	}
	var names []string
	for _, ti := range s.Tools {
		names = append(names, ti.Tool+"="+ti.State)
	}
	t.Logf("tools: %s", strings.Join(names, " "))
	if toolState(s, "echo") != ToolActive {
		t.Fatalf("echo: %v", names)
	}
	res, d := f.call(t, "mcp__everything__echo", `{"message":"from octet"}`)
	if d.Decision != "allowed" || res.IsError || !strings.Contains(res.Text, "from octet") {
		t.Errorf("echo: %+v %+v", res, d)
	}
	res, _ = f.call(t, "mcp__everything__get-tiny-image", `{}`)
	if !strings.Contains(res.Text, "[image image/png") {
		t.Errorf("image content: %.300q", res.Text)
	}
	res, _ = f.call(t, "mcp__everything__get-env", `{}`)
	if res.IsError || !strings.Contains(res.Text, "PATH") || strings.Contains(res.Text, "OPENAI_API_KEY") {
		t.Errorf("server environment: %.500q", res.Text)
	}
	// Its schema is enforced before the server sees anything.
	if _, d := f.call(t, "mcp__everything__echo", `{"message":7}`); d.Reason != "invalid_tool_arguments" {
		t.Errorf("bad arguments: %+v", d)
	}
}

// TestThirdPartyServerEverythingHTTP runs it over streamable HTTP.
func TestThirdPartyServerEverythingHTTP(t *testing.T) {
	node, entry := everythingServer(t)
	port := freePort(t)
	cmd := exec.Command(node, entry, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	cmd.Dir = filepath.Dir(entry)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sp := Spec{Name: "web", URL: "http://127.0.0.1:" + port + "/mcp", StartupTimeout: 10 * time.Second, ToolTimeout: 30 * time.Second}
	var f *fixture
	deadline := time.Now().Add(60 * time.Second)
	for {
		f = start(t, Options{Servers: []Spec{sp}, Backoff: time.Hour})
		if f.server(t, "web").State == StateRunning || time.Now().After(deadline) {
			break
		}
		f.m.Close()
		time.Sleep(200 * time.Millisecond) // node is still starting
	}
	if s := f.server(t, "web"); s.State != StateRunning {
		t.Fatalf("server-everything over HTTP: %+v", s)
	}
	res, _ := f.call(t, "mcp__web__echo", `{"message":"over http"}`)
	if res.IsError || !strings.Contains(res.Text, "over http") {
		t.Errorf("echo: %+v", res)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
