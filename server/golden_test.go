package server

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

var update = flag.Bool("update", false, "rewrite the server sections of testdata/*.txtar")

// TestWireTranscripts replays the client messages of each
// testdata/*.txtar against a real server and compares every message the
// server wrote, with volatile fields normalized, to the "server" section.
// Sections: "client" (one JSON message per line, sent in order; a request
// waits for its answer), "answers" (method → result for server→client
// requests), "turns" (one scripted provider answer per line) and "server".
// Run with -update to rewrite the "server" sections.
func TestWireTranscripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txtar")
	if len(files) == 0 {
		t.Fatal("no transcripts")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			sec := map[string][]byte{}
			for _, f := range ar.Files {
				sec[f.Name] = f.Data
			}
			// Not inside a testing/synctest bubble: jsonrpc2 v1.0.1 pools
			// its call waiters (each with a channel) in a sync.Pool, and a
			// waiter created in a bubble and reused by a later test outside
			// it is a fatal "select on synctest channel from outside
			// bubble". The provider still plays in process (no sockets).
			got := replay(t, sec)
			if *update {
				for i := range ar.Files {
					if ar.Files[i].Name == "server" {
						ar.Files[i].Data = got
					}
				}
				if _, ok := sec["server"]; !ok {
					ar.Files = append(ar.Files, txtar.File{Name: "server", Data: got})
				}
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if want := sec["server"]; !bytes.Equal(got, want) {
				t.Errorf("server transcript differs (run with -update to accept):\n--- got ---\n%s\n--- want ---\n%s", got, want)
			}
		})
	}
}

// replay runs one transcript and returns the normalized server messages.
func replay(t *testing.T, sec map[string][]byte) []byte {
	st := buildStack(t, tools.Controlled, false, true)
	for _, line := range lines(sec["turns"]) {
		st.Provider.Enqueue(providertest.Text(line))
	}
	answers := map[string]json.RawMessage{}
	for _, line := range lines(sec["answers"]) {
		method, result, _ := strings.Cut(line, " ")
		answers[method] = json.RawMessage(result)
	}
	c, served := newRawClient(t, Options{Runtime: st.Runtime, Version: "test"})
	var out []map[string]any
	session := ""
	for _, line := range lines(sec["client"]) {
		line = strings.ReplaceAll(line, "$WORKSPACE", st.Workspace)
		line = strings.ReplaceAll(line, "$SESSION", session)
		var msg map[string]any
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("bad client line %q: %v", line, err)
		}
		c.write(frame(line))
		id, isCall := msg["id"]
		if msg["method"] == "exit" {
			select {
			case <-served:
			case <-time.After(editorTimeout):
				t.Fatal("server did not exit")
			}
			served <- nil
			continue
		}
		if !isCall {
			continue
		}
		for {
			m := c.read()
			out = append(out, m)
			if method, ok := m["method"].(string); ok && m["id"] != nil {
				res, ok := answers[method]
				if !ok {
					res = json.RawMessage("null")
				}
				b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": res})
				c.write(frame(string(b)))
				continue
			}
			if _, hasMethod := m["method"]; !hasMethod && fmt.Sprint(m["id"]) == fmt.Sprint(id) {
				if r, ok := m["result"].(map[string]any); ok && r["sessionId"] != nil && session == "" {
					session, _ = r["sessionId"].(string)
				}
				break
			}
		}
	}
	return normalize(out, st.Workspace)
}

func lines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// volatileKeys hold values that differ on every run.
var volatileKeys = map[string]bool{
	"sessionId": true, "runId": true, "entryId": true, "messageId": true, "digest": true,
	"expiresAt": true, "createdAt": true, "updatedAt": true, "time": true, "activeRunId": true,
	"epoch": true,
}

var idPattern = regexp.MustCompile(`\brun_[0-9a-f]{8,}\b`)

// normalize renders messages one per line with sorted keys, replacing
// volatile values by placeholders numbered in order of appearance.
func normalize(msgs []map[string]any, workspace string) []byte {
	names := map[string]string{}
	count := map[string]int{}
	placeholder := func(key, v string) string {
		if p, ok := names[v]; ok {
			return p
		}
		count[key]++
		p := fmt.Sprintf("<%s-%d>", key, count[key])
		names[v] = p
		return p
	}
	var walk func(key string, v any) any
	walk = func(key string, v any) any {
		switch x := v.(type) {
		case map[string]any:
			if key == "sandbox" {
				// The OS sandbox's mechanism and ABI are the host's.
				return "<host sandbox>"
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				x[k] = walk(k, x[k])
			}
			return x
		case []any:
			for i := range x {
				x[i] = walk(key, x[i])
			}
			return x
		case string:
			if volatileKeys[key] && x != "" {
				return placeholder(key, x)
			}
			x = strings.ReplaceAll(x, workspace, "$WORKSPACE")
			return idPattern.ReplaceAllStringFunc(x, func(id string) string {
				if p, ok := names[id]; ok {
					return p
				}
				return placeholder("runId", id)
			})
		}
		return v
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, m := range msgs {
		_ = enc.Encode(walk("", m))
	}
	return b.Bytes()
}
