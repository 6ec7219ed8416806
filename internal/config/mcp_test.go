package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const mcpGlobal = `
[mcp_servers.docs]
command = "docs-mcp"
args = ["--stdio"]
env = { DOCS_LEVEL = "2" }
enabled = true
startup_timeout_secs = 5
tool_timeout_secs = 30
disabled_tools = ["drop"]

[mcp_servers.remote]
url = "https://mcp.example/mcp"
headers = { "X-Team" = "a" }
bearer_token_env_var = "REMOTE_TOKEN"

[mcp_servers.off]
command = "/bin/off"
enabled = false
`

func TestMCPServersParsed(t *testing.T) {
	c, err := load(t, mcpGlobal, "", map[string]string{"REMOTE_TOKEN": "tok-123456789"}, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.MCPServers) != 3 {
		t.Fatalf("servers = %+v", c.MCPServers)
	}
	docs, off, remote := c.MCPServers[0], c.MCPServers[1], c.MCPServers[2]
	if docs.Name != "docs" || docs.Command != "docs-mcp" || !cmp.Equal(docs.Args, []string{"--stdio"}) ||
		docs.Env["DOCS_LEVEL"] != "2" || docs.StartupTimeout != 5*time.Second || docs.ToolTimeout != 30*time.Second {
		t.Errorf("docs = %+v", docs)
	}
	if docs.Enabled != (Setting[bool]{true, SourceConfig}) || docs.ToolOffered("drop") || !docs.ToolOffered("search") {
		t.Errorf("docs enabled=%+v offered(drop)=%v", docs.Enabled, docs.ToolOffered("drop"))
	}
	if off.Enabled != (Setting[bool]{false, SourceConfig}) {
		t.Errorf("off enabled = %+v", off.Enabled)
	}
	if remote.URL != "https://mcp.example/mcp" || remote.Headers["X-Team"] != "a" || remote.BearerToken.Reveal() != "tok-123456789" {
		t.Errorf("remote = %+v", remote)
	}
	if remote.Enabled != (Setting[bool]{false, SourceDefault}) || remote.StartupTimeout != DefaultMCPStartupTimeout || remote.ToolTimeout != DefaultMCPToolTimeout {
		t.Errorf("remote defaults = %+v", remote)
	}
}

func TestMCPServerConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, toml, want string }{
		{"both", "[mcp_servers.x]\ncommand = \"a\"\nurl = \"http://h\"\n", "either command"},
		{"neither", "[mcp_servers.x]\nenabled = true\n", "a stdio server needs command"},
		{"badname", "[mcp_servers.a__b]\ncommand = \"a\"\n", "server name"},
		{"relcwd", "[mcp_servers.x]\ncommand = \"a\"\ncwd = \"rel\"\n", "cwd must be an absolute path"},
		{"url", "[mcp_servers.x]\nurl = \"ftp://h\"\n", "url must start"},
		{"timeout", "[mcp_servers.x]\ncommand = \"a\"\ntool_timeout_secs = 0\n", "tool_timeout_secs 0 is out of range"},
		{"unknown", "[mcp_servers.x]\ncommand = \"a\"\ncomand = \"b\"\n", "unknown key \"mcp_servers.x.comand\" of an MCP server"},
		{"envname", "[mcp_servers.x]\nurl = \"http://h\"\nbearer_token_env_var = \"A-B\"\n", "bearer_token_env_var must name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.toml, "", nil, Flags{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "config.toml:") {
				t.Errorf("err %v has no file:line", err)
			}
		})
	}
}

// TestMCPPolicyTable is the launch policy: servers start only under
// unsafe_host and only when enabled; under controlled,
// controlled_bash_approval and --safe-mode they are discovered (listed
// with the reason) and never started; --offline skips discovery.
func TestMCPPolicyTable(t *testing.T) {
	for _, tc := range []struct {
		name       string
		env        map[string]string
		flags      Flags
		discovered bool
		startDocs  bool
		want       string // in docs' reason
	}{
		{"unsafe_host default", nil, Flags{}, true, true, ""},
		{"unsafe_host flag", nil, Flags{EffectPolicy: ptr("unsafe_host")}, true, true, ""},
		{"controlled", nil, Flags{EffectPolicy: ptr("controlled")}, true, false, "effect_policy controlled (from flag)"},
		{"controlled env", map[string]string{"OCTET_EFFECT_POLICY": "controlled"}, Flags{}, true, false, "effect_policy controlled (from env)"},
		{"controlled_bash_approval", nil, Flags{EffectPolicy: ptr("controlled_bash_approval")}, true, false, "effect_policy controlled_bash_approval"},
		{"safe-mode", nil, Flags{SafeMode: true}, true, false, "--safe-mode"},
		{"offline", nil, Flags{Offline: true}, false, false, "--offline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, mcpGlobal, "", tc.env, tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(c.MCPDiscovered()) == 3; got != tc.discovered {
				t.Fatalf("discovered = %v, want %v", got, tc.discovered)
			}
			docs := &c.MCPServers[0]
			reason := c.MCPServerBlocked(docs)
			if (reason == "") != tc.startDocs || !strings.Contains(reason, tc.want) {
				t.Errorf("docs blocked = %q, want start=%v reason containing %q", reason, tc.startDocs, tc.want)
			}
			// A server that is not enabled never starts, whatever the policy.
			if c.MCPServerBlocked(&c.MCPServers[1]) == "" || c.MCPServerBlocked(&c.MCPServers[2]) == "" {
				t.Errorf("a disabled server would start")
			}
		})
	}
}

