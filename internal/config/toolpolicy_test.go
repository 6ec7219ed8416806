package config

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/octet-agent/octet/tools"
)

func TestEffectiveToolPolicySnapshot(t *testing.T) {
	c, err := load(t, "bash_timeout_secs = 30\nshell_path = \"/bin/sh\"\n", "allow_write = false\n",
		map[string]string{"OCTET_EFFECT_POLICY": "controlled"}, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c.EffectiveToolPolicy(tools.ShellConfigured))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{
		"effect_policy":         {"value": "controlled", "source": "env"},
		"workspace_confinement": {"value": true, "source": "env"},
		"allow_edit":            {"value": true, "source": "default"},
		"allow_write":           {"value": false, "source": "project_config"},
		"allow_process":         {"value": true, "source": "default"},
		"allow_shell":           {"value": true, "source": "default"},
		"shell_path":            {"value": map[string]any{"selection": "configured"}, "source": "config"},
		"bash_timeout_ms":       {"value": 30000.0, "source": "config"},
		"max_output_bytes":      {"value": 1048576.0, "source": "default"},
		"allow_remote_read":     {"value": false, "source": "default"},
		"sandbox":               {"value": sandboxValue(tools.SandboxWorkspaceWrite), "source": "default"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
	if strings.Contains(string(b), "/bin/sh") {
		t.Error("snapshot leaks the shell path")
	}
	if diff := cmp.Diff([]string{"read", "search", "edit", "bash"}, c.EnabledTools()); diff != "" {
		t.Errorf("enabled tools (-want +got):\n%s", diff)
	}
}

// TestEffectiveToolPolicyCapabilitiesAreTruthful checks that allow_edit,
// allow_write, allow_process and allow_shell say what the run may do: a
// capability whose tool is not in the final allowlist is false, with the
// source of the narrowing.
func TestEffectiveToolPolicyCapabilitiesAreTruthful(t *testing.T) {
	type caps struct{ edit, write, process, shell tools.Setting[bool] }
	on := func(src tools.Source) tools.Setting[bool] { return tools.Setting[bool]{Value: true, Source: src} }
	off := func(src tools.Source) tools.Setting[bool] { return tools.Setting[bool]{Value: false, Source: src} }
	const (
		def  = tools.SourceDefault
		cfg  = tools.SourceConfig
		flag = tools.SourceFlag
		proj = tools.SourceProjectConfig
	)
	tests := []struct {
		name, global, project string
		flags                 Flags
		known                 []string
		want                  caps
	}{
		{"defaults", "", "", Flags{}, nil,
			caps{on(def), on(def), on(def), on(def)}},
		{"--tools read,bash", "", "", Flags{Tools: ptr("read,bash")}, nil,
			caps{off(flag), off(flag), on(def), on(def)}},
		{"--tools read,search", "", "", Flags{Tools: ptr("read,search")}, nil,
			caps{off(flag), off(flag), off(flag), off(flag)}},
		{"project tools list", "", `tools = ["read", "search", "bash"]`, Flags{}, nil,
			caps{off(proj), off(proj), on(def), on(def)}},
		{"global tools list", `tools = ["read", "edit"]`, "", Flags{}, nil,
			caps{on(def), off(cfg), off(cfg), off(cfg)}},
		{"project narrows a flag list", "", `tools = ["read"]`, Flags{Tools: ptr("read,edit")}, nil,
			caps{off(proj), off(proj), off(proj), off(proj)}},
		{"gate off keeps its own source", "allow_edit = false", "", Flags{Tools: ptr("read,write")}, nil,
			caps{off(cfg), on(def), off(flag), off(flag)}},
		{"project turns shell off", "", "allow_shell = false", Flags{}, nil,
			caps{on(def), on(def), off(proj), off(proj)}},
		{"global turns process off", "allow_process = false", "", Flags{}, nil,
			caps{on(def), on(def), off(cfg), off(cfg)}},
		{"shell gate and tool list", "", "allow_shell = false", Flags{Tools: ptr("read,search,edit")}, nil,
			caps{on(def), off(flag), off(flag), off(proj)}},
		{"unknown extension tool may run processes", "", "", Flags{Tools: ptr("read,ext")}, append(slices.Clone(BuiltinTools), "ext"),
			caps{off(flag), off(flag), on(def), on(def)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			ws := t.TempDir()
			if tt.global != "" {
				writeFile(t, filepath.Join(home, "config.toml"), tt.global, 0o644)
			}
			if tt.project != "" {
				writeFile(t, filepath.Join(ws, ".octet", "config.toml"), tt.project, 0o644)
			}
			c, err := Load(Options{Home: home, Workspace: ws, LookupEnv: envMap(nil), Flags: tt.flags, KnownTools: tt.known})
			if err != nil {
				t.Fatal(err)
			}
			p := c.EffectiveToolPolicy(tools.ShellSystemBash)
			got := caps{p.AllowEdit, p.AllowWrite, p.AllowProcess, p.AllowShell}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(caps{})); diff != "" {
				t.Errorf("capabilities (-want +got):\n%s\nenabled tools %q, warnings %q", diff, c.EnabledTools(), c.Warnings)
			}
			enabled := c.EnabledTools()
			for name, s := range map[string]tools.Setting[bool]{"edit": p.AllowEdit, "write": p.AllowWrite} {
				if s.Value != slices.Contains(enabled, name) {
					t.Errorf("allow_%s = %v but enabled tools are %q", name, s.Value, enabled)
				}
			}
		})
	}
}
