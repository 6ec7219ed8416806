package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// policyEvidence runs one read under args and returns the
// effectiveToolPolicy of its tool_policy_decision event.
func policyEvidence(t *testing.T, x *execEnv, args ...string) (map[string]map[string]any, cliResult) {
	t.Helper()
	x.srv.Enqueue(
		providertest.Reply(providertest.FunctionCall("c1", "read", `{"path":"notes.txt"}`)),
		providertest.Text("ok"),
	)
	r := runCLI(t, x.ws, x.vars, append(append([]string{"exec", "--json"}, args...), "read it")...)
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	_, events := parseJSONLines(t, r.stdout)
	for _, ev := range events {
		if ev["kind"] == "tool_policy_decision" {
			b, _ := json.Marshal(ev["effectiveToolPolicy"])
			var pol map[string]map[string]any
			json.Unmarshal(b, &pol)
			return pol, r
		}
	}
	t.Fatalf("no tool_policy_decision in %s", r.stdout)
	return nil, r
}

func TestPolicySourcesReachEvidence(t *testing.T) {
	t.Run("safe-mode flag", func(t *testing.T) {
		x := newExecEnv(t)
		pol, _ := policyEvidence(t, x, "--safe-mode")
		if pol["effect_policy"]["value"] != "controlled_bash_approval" || pol["effect_policy"]["source"] != "flag" {
			t.Errorf("effect_policy = %v", pol["effect_policy"])
		}
		if pol["workspace_confinement"]["value"] != true || pol["workspace_confinement"]["source"] != "flag" {
			t.Errorf("workspace_confinement = %v", pol["workspace_confinement"])
		}
	})
	t.Run("env", func(t *testing.T) {
		x := newExecEnv(t)
		x.vars["OCTET_EFFECT_POLICY"] = "controlled"
		pol, _ := policyEvidence(t, x)
		if pol["effect_policy"]["value"] != "controlled" || pol["effect_policy"]["source"] != "env" {
			t.Errorf("effect_policy = %v", pol["effect_policy"])
		}
	})
	t.Run("project cannot relax, may tighten", func(t *testing.T) {
		x := newExecEnv(t)
		x.vars["OCTET_EFFECT_POLICY"] = "controlled_bash_approval"
		os.MkdirAll(filepath.Join(x.ws, ".octet"), 0o755)
		os.WriteFile(filepath.Join(x.ws, ".octet", "config.toml"), []byte("effect_policy = \"unsafe_host\"\nbash_timeout_secs = 5\n"), 0o644)
		pol, r := policyEvidence(t, x)
		if pol["effect_policy"]["value"] != "controlled_bash_approval" || pol["effect_policy"]["source"] != "env" {
			t.Errorf("effect_policy = %v (the project relaxed it)", pol["effect_policy"])
		}
		if pol["bash_timeout_ms"]["value"] != 5000.0 || pol["bash_timeout_ms"]["source"] != "project_config" {
			t.Errorf("bash_timeout_ms = %v", pol["bash_timeout_ms"])
		}
		if !strings.Contains(r.stderr, filepath.Join(".octet", "config.toml")+":1") || !strings.Contains(r.stderr, "ignored") {
			t.Errorf("no warning naming the project file:line:\n%s", r.stderr)
		}
		if strings.Contains(r.stdout, "ignored") {
			t.Error("warning written to stdout (the event stream)")
		}
	})
}

// TestAllowShellFlag: --allow-shell mirrors the allow_shell key. =false
// removes bash from what the model sees; true does not bypass an
// independent gate (allow_process = false still removes it).
func TestAllowShellFlag(t *testing.T) {
	advertised := func(x *execEnv) string {
		b, _ := json.Marshal(x.srv.Requests()[0].Body["tools"])
		return string(b)
	}
	t.Run("off", func(t *testing.T) {
		x := newExecEnv(t)
		pol, _ := policyEvidence(t, x, "--allow-shell=false")
		if pol["allow_shell"]["value"] != false || pol["allow_shell"]["source"] != "flag" {
			t.Errorf("allow_shell = %v", pol["allow_shell"])
		}
		if tl := advertised(x); strings.Contains(tl, `"bash"`) || !strings.Contains(tl, `"read"`) {
			t.Errorf("advertised tools %s", tl)
		}
	})
	t.Run("on does not bypass allow_process", func(t *testing.T) {
		x := newExecEnv(t)
		os.WriteFile(filepath.Join(x.home, "config.toml"), []byte("allow_shell = false\nallow_process = false\n"), 0o644)
		pol, _ := policyEvidence(t, x, "--allow-shell")
		// The evidence reports the effective gate: off, from the
		// process gate that removed bash.
		if pol["allow_shell"]["value"] != false || pol["allow_process"]["value"] != false || pol["allow_process"]["source"] != "config" {
			t.Errorf("allow_shell = %v, allow_process = %v", pol["allow_shell"], pol["allow_process"])
		}
		if tl := advertised(x); strings.Contains(tl, `"bash"`) {
			t.Errorf("bash advertised with allow_process = false: %s", tl)
		}
	})
	t.Run("bad value", func(t *testing.T) {
		x := newExecEnv(t)
		r := runCLI(t, x.ws, x.vars, "exec", "--allow-shell=maybe", "hi")
		if r.code != exitUsage || !strings.Contains(r.stderr, "allow-shell") {
			t.Errorf("exit %d: %s", r.code, r.stderr)
		}
	})
}

