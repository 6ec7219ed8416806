package stack

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/harness"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestLSPContextReloads checks the lsp wiring: one watched context set per
// workspace, reloaded when AGENTS.md changes, stopped on close.
func TestLSPContextReloads(t *testing.T) {
	home, root := t.TempDir(), t.TempDir()
	agents := filepath.Join(root, "AGENTS.md")
	if err := os.WriteFile(agents, []byte("rule one"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := NewWorkspaces(func(string) (string, bool) { return "", false }, config.Flags{}, slog.New(slog.DiscardHandler))
	cfg := &config.Config{Home: home}
	set := ws.contextFor(cfg, root)
	if again := ws.contextFor(cfg, root); again != set {
		t.Error("a second session in the same workspace got a second watcher")
	}
	if !strings.Contains(set.Instructions(), "rule one") {
		t.Fatalf("instructions = %q", set.Instructions())
	}
	if err := os.WriteFile(agents, []byte("rule two"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(set.Instructions(), "rule two") {
		if time.Now().After(deadline) {
			t.Fatalf("AGENTS.md change not picked up: %q", set.Instructions())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ws.Close() // must return: the watcher goroutine ends
}

// runToEnd prompts a and waits for the run, draining its events.
func runToEnd(t *testing.T, a *agent.Agent, prompt string) agent.RunResult {
	t.Helper()
	run, err := a.Prompt(t.Context(), prompt, agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range run.Events() {
	}
	return run.Wait()
}

// TestLSPContextReloadReachesOpenSession builds an agent exactly as the
// lsp runtime does (Workspaces.newAgent), changes AGENTS.md while the
// session is idle, and checks that the next provider request carries the
// new text; after the server closes the session, reloads no longer reach
// the agent.
func TestLSPContextReloadReachesOpenSession(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("one"), providertest.Text("two"))
	home, root := t.TempDir(), t.TempDir()
	agents := filepath.Join(root, "AGENTS.md")
	if err := os.WriteFile(agents, []byte("rule one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"OCTET_HOME": home, "OPENAI_BASE_URL": srv.URL()}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	ws := NewWorkspaces(lookup, config.Flags{}, slog.New(slog.DiscardHandler))
	defer ws.Close()
	sess, err := session.Create(filepath.Join(home, "sessions"), session.Header{Cwd: root})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	built, err := ws.newAgent(t.Context(), host.AgentSpec{Session: sess, Workspace: root, Principal: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if res := runToEnd(t, built.Agent, "first"); res.Outcome != agent.OutcomeCompleted {
		t.Fatalf("first run: %+v", res)
	}
	if err := os.WriteFile(agents, []byte("rule two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return strings.Contains(built.Agent.Instructions(), "rule two") })
	if res := runToEnd(t, built.Agent, "second"); res.Outcome != agent.OutcomeCompleted {
		t.Fatalf("second run: %+v", res)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	first, _ := reqs[0].Body["instructions"].(string)
	second, _ := reqs[1].Body["instructions"].(string)
	if !strings.Contains(first, "rule one") || !strings.Contains(second, "rule two") || strings.Contains(second, "rule one") {
		t.Fatalf("instructions:\nfirst:  %q\nsecond: %q", first, second)
	}
	if !strings.HasPrefix(second, harness.Instructions(harness.Options{})) {
		t.Errorf("reloaded instructions lost the built-in prompt: %q", second)
	}

	// Closed by the server: later reloads leave the agent alone.
	if err := built.Close(); err != nil {
		t.Fatal(err)
	}
	set := ws.contexts[root].set
	gen := set.Generation()
	if err := os.WriteFile(agents, []byte("rule three\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return set.Generation() > gen && strings.Contains(set.Instructions(), "rule three") })
	if got := built.Agent.Instructions(); strings.Contains(got, "rule three") {
		t.Errorf("a closed session's agent still follows AGENTS.md: %q", got)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestModelResolver: octet lsp allows the model table and the configured
// model (a proxy's own name, say); any other name is refused with the list.
func TestModelResolver(t *testing.T) {
	cfg := config.Defaults()
	cfg.Model.Value = "my-proxy-model"
	cfg.Models = map[string]config.ModelSpec{"llama3.2": {ContextWindow: ptrTo(int64(131072))}}
	resolve := modelResolver(&cfg)
	if m, err := resolve("llama3.2"); err != nil || m.ContextWindow != 131072 || m.Assumed {
		t.Errorf("declared model: %+v, %v", m, err)
	}
	if m, err := resolve("my-proxy-model"); err != nil || m.ContextWindow == 0 {
		t.Errorf("configured model: %+v, %v", m, err)
	}
	if m, err := resolve("gpt-5"); err != nil || m.Name != "gpt-5" {
		t.Errorf("gpt-5: %+v, %v", m, err)
	}
	_, err := resolve("gpt-nope")
	if err == nil || !strings.Contains(err.Error(), "gpt-5.1-codex") || !strings.Contains(err.Error(), "my-proxy-model (configured)") || !strings.Contains(err.Error(), "llama3.2 (declared)") {
		t.Errorf("gpt-nope: %v, want a refusal listing the allowed names", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestLSPKeyFollowsTheWorkspacesProvider: octet lsp serves workspaces
// whose project configs may select different providers of the user's;
// each gets its own provider's key. (It used to read one key, for the
// first configuration, and send it to every workspace's provider.)
func TestLSPKeyFollowsTheWorkspacesProvider(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[model_providers.gw]\nbase_url = \"https://gw.example/v1\"\nwire_api = \"chat\"\nenv_key = \"GW_KEY\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, gw := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(gw, ".octet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gw, ".octet", "config.toml"), []byte("model_provider = \"gw\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"OCTET_HOME": home, "OPENAI_API_KEY": "sk-openai-key", "GW_KEY": "gw-key"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	ws := NewWorkspaces(lookup, config.Flags{}, slog.New(slog.DiscardHandler))
	for _, c := range []struct{ dir, want string }{{plain, "sk-openai-key"}, {gw, "gw-key"}, {plain, "sk-openai-key"}} {
		cfg, err := LoadConfig(lookup, c.dir, config.Flags{}, ws.log)
		if err != nil {
			t.Fatal(err)
		}
		key, err := ws.credentials(cfg)
		if err != nil || key.Reveal() != c.want {
			t.Errorf("workspace with provider %s got key %q (%v), want %q", cfg.Provider().Name, key.Reveal(), err, c.want)
		}
	}
}
