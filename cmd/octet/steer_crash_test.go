//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// steerConfig is a Codex WebSocket route with a model whose table
// declares native steering.
const steerConfig = `transport = "websocket"
runtime_profile = "codex"
model = "astra"

[models."astra"]
context_window = 200000
native_steering = true
`

// TestNativeSteeringSIGKILLBeforeSettlement is the seed's crash case
// through the real binary: octet lsp sends a steering input into the
// response in progress (octet/steer → response.steer after its intent
// is durable); the provider accepts it, ends the response as steered and
// starts the successor, whose response.created makes the input a
// steering entry; killed (SIGKILL) before the successor settles, the
// session's next process records the operation as unresolved with
// uncertain usage, and refuses a new prompt on it — it never guesses
// from the text whether the input was applied, nor sends it again.
func TestNativeSteeringSIGKILLBeforeSettlement(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("the first part of a long answer").SteerAfter(5, true, providertest.Stall()))
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(steerConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	cmd := lspCommand(t, 60*time.Second)
	cmd.Env = env
	c, _, stderr := startLSP(t, cmd)
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "capabilities": map[string]any{
		"experimental": map[string]any{"octet": map[string]any{"events": true}}}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)
	c.next++
	c.send(map[string]any{"id": c.next, "method": "octet/prompt", "params": map[string]any{"sessionId": sid, "text": "write a long answer"}})
	var runID any
	steered := false
	for !steered {
		m := c.read()
		if m["method"] != nil && m["id"] != nil {
			c.send(map[string]any{"id": m["id"], "result": nil})
			continue
		}
		if m["method"] != "octet/event" {
			continue
		}
		p := m["params"].(map[string]any)
		switch p["event"].(map[string]any)["kind"] {
		case "run_started":
			runID = p["runId"]
		case "output_delta": // the response is past response.created
			c.next++
			c.send(map[string]any{"id": c.next, "method": "octet/steer", "params": map[string]any{"runId": runID, "text": "STEER-TEXT"}})
			steered = true
		}
	}
	files, _ := filepath.Glob(filepath.Join(home, "sessions", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files %v", files)
	}
	// Wait until the input is applied (its steering entry durable) while
	// the successor stalls: between application and settlement.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		data, _ := os.ReadFile(files[0])
		if strings.Contains(string(data), `"native_steering":{"operation"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the steering input was never applied; client events %d\nstderr: %s", len(srv.Requests()), stderr.String())
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	cmd2 := lspCommand(t, 60*time.Second)
	cmd2.Env = env
	c2, stdin2, stderr2 := startLSP(t, cmd2)
	c2.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "capabilities": map[string]any{}}, nil, nil)
	c2.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	c2.call("octet/session/resume", map[string]any{"sessionId": sid}, nil, nil)
	before := len(srv.Requests())
	e := c2.callError("octet/prompt", map[string]any{"sessionId": sid, "text": "and now?"})
	if msg, _ := e["message"].(string); !strings.Contains(msg, "native steering operation") || !strings.Contains(msg, "start a new session") {
		t.Fatalf("prompt on the unresolved session: %v\nstderr: %s", e, stderr2.String())
	}
	if n := len(srv.Requests()); n != before {
		t.Fatalf("the refused prompt sent %d requests", n-before)
	}
	c2.call("shutdown", nil, nil, nil)
	c2.send(map[string]any{"method": "exit"})
	stdin2.Close()
	cmd2.Wait()

	s, err := session.Inspect(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	un := s.UnresolvedSteering()
	if len(un) != 1 || !s.Totals().Uncertain {
		t.Fatalf("unresolved %v, uncertain %v", un, s.Totals().Uncertain)
	}
	steering := 0
	for _, e := range s.Branch() {
		if e.Type == session.EntrySteering && e.Text == "STEER-TEXT" {
			steering++
			if e.NativeSteering == nil || e.NativeSteering.Operation != un[0].ID {
				t.Errorf("steering entry %+v is not linked to the operation %s", e.NativeSteering, un[0].ID)
			}
		}
	}
	if steering != 1 {
		t.Fatalf("%d steering entries, want the applied one only", steering)
	}
}
