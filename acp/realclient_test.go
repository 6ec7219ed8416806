package acp

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider/providertest"
)

// This file drives the built `octet acp` with the Agent Client Protocol's
// own TypeScript SDK (testdata/client, @agentclientprotocol/sdk) against
// the scripted provider.

// TestMain removes the octet binary the SDK tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// sdkClient returns node and the testdata/client directory, skipping the
// test unless node is installed and `npm ci` has been run there (.ci/run
// does both when npm is available).
func sdkClient(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed: the ACP SDK tests need Node 20")
	}
	dir, err = filepath.Abs("testdata/client")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk")); err != nil {
		t.Skip("@agentclientprotocol/sdk not installed: run npm ci in acp/testdata/client")
	}
	if testing.Short() {
		t.Skip("builds the octet binary")
	}
	return node, dir
}

// world is one SDK test's workspace, OCTET_HOME and scripted provider.
type world struct {
	tmp, ws, home string
	prov          *providertest.Server
	// args follow the scenario on client.js's command line; env is added
	// to octet's environment (after the defaults, so it overrides them).
	args, env []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	tmp := t.TempDir()
	w := &world{tmp: tmp, ws: filepath.Join(tmp, "ws"), home: filepath.Join(tmp, "home"), prov: providertest.New(t)}
	for _, d := range []string{w.ws, w.home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// run runs client.js scenario under the controlled policy and decodes
// what it printed into got.
func (w *world) run(t *testing.T, scenario string, got any) {
	t.Helper()
	node, dir := sdkClient(t)
	bin := testbin.Octet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, "client.js"), scenario}, w.args...)...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(),
		"OCTET_BIN="+bin, "OCTET_TEST_WORKSPACE="+w.ws,
		"OCTET_HOME="+w.home, "OPENAI_BASE_URL="+w.prov.URL(), "OPENAI_API_KEY=test-not-a-key",
		"OCTET_EFFECT_POLICY=controlled", "XDG_CONFIG_HOME="+w.tmp,
	)
	cmd.Env = append(cmd.Env, w.env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	var failed struct{ Failed string }
	if err != nil || json.Unmarshal(stdout, &failed) != nil || failed.Failed != "" {
		t.Fatalf("client %s: %v\nstdout: %s\nstderr (octet's logs): %s", scenario, err, stdout, stderr.String())
	}
	if err := json.Unmarshal(stdout, got); err != nil {
		t.Fatalf("client %s output %s: %v", scenario, stdout, err)
	}
	checkWires(t, stdout)
	t.Logf("client output: %s\noctet's logs:\n%s", stdout, stderr.String())
}

// sdkOut is what client.js reports of one connection.
type sdkOut struct {
	Init struct {
		ProtocolVersion   int
		AgentCapabilities struct {
			LoadSession        bool
			PromptCapabilities struct{ EmbeddedContext bool }
		}
	}
	Updates []update
	Ext     []struct {
		Method string
		Params map[string]any
	}
	Permissions []struct {
		ToolCallID string
		Title      string
		Kind       string
		Content    []map[string]any
		Options    []string
	}
	Reads    []string
	Writes   []struct{ Path, Content string }
	Answer   struct{ StopReason string }
	ExitCode int
}

// update is one session/update as the SDK decoded it.
type update struct {
	// OnSession is the session of an update not on the prompt's (a
	// child's).
	OnSession     string
	SessionUpdate string
	Content       json.RawMessage
	ToolCallID    string
	Status        string
	Kind          string
	Title         string
	// Description is a subagent_update's.
	Description string
	Locations   []struct{ Path string }
	// Used, Size and Cost are a usage_update's.
	Used, Size int64
	Cost       *struct {
		Amount   float64
		Currency string
	}
}

// text returns the concatenated text of the updates of kind.
func (o *sdkOut) text(kind string) string {
	var b strings.Builder
	for _, u := range o.Updates {
		if u.SessionUpdate != kind {
			continue
		}
		var c struct{ Text string }
		_ = json.Unmarshal(u.Content, &c)
		b.WriteString(c.Text)
	}
	return b.String()
}

// statuses returns the tool-call statuses of callID in order.
func (o *sdkOut) statuses(callID string) []string {
	var s []string
	for _, u := range o.Updates {
		if u.ToolCallID == callID && u.Status != "" {
			s = append(s, u.SessionUpdate+":"+u.Status)
		}
	}
	return s
}

func (o *sdkOut) asked() []string {
	var ids []string
	for _, p := range o.Permissions {
		ids = append(ids, p.ToolCallID)
	}
	return ids
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkWires validates every line octet sent on each of the client's
// connections against the ACP schema (schema_test.go).
func checkWires(t *testing.T, stdout []byte) {
	t.Helper()
	var out struct {
		Wires [][]struct{ Dir, Line string }
	}
	if err := json.Unmarshal(stdout, &out); err != nil || len(out.Wires) == 0 {
		t.Fatalf("the client recorded no wire: %v", err)
	}
	s := loadSchemas(t)
	if s == nil {
		return
	}
	n := 0
	for _, wire := range out.Wires {
		w := newWireCheck(s)
		for _, l := range wire {
			if l.Dir == "client" {
				w.fromClient([]byte(l.Line))
				continue
			}
			n++
			if err := w.fromOctet([]byte(l.Line)); err != nil {
				t.Errorf("octet sent a message the ACP schema refuses: %v\n%s", err, l.Line)
			}
		}
	}
	t.Logf("%d messages from octet validated against the ACP schema", n)
}
