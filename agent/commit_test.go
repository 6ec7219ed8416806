package agent

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// TestResultCommit: a tool's Result.Commit learns whether its result
// became durable whole: true after the append, false when the result limit
// cut it or the session could not take it.
func TestResultCommit(t *testing.T) {
	cases := []struct {
		name      string
		text      string
		maxResult int
		want      string
	}{
		{"durable", "short", 0, "true"},
		{"cut by the result limit", strings.Repeat("x", 4096), 1024, "false"},
		{"not saved", strings.Repeat("x", session.MaxRecordBytes), session.MaxRecordBytes + 1<<10, "false"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			var path string
			tool := &probeTool{name: "lease", effect: tools.Pure, onExec: func(context.Context, tools.Invocation) (tools.Result, error) {
				return tools.Result{Text: c.text, Commit: func(durable bool) {
					// On true the result is already in the file.
					inFile := strings.Contains(string(mustRead(path)), `"result":{"call_id":"c1"`)
					mu.Lock()
					defer mu.Unlock()
					if durable && !inFile {
						got = append(got, "true-before-append")
						return
					}
					got = append(got, map[bool]string{true: "true", false: "false"}[durable])
				}}, nil
			}}
			h := newHarness(t, harnessOpt{policy: tools.UnsafeHost, extra: []tools.Tool{tool}, maxResult: c.maxResult})
			path = h.sess.Path()
			h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "lease", `{"n":1}`)), pt.Text("done"))
			r := h.prompt("go", PromptOptions{})
			drain(t, r)
			r.Wait()
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || got[0] != c.want {
				t.Fatalf("Commit calls %v, want exactly [%s]", got, c.want)
			}
		})
	}
}

func mustRead(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}
