package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/octet-agent/octet/internal/sandbox"
)

// TestSandboxKeys: the sandbox profile defaults by policy, the global
// config sets it and its paths, and a project may only tighten the
// profile and remove paths (each attempt to loosen is a warning).
func TestSandboxKeys(t *testing.T) {
	for _, c := range []struct {
		name, global, project string
		env                   map[string]string
		profile               sandbox.Profile
		source                Source
		read, write           []string
		warn                  string
	}{
		{name: "unsafe_host default", profile: sandbox.None, source: SourceDefault},
		{name: "controlled default", env: map[string]string{"OCTET_EFFECT_POLICY": "controlled"}, profile: sandbox.WorkspaceWrite, source: SourceDefault},
		{name: "global sets", global: "sandbox = \"workspace-write\"\nsandbox_read_paths = [\"/opt/sdk\"]\nsandbox_write_paths = [\"/var/cache/x\", \".git\"]\n",
			profile: sandbox.WorkspaceWrite, source: SourceConfig, read: []string{"/opt/sdk"}, write: []string{"/var/cache/x", ".git"}},
		{name: "project tightens", project: "sandbox = \"read-only\"\n", profile: sandbox.ReadOnly, source: SourceProjectConfig},
		{name: "project tightens a controlled policy's default", env: map[string]string{"OCTET_EFFECT_POLICY": "controlled"}, project: "sandbox = \"read-only\"\n",
			profile: sandbox.ReadOnly, source: SourceProjectConfig},
		{name: "project may not loosen", env: map[string]string{"OCTET_EFFECT_POLICY": "controlled"}, project: "sandbox = \"none\"\n",
			profile: sandbox.WorkspaceWrite, source: SourceDefault, warn: "sandbox ignored: a project may only tighten the sandbox"},
		{name: "project removes and may not add", global: "sandbox_write_paths = [\"/a\", \"/b\"]\nsandbox_read_paths = [\"/r\"]\n",
			project: "sandbox_write_paths = [\"/a\", \"/home/me/.ssh\"]\nsandbox_read_paths = [\"/\"]\n",
			profile: sandbox.None, source: SourceDefault, write: []string{"/a"}, read: nil, warn: "a project may only remove paths, not add /home/me/.ssh"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(t, c.global, c.project, c.env, Flags{})
			if err != nil {
				t.Fatal(err)
			}
			if p := cfg.SandboxProfile(); p != c.profile || cfg.Sandbox.Source != c.source {
				t.Errorf("sandbox %s from %s, want %s from %s", p, cfg.Sandbox.Source, c.profile, c.source)
			}
			if diff := cmp.Diff(c.read, cfg.SandboxReadPaths.Value); diff != "" {
				t.Errorf("read paths (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.write, cfg.SandboxWritePaths.Value); diff != "" {
				t.Errorf("write paths (-want +got):\n%s", diff)
			}
			warned := strings.Join(cfg.Warnings, "\n")
			if (c.warn == "") != (warned == "") || !strings.Contains(warned, c.warn) {
				t.Errorf("warnings %q, want %q", warned, c.warn)
			}
		})
	}
}

// TestSandboxKeysInvalid: bad values are errors that say what to write.
func TestSandboxKeysInvalid(t *testing.T) {
	for body, want := range map[string]string{
		"sandbox = \"strict\"\n":                      "want read-only, workspace-write or none",
		"sandbox_read_paths = [\"rel/path\"]\n":       "not an absolute path",
		"sandbox_write_paths = [\"../outside\"]\n":    "neither an absolute path nor a workspace entry",
		"sandbox_write_paths = [\"src/generated\"]\n": "neither an absolute path nor a workspace entry",
	} {
		if _, err := load(t, body, "", nil, Flags{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// TestMCPServerSandboxKey: a stdio server runs unsandboxed unless the
// global config says otherwise; a project may only tighten it.
func TestMCPServerSandboxKey(t *testing.T) {
	global := "[mcp_servers.docs]\ncommand = \"docs-mcp\"\nenabled = true\n"
	for _, c := range []struct{ global, project, want, warn string }{
		{global, "", "none", ""},
		{global + "sandbox = \"workspace-write\"\n", "", "workspace-write", ""},
		{global + "sandbox = \"workspace-write\"\n", "[mcp_servers.docs]\nsandbox = \"read-only\"\n", "read-only", ""},
		{global + "sandbox = \"workspace-write\"\n", "[mcp_servers.docs]\nsandbox = \"none\"\n", "workspace-write", "may only tighten MCP server \"docs\"'s sandbox"},
	} {
		cfg, err := load(t, c.global, c.project, nil, Flags{})
		if err != nil {
			t.Fatal(err)
		}
		warned := strings.Join(cfg.Warnings, "\n")
		if got := cfg.MCPServers[0].Sandbox.Value; got != c.want || (c.warn == "") != (warned == "") || !strings.Contains(warned, c.warn) {
			t.Errorf("%q + %q: sandbox %q, warnings %q; want %q, %q", c.global, c.project, got, warned, c.want, c.warn)
		}
	}
	if _, err := load(t, global+"sandbox = \"jail\"\n", "", nil, Flags{}); err == nil || !strings.Contains(err.Error(), "unknown sandbox profile") {
		t.Errorf("bad server sandbox: %v", err)
	}
}