func TestContextFilesReachInstructions(t *testing.T) {
	for _, off := range []bool{false, true} {
		x := newExecEnv(t, providertest.Text("ok"))
		os.WriteFile(filepath.Join(x.ws, "AGENTS.md"), []byte("Always answer in haiku."), 0o644)
		os.WriteFile(filepath.Join(x.home, "AGENTS.md"), []byte("Global rule: be brief."), 0o644)
		args := []string{"exec"}
		if off {
			args = append(args, "--no-context-files")
		}
		r := runCLI(t, x.ws, x.vars, append(args, "hi")...)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		b, _ := json.Marshal(x.srv.Requests()[0].Body)
		has := strings.Contains(string(b), "Always answer in haiku.") && strings.Contains(string(b), "Global rule: be brief.")
		if has == off {
			t.Errorf("--no-context-files=%v: context in request = %v", off, has)
		}
	}
}

// TestContextFileLinkNotLoaded: a workspace AGENTS.md that links to a
// file outside the workspace is not loaded into the instructions (in safe
// mode too) and the warning names it.
func TestContextFileLinkNotLoaded(t *testing.T) {
	for _, args := range [][]string{{"exec"}, {"exec", "--safe-mode"}} {
		x := newExecEnv(t, providertest.Text("ok"))
		outside := filepath.Join(t.TempDir(), "id_ed25519")
		os.WriteFile(outside, []byte("OUTSIDE-PRIVATE-KEY"), 0o600)
		os.Symlink(outside, filepath.Join(x.ws, "AGENTS.md"))
		r := runCLI(t, x.ws, x.vars, append(args, "hi")...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		b, _ := json.Marshal(x.srv.Requests()[0].Body)
		if strings.Contains(string(b), "OUTSIDE-PRIVATE-KEY") {
			t.Errorf("%v: the link target reached the instructions", args)
		}
		if !strings.Contains(r.stderr, filepath.Join(x.ws, "AGENTS.md")) || !strings.Contains(r.stderr, "symbolic link") {
			t.Errorf("%v: no warning naming the file:\n%s", args, r.stderr)
		}
	}
}

// TestProjectModelMustBeKnown: a repository's .octet/config.toml may pick
// a model octet knows, but a name octet does not know (here one carrying
// a terminal title sequence) is ignored with a warning on stderr naming
// the file and line, and the request goes to the user's model.
func TestProjectModelMustBeKnown(t *testing.T) {
	for _, tc := range []struct{ project, want string }{
		{"# the repository's choice\nmodel = \"\\u001b]0;pwned\\u0007gpt-9-ultra\"\n", "gpt-5-mini"},
		{"model = \"gpt-5-nano\"\n", "gpt-5-nano"},
	} {
		x := newExecEnv(t, providertest.Text("ok"))
		x.writeGlobalConfig(t, "model = \"gpt-5-mini\"\n")
		os.MkdirAll(filepath.Join(x.ws, ".octet"), 0o755)
		os.WriteFile(filepath.Join(x.ws, ".octet", "config.toml"), []byte(tc.project), 0o644)
		r := runCLI(t, x.ws, x.vars, "exec", "hi")
		if r.code != exitOK {
			t.Fatalf("exec: exit %d\nstderr: %s", r.code, r.stderr)
		}
		if got := x.srv.Requests()[0].Body["model"]; got != tc.want {
			t.Errorf("project %q: request model %v, want %s", tc.project, got, tc.want)
		}
		warned := strings.Contains(r.stderr, filepath.Join(".octet", "config.toml")+":2: model ignored")
		if warned != (tc.want == "gpt-5-mini") {
			t.Errorf("project %q: warning on stderr %v:\n%s", tc.project, warned, r.stderr)
		}
		if strings.ContainsAny(r.stderr+r.stdout, "\x1b\x07") {
			t.Errorf("the model name's controls reached the terminal:\n%q", r.stderr)
		}
	}
}
