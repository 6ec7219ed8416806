package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

var (
	mcpServerOnce sync.Once
	mcpServerBin  string
	mcpServerErr  error
)

// mcpTestServer builds the testdata MCP server of tools/mcp once.
func mcpTestServer(t *testing.T) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the policy tests wrap the server in /bin/sh")
	}
	mcpServerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "octet-mcptest-")
		if err != nil {
			mcpServerErr = err
			return
		}
		mcpServerBin = filepath.Join(dir, "mcptest")
		out, err := exec.Command("go", "build", "-o", mcpServerBin, "../../tools/mcp/testdata/mcptest").CombinedOutput()
		if err != nil {
			mcpServerErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if mcpServerErr != nil {
		t.Fatalf("build the MCP test server: %v", mcpServerErr)
	}
	return mcpServerBin
}

// mcpExecEnv is an exec environment whose global config defines server
// "t" (the testdata server, behind a shell that leaves a marker file
// when it starts).
func mcpExecEnv(t *testing.T, enabled bool, extra string, turns ...providertest.Turn) (*execEnv, string) {
	t.Helper()
	bin := mcpTestServer(t)
	x := newExecEnv(t, turns...)
	marker := filepath.Join(t.TempDir(), "started")
	cfg := fmt.Sprintf("[mcp_servers.t]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"touch %s; exec %s %s\"]\nenabled = %v\n", marker, bin, extra, enabled)
	if err := os.WriteFile(filepath.Join(x.home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return x, marker
}

func advertised(t *testing.T, x *execEnv) string {
	t.Helper()
	reqs := x.srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("no provider request")
	}
	b, _ := json.Marshal(reqs[0].Body["tools"])
	return string(b)
}

// TestExecMCPPolicyTable: an enabled server starts and its tools are
// advertised only under unsafe_host; under controlled,
// controlled_bash_approval, --safe-mode and --offline it never starts;
// a disabled server never starts, and a project config cannot enable it.
func TestExecMCPPolicyTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enabled bool
		project string
		args    []string
		start   bool
		warn    string
	}{
		{"unsafe_host enabled", true, "", nil, true, ""},
		{"unsafe_host disabled", false, "", nil, false, ""},
		{"project cannot enable", false, "[mcp_servers.t]\nenabled = true\n", nil, false, "may not enable MCP server"},
		{"project disables", true, "[mcp_servers.t]\nenabled = false\n", nil, false, ""},
		{"controlled", true, "", []string{"--effect-policy", "controlled"}, false, "MCP server t not started"},
		{"controlled_bash_approval", true, "", []string{"--effect-policy", "controlled_bash_approval"}, false, "start only under unsafe_host"},
		{"safe-mode", true, "", []string{"--safe-mode"}, false, "--safe-mode"},
		{"offline", true, "", []string{"--offline"}, false, ""},
		{"tools names none of its tools", true, "", []string{"--tools", "read"}, false, "names none of its tools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, marker := mcpExecEnv(t, tc.enabled, "", providertest.Text("ok"))
			if tc.project != "" {
				os.MkdirAll(filepath.Join(x.ws, ".octet"), 0o755)
				os.WriteFile(filepath.Join(x.ws, ".octet", "config.toml"), []byte(tc.project), 0o644)
			}
			r := runCLI(t, x.ws, x.vars, append(append([]string{"exec"}, tc.args...), "hi")...)
			if r.code != exitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			tools := advertised(t, x)
			_, err := os.Stat(marker)
			if started := err == nil; started != tc.start {
				t.Errorf("server started = %v, want %v\nstderr: %s", started, tc.start, r.stderr)
			}
			if got := strings.Contains(tools, "mcp__t__echo"); got != tc.start {
				t.Errorf("mcp__t__echo advertised = %v, want %v: %s", got, tc.start, tools)
			}
			if !strings.Contains(r.stderr, tc.warn) {
				t.Errorf("stderr lacks %q:\n%s", tc.warn, r.stderr)
			}
		})
	}
}

func TestExecMCPToolCall(t *testing.T) {
	x, _ := mcpExecEnv(t, true, "",
		providertest.Reply(providertest.FunctionCall("call_1", "mcp__t__echo", `{"text":"ping"}`)),
		providertest.Text("done"),
	)
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "--tools", "read,mcp__t__echo", "hi")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	tools := advertised(t, x)
	if !strings.Contains(tools, "mcp__t__echo") || strings.Contains(tools, "mcp__t__add") || strings.Contains(tools, `"bash"`) {
		t.Errorf("--tools: advertised %s", tools)
	}
	_, events := parseJSONLines(t, r.stdout)
	var decided bool
	for _, ev := range events {
		if ev["kind"] == "tool_policy_decision" {
			decided = ev["decision"] == "allowed" && ev["effect"] == "extension"
		}
	}
	if !decided {
		t.Errorf("no allowed extension decision in %v", events)
	}
	second, _ := json.Marshal(x.srv.Requests()[1].Input())
	if !strings.Contains(string(second), "echo: ping") {
		t.Errorf("second request lacks the MCP result: %s", second)
	}
}

