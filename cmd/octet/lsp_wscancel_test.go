//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestLSPBinaryWebSocketCancelThenPrompt runs the real octet lsp with
// transport = "websocket": a prompt whose response stalls after
// response.created is cancelled with octet/cancel, and the next prompt of
// the same session reaches the provider and completes (it used to sit at
// "Thinking" until shutdown).
func TestLSPBinaryWebSocketCancelThenPrompt(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Stall().ForRequestContaining("FIRST-PROMPT"), providertest.Text("second answer").ForRequestContaining("SECOND-PROMPT"))
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("transport = \"websocket\"\nruntime_profile = \"codex\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := lspCommand(t, 60*time.Second)
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "capabilities": map[string]any{
		"experimental": map[string]any{"octet": map[string]any{"events": true}}}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)

	c.next++
	promptID := float64(c.next)
	c.send(map[string]any{"id": c.next, "method": "octet/prompt", "params": map[string]any{"sessionId": sid, "text": "FIRST-PROMPT"}})
	var runID any
	var result map[string]any
	cancelled := false
	for result == nil {
		m := c.read()
		switch {
		case m["id"] == promptID && m["method"] == nil:
			if result, _ = m["result"].(map[string]any); result == nil {
				t.Fatalf("first prompt answered %v", m)
			}
		case m["method"] != nil && m["id"] != nil:
			c.send(map[string]any{"id": m["id"], "result": nil})
		case m["method"] == "octet/event":
			p := m["params"].(map[string]any)
			if ev := p["event"].(map[string]any); ev["kind"] == "run_started" {
				runID = p["runId"]
			}
		}
		if !cancelled && runID != nil {
			for deadline := time.Now().Add(20 * time.Second); len(srv.Requests()) == 0; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the first prompt never reached the provider\nstderr: %s", stderr.String())
				}
			}
			time.Sleep(100 * time.Millisecond) // response.created is read: the stream is open
			c.next++
			c.send(map[string]any{"id": c.next, "method": "octet/cancel", "params": map[string]any{"runId": runID}})
			cancelled = true
		}
	}
	if result["outcome"] != "cancelled" {
		t.Fatalf("first prompt %v, want cancelled\nstderr: %s", result, stderr.String())
	}
	done := make(chan map[string]any, 1)
	go func() {
		done <- c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "SECOND-PROMPT"}, nil, nil)
	}()
	select {
	case res := <-done:
		if res["outcome"] != "completed" {
			t.Fatalf("second prompt %v\nstderr: %s", res, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the prompt after the cancelled one never finished; requests seen %d\nstderr: %s", len(srv.Requests()), stderr.String())
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	cmd.Wait()
}
