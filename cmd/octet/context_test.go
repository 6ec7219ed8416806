package main

import (
	"io"
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
	ws := &workspaces{log: newLogger(io.Discard, func(string) (string, bool) { return "", false }), contexts: map[string]*watchedContext{}}
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
	ws.close() // must return: the watcher goroutine ends
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
// lsp runtime does (workspaces.newAgent), changes AGENTS.md while the
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
	ws := &workspaces{e: env{lookup: lookup}, log: newLogger(io.Discard, lookup), contexts: map[string]*watchedContext{}}
	defer ws.close()
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
