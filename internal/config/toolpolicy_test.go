package config

import (
	"encoding/json"
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
