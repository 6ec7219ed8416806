package host_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/tools"
)

// loadConfig loads a configuration from the global and project files'
// text and the environment env.
func loadConfig(t *testing.T, global, project string, env map[string]string) *config.Config {
	t.Helper()
	home, ws := filepath.Join(t.TempDir(), "home"), t.TempDir()
	for path, text := range map[string]string{filepath.Join(home, "config.toml"): global, filepath.Join(ws, ".octet", "config.toml"): project} {
		if text == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c, err := config.Load(config.Options{Home: home, Workspace: ws, LookupEnv: lookup})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEffectiveToolPolicySnapshot: the evidence snapshot assembled from a
// configuration carries every setting's value and source, and never the
// shell's path.
func TestEffectiveToolPolicySnapshot(t *testing.T) {
	c := loadConfig(t, "bash_timeout_secs = 30\nshell_path = \"/bin/sh\"\n", "allow_write = false\n",
		map[string]string{"OCTET_EFFECT_POLICY": "controlled"})
	b, err := json.Marshal(host.EffectiveToolPolicy(c, tools.ShellConfigured))
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
	if diff := cmp.Diff([]string{"read", "search", "edit", "bash", "view_image", "update_plan", "diagnostics"}, c.EnabledTools()); diff != "" {
		t.Errorf("enabled tools (-want +got):\n%s", diff)
	}
}

// TestPrices: without [prices] tables the table is the built-in one; a
// global table replaces its model's price or adds a model, the others
// keep theirs; a project's tables are ignored.
func TestPrices(t *testing.T) {
	if diff := cmp.Diff(agent.DefaultPrices(), host.Prices(loadConfig(t, "", "", nil))); diff != "" {
		t.Errorf("default prices (-want +got):\n%s", diff)
	}
	c := loadConfig(t, `[prices]
"gpt-5.1-codex" = { input = "2", cached_input = "0.2", output = "16.000001" }
local-model = { input = "0", cached_input = "0", output = "0" }
`, "[prices.gpt-5-mini]\ninput = \"0\"\ncached_input = \"0\"\noutput = \"0\"\n", nil)
	got := host.Prices(c)
	if want := (agent.Price{Input: 2_000_000, CachedInput: 200_000, Output: 16_000_001, CacheWrite: 2_000_000}); got["gpt-5.1-codex"] != want {
		t.Errorf("overridden price = %+v, want %+v", got["gpt-5.1-codex"], want)
	}
	if p, ok := got["local-model"]; !ok || p != (agent.Price{}) {
		t.Errorf("added model price = %+v, %v", p, ok)
	}
	if got["gpt-5-mini"] != agent.DefaultPrices()["gpt-5-mini"] {
		t.Errorf("a project changed a price: %+v", got["gpt-5-mini"])
	}
	if b := host.Budget(c); b.Prices["local-model"] != (agent.Price{}) || b.Ceilings.MaxCost != 0 {
		t.Errorf("budget %+v", b)
	}
}

// TestToolPolicyFailsClosed: the launch policy is the one configuration
// names, and a name the broker does not know is the strictest policy.
func TestToolPolicyFailsClosed(t *testing.T) {
	c := loadConfig(t, "effect_policy = \"controlled\"\n", "", nil)
	if p := host.ToolPolicy(c); p != tools.Controlled {
		t.Errorf("policy %v, want controlled", p)
	}
	c.EffectPolicy.Value = "wide_open"
	if p := host.ToolPolicy(c); p != tools.ControlledBashApproval {
		t.Errorf("unknown name: policy %v, want controlled_bash_approval", p)
	}
	if cfg := host.ToolsConfig(c, "/w"); cfg.Root != "/w" || cfg.BashTimeout != c.BashTimeout.Value {
		t.Errorf("tools config %+v", cfg)
	}
}

// sandboxValue is the JSON value of the sandbox setting for profile on
// this host (its mechanism and ABI are the host's).
func sandboxValue(p tools.SandboxProfile) map[string]any {
	b, _ := json.Marshal(tools.HostSandbox(p, tools.SourceDefault).Value)
	var v map[string]any
	json.Unmarshal(b, &v)
	return v
}

// TestSandboxSetting: the effective policy's sandbox follows the policy's
// default, or the configured profile with its source, and the tools get
// the configured paths.
func TestSandboxSetting(t *testing.T) {
	for _, c := range []struct {
		global string
		env    map[string]string
		want   tools.SandboxProfile
		source tools.Source
	}{
		{"", nil, tools.SandboxNone, tools.SourceDefault},
		{"", map[string]string{"OCTET_EFFECT_POLICY": "controlled_bash_approval"}, tools.SandboxWorkspaceWrite, tools.SourceDefault},
		{"sandbox = \"read-only\"\nsandbox_write_paths = [\"/cache\"]\n", nil, tools.SandboxReadOnly, tools.SourceConfig},
	} {
		cfg := loadConfig(t, c.global, "", c.env)
		got := host.EffectiveToolPolicy(cfg, tools.ShellSystemBash).Sandbox
		if got.Value.Profile != c.want || got.Source != c.source || got.Value.Mechanism == "" {
			t.Errorf("%q %v: sandbox %+v, want %s from %s", c.global, c.env, got, c.want, c.source)
		}
		if w := host.ToolsConfig(cfg, "/ws").Sandbox.WritePaths; c.global != "" && (len(w) != 1 || w[0] != "/cache") {
			t.Errorf("write paths %q", w)
		}
	}
}
