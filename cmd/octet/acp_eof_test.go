//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestACPEndOfInputCancelsAPromptJustSent: an ACP client sends
// session/prompt and dies at once (its end of the pipes closes). The
// prompt was read before the end of input, but its run starts after:
// it is cancelled and settled as the runs already going are, and octet
// acp exits promptly. On the old code the end of input cancelled only
// the runs already started, so this one streamed its whole answer (and
// would have run its tool calls) for nobody, about 25 s here.
func TestACPEndOfInputCancelsAPromptJustSent(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text(strings.Repeat("streaming words for a client that is gone ", 200)).Pace(20 * time.Millisecond))
	home, ws := t.TempDir(), t.TempDir()
	cmd := exec.CommandContext(t.Context(), octetBin, "acp")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	p := &acpPeer{t: t, stderr: new(strings.Builder), in: json.NewEncoder(stdin), out: bufio.NewScanner(stdout)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.out.Buffer(nil, 16<<20)
	p.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	var s struct{ SessionID string }
	json.Unmarshal(p.call("session/new", map[string]any{"cwd": ws, "mcpServers": []any{}}), &s)
	p.send("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{map[string]string{"type": "text", "text": "go"}}})
	began := time.Now()
	stdin.Close()
	io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("octet acp: %v\nstderr: %s", err, p.stderr)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("octet acp took %s to end after its client was gone", d)
	}
	sess, err := session.Inspect(filepath.Join(home, "sessions", s.SessionID+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if cps := sess.Checkpoints(); len(cps) != 1 || cps[0].Outcome != "cancelled" {
		t.Errorf("checkpoints %+v, want the prompt's run cancelled", cps)
	}
	if n := sess.Totals().UnsettledDispatches; n != 0 {
		t.Errorf("%d request(s) left unsettled", n)
	}
}
