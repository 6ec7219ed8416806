package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider/providertest"
)

// cancelOnWrite is a stderr that cancels the command once a line
// containing marker was written.
type cancelOnWrite struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.marker) {
		w.cancel()
	}
	return len(p), nil
}

func (w *cancelOnWrite) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestExecNamesConnectionFailureAtFirstRetry: with the provider closing
// every connection before it answers `octet exec` names the failure as it
// is at the very first retry, not as a stream interruption, and the --json
// provider_retry event carries the same cause. (A refused loopback port
// is not retried at all: TestExecLocalServerNotRunning.)
func TestExecNamesConnectionFailureAtFirstRetry(t *testing.T) {
	const want = "the provider did not answer the request: the connection was closed"
	for _, jsonOut := range []bool{false, true} {
		x := newExecEnv(t, providertest.Refuse(), providertest.Refuse(), providertest.Refuse())
		x.writeGlobalConfig(t, "runtime_profile = \"codex\"\n")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		stdout := &cancelOnWrite{marker: "\x00never", cancel: cancel}
		stderr := &cancelOnWrite{marker: "↻", cancel: cancel}
		args := []string{"exec", "hi"}
		if jsonOut {
			args = []string{"exec", "--json", "hi"}
			stdout.marker, stderr.marker = `"kind":"provider_retry"`, "\x00never"
		}
		run(ctx, args, env{
			stdin: strings.NewReader(""), stdout: stdout, stderr: stderr,
			lookup: func(k string) (string, bool) { v, ok := x.vars[k]; return v, ok },
			cwd:    x.ws,
		})
		cancel()
		if jsonOut {
			line := firstLineWith(stdout.String(), `"kind":"provider_retry"`)
			if !strings.Contains(line, `"cause":"`+want+`"`) || !strings.Contains(line, `"attempt":1`) {
				t.Fatalf("first provider_retry event %s lacks the cause %q", line, want)
			}
			continue
		}
		line := firstLineWith(stderr.String(), "↻")
		if !strings.Contains(line, want) || !strings.Contains(line, "retrying 1/") || strings.Contains(line, "stream interrupted") {
			t.Fatalf("first retry line %q, want the cause %q\nstderr:\n%s", line, want, stderr.String())
		}
	}
}

func firstLineWith(text, sub string) string {
	for l := range strings.SplitSeq(text, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestRenderUnrecordedResult: a call whose result could not be saved is
// shown as having run with its outcome unknown to the session, never as
// done or failed.
func TestRenderUnrecordedResult(t *testing.T) {
	var out, notes bytes.Buffer
	r := newTextRenderer(&out, &notes, true)
	r.event(&agent.ToolStarted{CallID: "c1", Tool: "bash"})
	r.event(&agent.ToolFinished{CallID: "c1", IsError: false, Unrecorded: true})
	got := notes.String()
	if !strings.Contains(got, "result could not be saved") || strings.Contains(got, "✓ done") || strings.Contains(got, "✗ failed") {
		t.Errorf("notes = %q", got)
	}
}

// TestRenderLongRetryDelay: a provider's Retry-After of a day is shown
// as a duration with how to stop it, not as 86400000ms, and cancelling
// the wait ends the run at once.
func TestRenderLongRetryDelay(t *testing.T) {
	x := newExecEnv(t, providertest.Status(503, "server_error", "", "down").WithRetryAfter("86400"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stderr := &cancelOnWrite{marker: "↻", cancel: cancel}
	start := time.Now()
	code := run(ctx, []string{"exec", "hi"}, env{
		stdin: strings.NewReader(""), stdout: &strings.Builder{}, stderr: stderr,
		lookup: func(k string) (string, bool) { v, ok := x.vars[k]; return v, ok },
		cwd:    x.ws,
	})
	line := firstLineWith(stderr.String(), "↻")
	if !strings.Contains(line, "retrying 1/29 in 24h0m0s (Ctrl-C stops)") {
		t.Fatalf("retry line %q, want the day-long delay as a duration", line)
	}
	if code != exitCancelled || time.Since(start) > 10*time.Second {
		t.Fatalf("exit %d after %v, want a prompt cancellation", code, time.Since(start))
	}
}
