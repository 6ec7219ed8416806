//go:build unix

package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestLSPBinaryPrewarm runs the real octet lsp with prewarm = true on
// the Codex WebSocket route: opening a session sends one warm-up
// (generate: false) carrying what the first prompt's request then
// carries — model, instructions, tools, reasoning — over the same
// socket, and the prompt completes after it. Without the key nothing is
// warmed (TestLSPBinaryWebSocketAndContextReload counts its requests).
func TestLSPBinaryPrewarm(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Reply().WithUsage(provider.Usage{InputTokens: 900, CachedTokens: 0}), providertest.Text("ok"))
	home, ws := t.TempDir(), t.TempDir()
	cfg := "transport = \"websocket\"\nruntime_profile = \"codex\"\nprewarm = true\nreasoning = \"high\"\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := lspCommand(t, 60*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	c.initialize(ws)
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)
	if res := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "hello"}, nil, nil); res["outcome"] != "completed" {
		t.Fatalf("prompt: %v\nstderr: %s", res, stderr.String())
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want the warm-up and the prompt's\nstderr: %s", len(reqs), stderr.String())
	}
	warm, real := reqs[0], reqs[1]
	if warm.Body["generate"] != false {
		t.Fatalf("the first request is not a warm-up: generate %v", warm.Body["generate"])
	}
	if _, ok := real.Body["generate"]; ok {
		t.Fatalf("the prompt's request carries generate %v", real.Body["generate"])
	}
	for _, k := range []string{"model", "instructions", "tools", "reasoning", "include", "prompt_cache_key", "parallel_tool_calls"} {
		if !reflect.DeepEqual(warm.Body[k], real.Body[k]) {
			t.Errorf("%s: warm-up %v, prompt %v", k, warm.Body[k], real.Body[k])
		}
	}
	if r, _ := real.Body["reasoning"].(map[string]any); r["effort"] != "high" {
		t.Errorf("reasoning %v, want high", real.Body["reasoning"])
	}
	if warm.Transport != "websocket" || warm.RemoteAddr != real.RemoteAddr {
		t.Errorf("warm-up over %s from %s, prompt from %s: want the session's one websocket", warm.Transport, warm.RemoteAddr, real.RemoteAddr)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("octet lsp exit: %v\nstderr: %s", err, stderr.String())
	}
}
