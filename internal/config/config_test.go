package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func load(t *testing.T, global, project string, env map[string]string, flags Flags) (*Config, error) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if global != "" {
		writeFile(t, filepath.Join(home, "config.toml"), global, 0o644)
	}
	if project != "" {
		writeFile(t, filepath.Join(ws, ".octet", "config.toml"), project, 0o644)
	}
	return Load(Options{Home: home, Workspace: ws, LookupEnv: envMap(env), Flags: flags})
}

func TestDefaults(t *testing.T) {
	c, err := load(t, "", "", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if c.EffectPolicy != (Setting[EffectPolicy]{UnsafeHost, SourceDefault}) {
		t.Errorf("effect policy = %+v, want unsafe_host from default", c.EffectPolicy)
	}
	if c.BashTimeout.Value != 120*time.Second || c.MaxOutputBytes.Value != 1048576 {
		t.Errorf("limits = %v, %d", c.BashTimeout.Value, c.MaxOutputBytes.Value)
	}
	if !c.AllowExternalPaths.Value || c.BaseURL.Value != "https://api.openai.com/v1" {
		t.Errorf("external=%v base=%q", c.AllowExternalPaths.Value, c.BaseURL.Value)
	}
	if diff := cmp.Diff(BuiltinTools, c.Tools.Value); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

func TestPrecedenceAndSources(t *testing.T) {
	global := "model = \"m-config\"\neffect_policy = \"controlled\"\nbash_timeout_secs = 30\nbase_url = \"http://127.0.0.1:9/v1/\"\n"
	c, err := load(t, global, "", map[string]string{"OCTET_EFFECT_POLICY": "controlled_bash_approval"}, Flags{Model: ptr("m-flag")})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Source{
		"model": c.Model.Source, "effect_policy": c.EffectPolicy.Source,
		"bash_timeout": c.BashTimeout.Source, "reasoning": c.Reasoning.Source,
		"base_url": c.BaseURL.Source, "allow_external_paths": c.AllowExternalPaths.Source,
	}
	want := map[string]Source{
		"model": SourceFlag, "effect_policy": SourceEnv, "bash_timeout": SourceConfig,
		"reasoning": SourceDefault, "base_url": SourceConfig,
		// A controlled policy forces external paths off; the policy's source owns it.
		"allow_external_paths": SourceEnv,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
	if c.Model.Value != "m-flag" || c.EffectPolicy.Value != ControlledBashApproval || c.BashTimeout.Value != 30*time.Second {
		t.Errorf("values: %+v %+v %+v", c.Model, c.EffectPolicy, c.BashTimeout)
	}
	if c.AllowExternalPaths.Value {
		t.Error("controlled policy left allow_external_paths on")
	}
	if c.BaseURL.Value != "http://127.0.0.1:9/v1" {
		t.Errorf("base url = %q (trailing slash should be trimmed)", c.BaseURL.Value)
	}
}

func TestConfigErrorsHaveFileAndLine(t *testing.T) {
	tests := []struct {
		name, text string
		line       int
		contains   string
	}{
		{"syntax", "model = \"x\"\nreasoning = \n", 2, ""},
		{"unterminated string", "model = \"x\n", 1, ""},
		{"wrong type", "model = \"x\"\n\nallow_edit = \"yes\"\n", 3, "allow_edit"},
		{"unknown key", "model = \"x\"\n# comment\nmodle = \"y\"\n", 3, `unknown key "modle"`},
		{"unknown table", "model = \"x\"\n[extra]\nz = 1\n", 2, `unknown key "extra"`},
		{"bad policy", "effect_policy = \"wide_open\"\n", 1, "unknown effect policy"},
		{"yolo key", "\nyolo = true\n", 2, "no longer accepted"},
		{"yolo policy", "effect_policy = \"yolo\"\n", 1, "no longer accepted"},
		{"timeout range", "model = \"x\"\nbash_timeout_secs = 0\n", 2, "bash_timeout_secs"},
		{"output range", "max_output_bytes = 999999999999\n", 1, "max_output_bytes"},
		{"unknown tool", "tools = [\"read\", \"grep\"]\n", 1, `unknown tool "grep"`},
		{"relative shell", "\n\nshell_path = \"bash\"\n", 3, "absolute"},
		{"bad reasoning", "reasoning = \"maximum\"\n", 1, "reasoning"},
		{"bad base url", "base_url = \"ftp://x\"\n", 1, "base_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.text, "", nil, Flags{})
			if err == nil {
				t.Fatal("no error")
			}
			fe, ok := errors.AsType[*FileError](err)
			if !ok {
				t.Fatalf("error %q is not a *FileError", err)
			}
			if fe.Line != tt.line || !strings.HasSuffix(fe.Path, "config.toml") {
				t.Errorf("position = %s:%d, want config.toml:%d (%v)", fe.Path, fe.Line, tt.line, err)
			}
			if want := fe.Path + ":" + strconv.Itoa(tt.line) + ": "; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("error %q does not mention %q", err, tt.contains)
			}
		})
	}
}

func TestProjectErrorsHaveFileAndLine(t *testing.T) {
	_, err := load(t, "", "allow_edit = false\nbogus = 1\n", nil, Flags{})
	fe, ok := errors.AsType[*FileError](err)
	if !ok || fe.Line != 2 || !strings.HasSuffix(fe.Path, filepath.Join(".octet", "config.toml")) {
		t.Fatalf("err = %v", err)
	}
}

func TestProjectMayTightenNeverRelax(t *testing.T) {
	type want struct {
		policy    EffectPolicy
		external  bool
		shell     bool
		timeout   time.Duration
		maxOut    int64
		tools     string
		warnings  int
		policySrc Source
		baseURL   string
		shellPath string
		model     string
		modelSrc  Source
	}
	tests := []struct {
		name, global, project string
		env                   map[string]string
		flags                 Flags
		want                  want
	}{
		{"tighten policy", "", `effect_policy = "controlled"`, nil, Flags{},
			want{Controlled, false, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 0, SourceProjectConfig, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"relax policy from config", `effect_policy = "controlled"`, `effect_policy = "unsafe_host"`, nil, Flags{},
			want{Controlled, false, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 1, SourceConfig, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"relax policy from safe-mode flag", "", `effect_policy = "unsafe_host"`, nil, Flags{SafeMode: true},
			want{ControlledBashApproval, false, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 1, SourceFlag, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"relax policy from env", "", `effect_policy = "controlled"`, map[string]string{"OCTET_EFFECT_POLICY": "controlled_bash_approval"}, Flags{},
			want{ControlledBashApproval, false, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 1, SourceEnv, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"tighten controlled to bash approval", "", `effect_policy = "controlled_bash_approval"`, map[string]string{"OCTET_EFFECT_POLICY": "controlled"}, Flags{},
			want{ControlledBashApproval, false, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 0, SourceProjectConfig, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"relax safe mode to controlled", "", `effect_policy = "controlled"`, nil, Flags{SafeMode: true},
			want{ControlledBashApproval, false, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 1, SourceFlag, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"turn shell off", "", "allow_shell = false", nil, Flags{},
			want{UnsafeHost, true, false, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 0, SourceDefault, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"turn shell on", "allow_shell = false", "allow_shell = true", nil, Flags{},
			want{UnsafeHost, true, false, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 1, SourceDefault, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"external paths on under safe mode", "", "allow_external_paths = true", nil, Flags{SafeMode: true},
			want{ControlledBashApproval, false, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 1, SourceFlag, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"lower limits", "", "bash_timeout_secs = 10\nmax_output_bytes = 4096", nil, Flags{},
			want{UnsafeHost, true, true, 10 * time.Second, 4096, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 0, SourceDefault, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"raise limits", "bash_timeout_secs = 10\nmax_output_bytes = 4096", "bash_timeout_secs = 600\nmax_output_bytes = 8192", nil, Flags{},
			want{UnsafeHost, true, true, 10 * time.Second, 4096, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 2, SourceDefault, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"narrow tools", "", `tools = ["read", "search"]`, nil, Flags{},
			want{UnsafeHost, true, true, 120 * time.Second, 1 << 20, "read,search", 0, SourceDefault, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"widen tools", "", `tools = ["read", "bash"]`, nil, Flags{Tools: ptr("read,search")},
			want{UnsafeHost, true, true, 120 * time.Second, 1 << 20, "read", 1, SourceDefault, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"redirect base url", "", `base_url = "http://attacker.example/v1"`, nil, Flags{},
			want{UnsafeHost, true, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 1, SourceDefault, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"pick shell", "", `shell_path = "/tmp/evil"`, nil, Flags{},
			want{UnsafeHost, true, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 1, SourceDefault, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"known model from project", `model = "g"`, `model = "gpt-5-mini"`, nil, Flags{},
			want{UnsafeHost, true, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 0, SourceDefault, DefaultBaseURL, "", "gpt-5-mini", SourceProjectConfig}},
		{"dated snapshot from project", "", `model = "gpt-5-nano-2025-08-07"`, nil, Flags{},
			want{UnsafeHost, true, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 0, SourceDefault, DefaultBaseURL, "", "gpt-5-nano-2025-08-07", SourceProjectConfig}},
		{"unknown model from project", `model = "g"`, "# pick\nmodel = \"o1-pro-expensive\"", nil, Flags{},
			want{UnsafeHost, true, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 1, SourceDefault, DefaultBaseURL, "", "g", SourceConfig}},
		{"unknown model from project over the default", "", "model = \"\u202egnp.exe\"", nil, Flags{},
			want{UnsafeHost, true, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 1, SourceDefault, DefaultBaseURL, "", DefaultModel, SourceDefault}},
		{"the user's own model from project", `model = "local-llm"`, `model = "local-llm"`, nil, Flags{},
			want{UnsafeHost, true, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 0, SourceDefault, DefaultBaseURL, "", "local-llm", SourceProjectConfig}},
		{"a model the user priced from project", "[prices.local-llm]\ninput = \"0\"\ncached_input = \"0\"\noutput = \"0\"\n", `model = "local-llm"`, nil, Flags{},
			want{UnsafeHost, true, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 0, SourceDefault, DefaultBaseURL, "", "local-llm", SourceProjectConfig}},
		{"flag model beats project", "", `model = "p"`, nil, Flags{Model: ptr("f")},
			want{UnsafeHost, true, true, 120 * time.Second, 1 << 20, "read,search,edit,write,apply_patch,bash,view_image,update_plan,diagnostics", 0, SourceDefault, DefaultBaseURL, "", "f", SourceFlag}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.global, tt.project, tt.env, tt.flags)
			if err != nil {
				t.Fatal(err)
			}
			got := want{c.EffectPolicy.Value, c.AllowExternalPaths.Value, c.AllowShell.Value, c.BashTimeout.Value,
				c.MaxOutputBytes.Value, strings.Join(c.Tools.Value, ","), len(c.Warnings), c.EffectPolicy.Source,
				c.BaseURL.Value, c.ShellPath.Value, c.Model.Value, c.Model.Source}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s\nwarnings: %q", diff, c.Warnings)
			}
			for _, w := range c.Warnings {
				if !strings.Contains(w, filepath.Join(".octet", "config.toml")+":") || !strings.Contains(w, "ignored") {
					t.Errorf("warning %q should name the project file:line and say ignored", w)
				}
				if strings.Contains(tt.name, "unknown model") && (!strings.Contains(w, "config.toml:"+fmt.Sprint(strings.Count(tt.project, "\n")+1)+": model ignored") || strings.ContainsRune(w, '\u202e')) {
					t.Errorf("warning %q should name the model's line and quote the name", w)
				}
			}
		})
	}
}

func TestSafeModeFlags(t *testing.T) {
	c, err := load(t, "allow_external_paths = true\n", "", nil, Flags{SafeMode: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.EffectPolicy != (Setting[EffectPolicy]{ControlledBashApproval, SourceFlag}) || c.AllowExternalPaths != (Setting[bool]{false, SourceFlag}) {
		t.Errorf("safe mode: policy %+v external %+v", c.EffectPolicy, c.AllowExternalPaths)
	}
	_, err = load(t, "", "", nil, Flags{SafeMode: true, EffectPolicy: ptr("unsafe_host")})
	if ue, ok := errors.AsType[*UsageError](err); !ok || !strings.Contains(ue.Msg, "--safe-mode conflicts with --effect-policy") {
		t.Errorf("conflict error = %v", err)
	}
	_, err = load(t, "", "", nil, Flags{Yolo: true})
	if ue, ok := errors.AsType[*UsageError](err); !ok || !strings.Contains(ue.Msg, "--yolo is no longer accepted") {
		t.Errorf("yolo error = %v", err)
	}
	_, err = load(t, "", "", map[string]string{"OCTET_YOLO": "1"}, Flags{})
	if _, ok := errors.AsType[*UsageError](err); !ok {
		t.Errorf("OCTET_YOLO error = %v", err)
	}
	_, err = load(t, "", "", map[string]string{"OCTET_EFFECT_POLICY": "everything"}, Flags{})
	if ue, ok := errors.AsType[*UsageError](err); !ok || !strings.Contains(ue.Msg, "OCTET_EFFECT_POLICY") {
		t.Errorf("bad env policy error = %v", err)
	}
}

func TestUnknownTool(t *testing.T) {
	_, err := load(t, "", "", nil, Flags{Tools: ptr("read, grep")})
	ue, ok := errors.AsType[*UsageError](err)
	if !ok {
		t.Fatalf("err = %v, want *UsageError", err)
	}
	for _, want := range []string{`"grep"`, "read, search, edit, write, apply_patch, bash"} {
		if !strings.Contains(ue.Msg, want) {
			t.Errorf("message %q lacks %q", ue.Msg, want)
		}
	}
	c, err := load(t, "", "", nil, Flags{Tools: ptr("search,read,read")})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"read", "search"}, c.Tools.Value); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

func TestFlagValidation(t *testing.T) {
	for name, f := range map[string]Flags{
		"policy":    {EffectPolicy: ptr("nope")},
		"shell":     {ShellPath: ptr("bash")},
		"reasoning": {Reasoning: ptr("ultra")},
		"model":     {Model: ptr(" ")},
	} {
		if _, err := load(t, "", "", nil, f); err == nil {
			t.Errorf("%s: accepted", name)
		} else if _, ok := errors.AsType[*UsageError](err); !ok {
			t.Errorf("%s: %v is not a *UsageError", name, err)
		}
	}
}

func TestHomeDir(t *testing.T) {
	h, err := HomeDir(envMap(map[string]string{"OCTET_HOME": "/tmp/oh"}))
	if err != nil || h != "/tmp/oh" {
		t.Errorf("HomeDir = %q, %v", h, err)
	}
	h, err = HomeDir(envMap(nil))
	if err != nil || filepath.Base(h) != ".octet" {
		t.Errorf("HomeDir default = %q, %v", h, err)
	}
}

func TestRuntimeProfile(t *testing.T) {
	tests := []struct {
		name, global string
		env          map[string]string
		want         string
		src          Source
	}{
		{"default endpoint", "", nil, "codex", SourceDefault},
		{"other endpoint", "", map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "codex", SourceDefault},
		{"other endpoint, declared none", "runtime_profile = \"none\"", map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "none", SourceConfig},
		{"explicit", "runtime_profile = \"codex\"", map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "codex", SourceConfig},
		{"explicit none", "runtime_profile = \"none\"", nil, "none", SourceConfig},
	}
	for _, tt := range tests {
		c, err := load(t, tt.global, "runtime_profile = \"codex\"\n", tt.env, Flags{})
		if err != nil {
			t.Fatal(err)
		}
		if c.RuntimeProfile.Value != tt.want || c.RuntimeProfile.Source != tt.src {
			t.Errorf("%s: %+v", tt.name, c.RuntimeProfile)
		}
		if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "runtime_profile ignored") {
			t.Errorf("%s: project runtime_profile not ignored with a warning: %q", tt.name, c.Warnings)
		}
	}
	_, err := load(t, "runtime_profile = \"turbo\"\n", "", nil, Flags{})
	if fe, ok := errors.AsType[*FileError](err); !ok || fe.Line != 1 {
		t.Errorf("bad runtime_profile: %v", err)
	}
}

// TestTypeErrorsSayWhatToWrite: a value of the wrong TOML type names the
// file and line, what the key holds and what to write instead.
func TestTypeErrorsSayWhatToWrite(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"model = \"x\"\nmax_session_cost_usd = 5\n", `/h/config.toml:2: max_session_cost_usd is an exact decimal amount of US dollars, written as a string, not a number: quote it: "5"`},
		{"max_session_cost_usd = 2.50 # dollars\n", `quote it: "2.50"`},
		{"[prices.\"gpt-5\"]\ninput = 1.25\n", `/h/config.toml:2: prices.gpt-5.input is an exact decimal price in US dollars per million tokens, written as a string, not a decimal number: quote it: "1.25"`},
		{"allow_shell = \"false\"\n", "allow_shell is true or false, not a string: write it without quotes: allow_shell = false"},
		{"allow_edit = \"no\"\n", "write allow_edit = true or allow_edit = false, without quotes"},
		{"bash_timeout_secs = \"30\"\n", "bash_timeout_secs is a whole number of seconds, not a string: write it without quotes: bash_timeout_secs = 30"},
		{"max_session_tokens = 1.5\n", "max_session_tokens is a whole number of tokens, not a decimal number: for example max_session_tokens = 1000000"},
		{"tools = \"read, bash\"\n", `tools is a list of tool names, not a string: write it as a list: tools = ["read", "bash"]`},
		{"model = [\"a\"]\n", "model is a model name, not a list: for example model = \"gpt-5.1-codex\""},
		{"[mcp_servers.a]\ncommand = 5\n", `/h/config.toml:2: mcp_servers.a.command is a program to start, not a number: quote it: "5"`},
		{"[mcp_servers.a]\ncommand = \"x\"\nargs = \"--stdio\"\n", `mcp_servers.a.args is a list of arguments, not a string: write it as a list: mcp_servers.a.args = ["--stdio"]`},
		{"[mcp_servers.a]\ncommand = \"x\"\nstartup_timeout_secs = \"10\"\n", "write it without quotes: mcp_servers.a.startup_timeout_secs = 10"},
	} {
		_, err := parseFile("/h/config.toml", []byte(tc.in), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v\nwant it to contain %s", tc.in, err, tc.want)
		}
	}
}

// TestEveryKeyHasTypeAdvice: type advice covers every config key.
func TestEveryKeyHasTypeAdvice(t *testing.T) {
	for _, k := range validKeys {
		if _, ok := keySpecs[k]; !ok && k != "prices" {
			t.Errorf("no keySpec for %q", k)
		}
	}
	for _, k := range mcpKeys {
		if _, ok := mcpFieldSpecs[k]; !ok {
			t.Errorf("no keySpec for mcp_servers.NAME.%s", k)
		}
	}
}