func TestExecMCPStartupFailureLogged(t *testing.T) {
	x, _ := mcpExecEnv(t, true, "-fail", providertest.Text("ok"))
	r := runCLI(t, x.ws, x.vars, "exec", "hi")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "MCP server failed to start") || !strings.Contains(r.stderr, "missing configuration file") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

func TestMCPListAndUnpin(t *testing.T) {
	x, marker := mcpExecEnv(t, true, "", providertest.Text("ok"))
	r := runCLI(t, x.ws, x.vars, "mcp", "list")
	if r.code != exitOK || !strings.Contains(r.stdout, "t\tstdio /bin/sh") || !strings.Contains(r.stdout, "starts") || !strings.Contains(r.stdout, "not pinned yet") {
		t.Fatalf("mcp list: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("mcp list started the server")
	}
	if r := runCLI(t, x.ws, x.vars, "exec", "hi"); r.code != exitOK {
		t.Fatalf("exec: %s", r.stderr)
	}
	if r := runCLI(t, x.ws, x.vars, "mcp", "list"); !strings.Contains(r.stdout, "9 tool definitions pinned") {
		t.Errorf("after a start: %s", r.stdout)
	}
	if r := runCLI(t, x.ws, x.vars, "mcp", "unpin", "t"); r.code != exitOK {
		t.Fatalf("unpin: %s", r.stderr)
	}
	if r := runCLI(t, x.ws, x.vars, "mcp", "list"); !strings.Contains(r.stdout, "not pinned yet") {
		t.Errorf("after unpin: %s", r.stdout)
	}
	if r := runCLI(t, x.ws, x.vars, "mcp", "unpin", "nope"); r.code != exitUsage {
		t.Errorf("unpin of an unknown server: %d", r.code)
	}
}

// TestExecMCPConfiguredSecretsRedacted: the secret-named env values of
// a configured server never reach the model (the server repeats one in
// its result) nor octet's log (the server prints it to stderr), as the
// values of servers an ACP client hands in do not.
func TestExecMCPConfiguredSecretsRedacted(t *testing.T) {
	const secret = "ghp_configured0123456789secret"
	bin := mcpTestServer(t)
	x := newExecEnv(t,
		providertest.Reply(providertest.FunctionCall("call_1", "mcp__t__echo", `{"text":"ping"}`)),
		providertest.Text("done"),
	)
	cfg := fmt.Sprintf("[mcp_servers.t]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"echo token $GITHUB_TOKEN >&2; exec %s -echo-env GITHUB_TOKEN\"]\nenv = { GITHUB_TOKEN = %q }\nenabled = true\n", bin, secret)
	if err := os.WriteFile(filepath.Join(x.home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	x.vars["OCTET_LOG"] = "info"
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "hi")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	second, _ := json.Marshal(x.srv.Requests()[1].Input())
	if !strings.Contains(string(second), "echo: ping") {
		t.Fatalf("second request lacks the MCP result: %s", second)
	}
	if strings.Contains(string(second), secret) {
		t.Errorf("the configured server's token reached the model: %s", second)
	}
	if !strings.Contains(r.stderr, "MCP server stderr") {
		t.Errorf("no stderr line of the server logged:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr+r.stdout, secret) {
		t.Errorf("the configured server's token reached the log or output:\n%s\n%s", r.stderr, r.stdout)
	}
}

// TestExecMCPURLSecretRedacted: a credential in a configured server's
// URL query (api_key=...) is not logged with the URL when the server
// cannot be reached, nor printed by octet mcp list (every query value
// is hidden there, as provider URLs are in logs).
func TestExecMCPURLSecretRedacted(t *testing.T) {
	const secret = "querysecret0123456789"
	x := newExecEnv(t, providertest.Text("ok"))
	cfg := fmt.Sprintf("[mcp_servers.u]\nurl = \"http://127.0.0.1:1/mcp?api_key=%s\"\nenabled = true\nstartup_timeout_secs = 5\n", secret)
	if err := os.WriteFile(filepath.Join(x.home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, x.ws, x.vars, "exec", "hi")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "MCP server failed to start") {
		t.Errorf("the failed start is not logged:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr+r.stdout, secret) {
		t.Errorf("the URL's api_key reached the log or output:\n%s", r.stderr)
	}
	// octet mcp list printed the URL whole.
	r = runCLI(t, x.ws, x.vars, "mcp", "list")
	if r.code != exitOK || strings.Contains(r.stdout+r.stderr, secret) || !strings.Contains(r.stdout, "http http://127.0.0.1:1/mcp?api_key=REDACTED") {
		t.Errorf("mcp list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestMCPListUnreadablePins: octet mcp list says when the pins file
// cannot be read (every tool is withheld) and what to do, rather than
// counting no pins.
func TestMCPListUnreadablePins(t *testing.T) {
	x, _ := mcpExecEnv(t, true, "", providertest.Text("ok"))
	if err := os.MkdirAll(filepath.Join(x.home, "mcp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(x.home, "mcp", "pins.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, x.ws, x.vars, "mcp", "list")
	if r.code != exitOK || !strings.Contains(r.stdout, "every MCP tool is withheld") || !strings.Contains(r.stdout, "remove the file") || strings.Contains(r.stdout, "0 tool definitions pinned") {
		t.Errorf("mcp list with unreadable pins: %d %s %s", r.code, r.stdout, r.stderr)
	}
}