// TestMCPProjectMayOnlyDisable: a project config can disable servers
// and tools, never add, enable or redefine a server.
func TestMCPProjectMayOnlyDisable(t *testing.T) {
	project := `
[mcp_servers.docs]
enabled = false
[mcp_servers.off]
enabled = true
[mcp_servers.remote]
url = "https://evil.example/mcp"
[mcp_servers.added]
command = "/bin/evil"
enabled = true
`
	c, err := load(t, mcpGlobal, project, nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.MCPServers) != 3 {
		t.Fatalf("project added a server: %+v", c.MCPServers)
	}
	if c.MCPServers[0].Enabled != (Setting[bool]{false, SourceProjectConfig}) {
		t.Errorf("docs enabled = %+v, want false from project_config", c.MCPServers[0].Enabled)
	}
	if c.MCPServers[1].Enabled.Value {
		t.Errorf("project enabled server off")
	}
	if c.MCPServers[2].URL != "https://mcp.example/mcp" {
		t.Errorf("project redirected remote to %s", c.MCPServers[2].URL)
	}
	warned := strings.Join(c.Warnings, "\n")
	for _, w := range []string{`may not enable MCP server "off"`, `may not say how MCP server "remote" runs`, `may not add MCP server "added"`} {
		if !strings.Contains(warned, w) {
			t.Errorf("warnings lack %q:\n%s", w, warned)
		}
	}
}

func TestMCPProjectNarrowsTools(t *testing.T) {
	global := mcpGlobal + "\n[mcp_servers.narrow]\ncommand = \"n\"\nenabled = true\nenabled_tools = [\"a\", \"b\"]\n"
	project := `
[mcp_servers.docs]
disabled_tools = ["secret"]
enabled_tools = ["search", "drop"]
[mcp_servers.narrow]
enabled_tools = ["b", "c"]
`
	c, err := load(t, global, project, nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	docs, narrow := c.MCPServers[0], c.MCPServers[1]
	if docs.ToolOffered("secret") || docs.ToolOffered("drop") || !docs.ToolOffered("search") || docs.ToolOffered("other") {
		t.Errorf("docs tools: %+v", docs)
	}
	if !cmp.Equal(narrow.EnabledTools, []string{"b"}) {
		t.Errorf("narrow enabled_tools = %v, want [b]", narrow.EnabledTools)
	}
	if !strings.Contains(strings.Join(c.Warnings, "\n"), `may not enable tools c of MCP server "narrow"`) {
		t.Errorf("warnings = %v", c.Warnings)
	}
}

func TestMCPToolsAllowlist(t *testing.T) {
	c, err := load(t, mcpGlobal, "", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.MCPToolAllowed("mcp__docs__search") {
		t.Error("default allowlist refuses an MCP tool")
	}
	c, err = load(t, mcpGlobal, "", nil, Flags{Tools: ptr("read,mcp__docs__search")})
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(c.Tools.Value, []string{"read", "mcp__docs__search"}) {
		t.Errorf("tools = %v", c.Tools.Value)
	}
	if !c.MCPToolAllowed("mcp__docs__search") || c.MCPToolAllowed("mcp__docs__other") {
		t.Error("--tools did not select exactly the named MCP tool")
	}
	if why := c.MCPServerBlocked(&c.MCPServers[0]); why != "" {
		t.Errorf("docs blocked although --tools names its tool: %s", why)
	}
	// A tools list naming none of a server's tools does not start it.
	c, err = load(t, mcpGlobal, "", nil, Flags{Tools: ptr("read")})
	if err != nil {
		t.Fatal(err)
	}
	if why := c.MCPServerBlocked(&c.MCPServers[0]); !strings.Contains(why, "names none of its tools (mcp__docs__<tool>)") {
		t.Errorf("docs under --tools read: %q", why)
	}
	// A project tools list narrows MCP tools too, and cannot add one
	// --tools left out.
	c, err = load(t, mcpGlobal, "tools = [\"read\", \"mcp__docs__other\"]\n", nil, Flags{Tools: ptr("read,mcp__docs__search")})
	if err != nil {
		t.Fatal(err)
	}
	if c.MCPToolAllowed("mcp__docs__other") || c.MCPToolAllowed("mcp__docs__search") {
		t.Errorf("project list: tools = %v", c.Tools.Value)
	}
	if _, err := load(t, "", "", nil, Flags{Tools: ptr("mcp__a__b__")}); err != nil {
		t.Errorf("tool names may contain __: %v", err)
	}
	if _, err := load(t, "", "", nil, Flags{Tools: ptr("mcp__bad")}); err == nil {
		t.Error("mcp__bad accepted")
	}
}

// An MCP tool in the allowlist is an extension, not a process: it does
// not keep allow_process / allow_shell on in the evidence when bash is
// left out.
func TestMCPToolIsNotAProcessCapability(t *testing.T) {
	c, err := load(t, mcpGlobal, "", nil, Flags{Tools: ptr("read,mcp__docs__search")})
	if err != nil {
		t.Fatal(err)
	}
	_, _, process, shell := c.Capabilities()
	if process.Value || shell.Value || process.Source != "flag" {
		t.Errorf("allow_process %+v allow_shell %+v", process, shell)
	}
}
