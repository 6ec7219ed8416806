package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultProviderIsOpenAI(t *testing.T) {
	c, err := load(t, "", "", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Provider()
	want := Provider{Name: "openai", BaseURL: DefaultBaseURL, WireAPI: WireResponses, EnvKey: "OPENAI_API_KEY", Credentials: "openai", RuntimeProfile: "codex"}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("default provider (-want +got):\n%s", diff)
	}
	// OPENAI_BASE_URL and base_url are the openai provider's, as before.
	c, err = load(t, "base_url = \"http://127.0.0.1:9/v1\"\n", "", map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:8/v1"}, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Provider(); p.BaseURL != "http://127.0.0.1:8/v1" || c.BaseURL.Source != SourceEnv {
		t.Errorf("base URL = %s from %s, want OPENAI_BASE_URL's", p.BaseURL, c.BaseURL.Source)
	}
}

func TestPresets(t *testing.T) {
	cases := []struct {
		name string
		want Provider
	}{
		{"anthropic", Provider{Name: "anthropic", BaseURL: "https://api.anthropic.com/v1", WireAPI: WireAnthropic, EnvKey: "ANTHROPIC_API_KEY", Credentials: "anthropic"}},
		{"openrouter", Provider{Name: "openrouter", BaseURL: "https://openrouter.ai/api/v1", WireAPI: WireChat, EnvKey: "OPENROUTER_API_KEY", Credentials: "openrouter"}},
		{"ollama", Provider{Name: "ollama", BaseURL: "http://localhost:11434/v1", WireAPI: WireChat}},
		{"lmstudio", Provider{Name: "lmstudio", BaseURL: "http://localhost:1234/v1", WireAPI: WireChat}},
	}
	for _, c := range cases {
		// OPENAI_BASE_URL is the openai provider's: it never redirects another.
		cfg, err := load(t, "model_provider = \""+c.name+"\"\n", "", map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:8/v1"}, Flags{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		c.want.RuntimeProfile = "none" // every route but OpenAI's is unqualified unless the user says so
		if diff := cmp.Diff(c.want, cfg.Provider()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
		if cfg.RuntimeProfile != (Setting[string]{"none", SourceDefault}) || cfg.BaseURL.Value != c.want.BaseURL {
			t.Errorf("%s: runtime profile %+v, base URL %+v", c.name, cfg.RuntimeProfile, cfg.BaseURL)
		}
	}
}

func TestAzureNeedsItsEndpoint(t *testing.T) {
	_, err := load(t, "model_provider = \"azure\"\n", "", nil, Flags{})
	if _, ok := errors.AsType[*UsageError](err); !ok || !strings.Contains(err.Error(), "[model_providers.azure]") {
		t.Fatalf("azure without base_url = %v, want a usage error naming the table", err)
	}
	c, err := load(t, `model_provider = "azure"
[model_providers.azure]
base_url = "https://res.openai.azure.com/openai/"
`, "", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	want := Provider{Name: "azure", BaseURL: "https://res.openai.azure.com/openai", WireAPI: WireResponses, EnvKey: "AZURE_OPENAI_API_KEY",
		Credentials: "azure", KeyHeader: "api-key", QueryParams: map[string]string{"api-version": "2025-04-01-preview"}, RuntimeProfile: "none", Source: SourceConfig}
	if diff := cmp.Diff(want, c.Provider()); diff != "" {
		t.Errorf("azure (-want +got):\n%s", diff)
	}
}

func TestUserProvider(t *testing.T) {
	c, err := load(t, `model_provider = "gw"
[model_providers.gw]
base_url = "https://gw.example/v1"
wire_api = "chat"
env_key = "GW_KEY"
credentials = "gw"
headers = { "X-Team" = "core" }
query_params = { tenant = "a" }
stream_idle_timeout_secs = 30
open_timeout_secs = 10
runtime_profile = "none"
`, "", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	want := Provider{Name: "gw", BaseURL: "https://gw.example/v1", WireAPI: WireChat, EnvKey: "GW_KEY", Credentials: "gw",
		Headers: map[string]string{"X-Team": "core"}, QueryParams: map[string]string{"tenant": "a"}, RuntimeProfile: "none",
		StreamIdleTimeout: 30 * time.Second, OpenTimeout: 10 * time.Second, Source: SourceConfig}
	if diff := cmp.Diff(want, c.Provider()); diff != "" {
		t.Errorf("gw (-want +got):\n%s", diff)
	}
	// A table changes only the fields it names of a preset.
	c, err = load(t, "model_provider = \"ollama\"\n[model_providers.ollama]\nbase_url = \"http://127.0.0.1:5/v1\"\n", "", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Provider(); p.BaseURL != "http://127.0.0.1:5/v1" || p.WireAPI != WireChat || p.EnvKey != "" {
		t.Errorf("overridden preset = %+v", p)
	}
}

func TestProviderConfigErrors(t *testing.T) {
	cases := map[string]struct{ text, want string }{
		"codex on chat": {"[model_providers.gw]\nbase_url = \"https://x/v1\"\nwire_api = \"chat\"\nruntime_profile = \"codex\"\n",
			`config.toml:1: model_providers.gw: runtime_profile "codex" asserts an OpenAI Responses route`},
		"credential header": {"[model_providers.gw]\nbase_url = \"https://x/v1\"\nheaders = { Authorization = \"Bearer x\" }\n",
			"Authorization carries a credential"},
		"codex spelling": {"[model_providers.gw]\nbase_url = \"https://x/v1\"\nhttp_headers = { a = \"b\" }\n",
			`unknown key "model_providers.gw.http_headers" of a provider; valid keys are base_url, `},
		"no base_url":      {"[model_providers.gw]\nwire_api = \"chat\"\n", "base_url is required for a provider that is not built in"},
		"wire":             {"[model_providers.gw]\nbase_url = \"https://x/v1\"\nwire_api = \"grpc\"\n", `wire_api "grpc" is not one of responses, chat, anthropic`},
		"key header":       {"[model_providers.gw]\nbase_url = \"https://x/v1\"\nkey_header = \"cookie\"\n", `key_header "cookie" is not one of`},
		"env key":          {"[model_providers.gw]\nbase_url = \"https://x/v1\"\nenv_key = \"A B\"\n", `env_key "A B" is not an environment variable name`},
		"timeout":          {"[model_providers.gw]\nbase_url = \"https://x/v1\"\nstream_idle_timeout_secs = 0\n", "stream_idle_timeout_secs 0 is out of range"},
		"unknown provider": {"model_provider = \"nope\"\n", `config.toml:1: model_provider: "nope" is neither built in nor a [model_providers.nope] table`},
		"model window":     {"[models.\"m\"]\ncontext_window = 10\n", `models."m": context_window 10 is out of range`},
		"model key":        {"[models.\"m\"]\nwindow = 10\n", `unknown key "models.m.window" of a model`},
		"model price":      {"[models.\"m\"]\nprice = { input = \"1\" }\n", `models."m": price field cached_input`},
		"price twice":      {"[models.\"m\"]\nprice = { input = \"1\", cached_input = \"1\", output = \"1\" }\n[prices.m]\ninput = \"1\"\ncached_input = \"1\"\noutput = \"1\"\n", "price is also set by [prices"},
		"header type":      {"[model_providers.gw]\nbase_url = \"https://x/v1\"\nopen_timeout_secs = \"10\"\n", "model_providers.gw.open_timeout_secs is a whole number of seconds"},
	}
	for name, c := range cases {
		_, err := load(t, c.text, "", nil, Flags{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", name, err, c.want)
		}
	}
}

func TestProjectChoosesOnlyAmongTheUsersProviders(t *testing.T) {
	global := `[model_providers.ollama]
base_url = "http://127.0.0.1:5/v1"
[model_providers.gw]
base_url = "https://gw.example/v1"
`
	c, err := load(t, global, "model_provider = \"gw\"\n", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ModelProvider != (Setting[string]{"gw", SourceProjectConfig}) || c.Provider().BaseURL != "https://gw.example/v1" {
		t.Errorf("a project choosing the user's provider: %+v, %s", c.ModelProvider, c.Provider().BaseURL)
	}
	// A preset the user never configured is not theirs to be chosen for.
	c, err = load(t, global, "model_provider = \"openrouter\"\n", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ModelProvider.Value != "openai" || !warned(c, "model_provider ignored") {
		t.Errorf("a project chose an unconfigured provider: %+v %q", c.ModelProvider, c.Warnings)
	}
	// Never define or change one, nor declare models, nor move base_url.
	c, err = load(t, global, `model_provider = "evil"
base_url = "https://evil.example/v1"
[model_providers.evil]
base_url = "https://evil.example/v1"
[model_providers.gw]
base_url = "https://evil.example/v1"
[models."m"]
context_window = 100000000
`, nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Providers {
		if strings.Contains(p.BaseURL, "evil") {
			t.Errorf("a project changed provider %s: %s", p.Name, p.BaseURL)
		}
	}
	if c.Provider().Name != "openai" || c.BaseURL.Value != DefaultBaseURL || c.Models != nil {
		t.Errorf("a project redirected the route: %+v, models %v", c.Provider(), c.Models)
	}
	for _, key := range []string{"model_providers ignored", "models ignored", "base_url ignored", "model_provider ignored"} {
		if !warned(c, key) {
			t.Errorf("no warning %q in %q", key, c.Warnings)
		}
	}
}

func warned(c *Config, s string) bool {
	for _, w := range c.Warnings {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

func TestModelTables(t *testing.T) {
	c, err := load(t, `[models."llama3.2"]
context_window = 131072
max_output_tokens = 8192
reasoning = true
images = false
price = { input = "0.1", cached_input = "0.05", output = "0.2" }
`, "model = \"llama3.2\"\n", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Models["llama3.2"]
	if *m.ContextWindow != 131072 || *m.MaxOutputTokens != 8192 || !*m.Reasoning || *m.Images || m.ParallelToolCalls != nil {
		t.Errorf("model spec = %+v", m)
	}
	if c.Prices.Value["llama3.2"].Output != "0.2" {
		t.Errorf("the model's price is not in the price table: %v", c.Prices.Value)
	}
	// A declared model is one a project may select.
	if c.Model != (Setting[string]{"llama3.2", SourceProjectConfig}) {
		t.Errorf("model = %+v, want the project's declared model", c.Model)
	}
}

func TestMaxRetryWait(t *testing.T) {
	c, err := load(t, "max_retry_wait_secs = 600\n", "max_retry_wait_secs = 60\n", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxRetryWait != (Setting[time.Duration]{time.Minute, SourceProjectConfig}) {
		t.Errorf("max retry wait = %+v, want the project's lower bound", c.MaxRetryWait)
	}
	c, err = load(t, "max_retry_wait_secs = 600\n", "max_retry_wait_secs = 0\n", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxRetryWait.Value != 10*time.Minute || !warned(c, "max_retry_wait_secs ignored") {
		t.Errorf("a project removed the bound: %+v", c.MaxRetryWait)
	}
}

func TestLoadProviderKey(t *testing.T) {
	home := t.TempDir()
	writeFile(t, CredentialsPath(home), "openai_api_key = \"sk-file\"\n[api_keys]\nanthropic = \"sk-ant-file\"\n", 0o600)
	presets := ProviderPresets()
	for _, c := range []struct {
		p         Provider
		env       map[string]string
		key, from string
	}{
		{presets["anthropic"], map[string]string{"ANTHROPIC_API_KEY": " sk-ant-env "}, "sk-ant-env", "ANTHROPIC_API_KEY"},
		{presets["anthropic"], nil, "sk-ant-file", CredentialsPath(home)},
		{presets["openai"], nil, "sk-file", CredentialsPath(home)},
		{presets["ollama"], nil, "", ""},
	} {
		k, from, err := LoadProviderKey(home, c.p, envMap(c.env))
		if err != nil || k.Reveal() != c.key || from != c.from {
			t.Errorf("%s: key %q from %q, %v; want %q from %q", c.p.Name, k.Reveal(), from, err, c.key, c.from)
		}
	}
	_, _, err := LoadProviderKey(home, presets["openrouter"], envMap(nil))
	if _, ok := errors.AsType[*MissingKeyError](err); !ok || !strings.Contains(err.Error(), "set OPENROUTER_API_KEY, or write openrouter = \"...\" under [api_keys]") {
		t.Errorf("missing openrouter key: %v", err)
	}
	if err := os.Remove(CredentialsPath(home)); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadProviderKey(home, presets["anthropic"], envMap(nil))
	if _, ok := errors.AsType[*MissingKeyError](err); !ok {
		t.Errorf("no file, no variable: %v", err)
	}
	// The file's check (owner-private) holds for every entry.
	writeFile(t, CredentialsPath(home), "[api_keys]\nanthropic = \"sk-ant-file\"\n", 0o644)
	if _, _, err := LoadProviderKey(home, presets["anthropic"], envMap(nil)); err == nil {
		t.Error("a world-readable credentials file was read")
	}
	writeFile(t, filepath.Join(home, "credentials"), "[api_keys]\n\"bad name\" = \"sk-secret-value\"\n", 0o600)
	if _, _, err := LoadProviderKey(home, presets["anthropic"], envMap(nil)); err == nil || strings.Contains(err.Error(), "sk-secret-value") {
		t.Errorf("bad entry name: %v", err)
	}
}

// TestReadmeProviderExamples: every configuration example of the
// README's "Using other providers" loads, and selects what it says.
func TestReadmeProviderExamples(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "### Using other providers\n")
	if !ok {
		t.Fatal("README has no Using other providers section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var n int
	selected := map[string]bool{}
	for rest := section; ; {
		_, after, ok := strings.Cut(rest, "```toml\n")
		if !ok {
			break
		}
		block, tail, _ := strings.Cut(after, "```\n")
		rest = tail
		n++
		c, err := load(t, block, "", nil, Flags{})
		if err != nil {
			t.Errorf("example %d does not load: %v\n%s", n, err, block)
			continue
		}
		if !strings.Contains(block, `model_provider = "`+c.ModelProvider.Value+`"`) || c.BaseURL.Value == "" {
			t.Errorf("example %d selects %s at %q", n, c.ModelProvider.Value, c.BaseURL.Value)
		}
		selected[c.ModelProvider.Value] = true
	}
	for name := range ProviderPresets() {
		if !selected[name] {
			t.Errorf("no example selects the %s preset", name)
		}
	}
	if len(selected) <= len(ProviderPresets()) {
		t.Errorf("no example defines a provider of its own")
	}
}

func TestKnownKeys(t *testing.T) {
	home := t.TempDir()
	writeFile(t, CredentialsPath(home), "openai_api_key = \"sk-file\"\n[api_keys]\ngw = \"gw-file\"\n", 0o600)
	var got []string
	for _, k := range KnownKeys(home, envMap(map[string]string{"ANTHROPIC_API_KEY": "sk-ant-env", "UNRELATED": "x"})) {
		got = append(got, k.Reveal())
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"gw-file", "sk-ant-env", "sk-file"}, got); diff != "" {
		t.Errorf("known keys (-want +got):\n%s", diff)
	}
}
