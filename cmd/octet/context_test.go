package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/config"
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
