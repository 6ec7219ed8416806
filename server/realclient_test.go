package server

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider/providertest"
)

// realWorld is what a real-client test (headless Neovim, vscode-jsonrpc)
// runs against: the built octet binary, a workspace, an OCTET_HOME and a
// scripted provider, all under one temporary directory that is also the
// client's working directory (never the workspace: the server must use
// rootUri).
type realWorld struct {
	tmp, bin, ws, home string
	prov               *providertest.Server
}

// newRealWorld makes the directories of a real-client test for the
// octet binary bin.
func newRealWorld(t *testing.T, bin string) *realWorld {
	t.Helper()
	tmp := t.TempDir()
	w := &realWorld{tmp: tmp, bin: bin, ws: filepath.Join(tmp, "ws"), home: filepath.Join(tmp, "home"), prov: providertest.New(t)}
	for _, d := range []string{w.ws, w.home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Before the directories go: the octet the client started may still
	// be settling (writing under the home) when the client has exited.
	t.Cleanup(func() { waitGone("OCTET_HOME="+w.home, 10*time.Second) })
	return w
}

// waitGone waits, at most d, until no process has the environment entry
// entry (where /proc lets it look).
func waitGone(entry string, d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		envs, _ := filepath.Glob("/proc/[0-9]*/environ")
		alive := false
		for _, e := range envs {
			b, err := os.ReadFile(e)
			if err == nil && slices.Contains(strings.Split(string(b), "\x00"), entry) {
				alive = true
				break
			}
		}
		if !alive {
			return
		}
	}
}

// env is the client's environment: where octet, the workspace, the home
// and the provider are, under the controlled policy (edits need approval),
// with the editor's own config and state kept in the temporary directory.
func (w *realWorld) env(extra ...string) []string {
	return append(append(os.Environ(),
		"OCTET_BIN="+w.bin, "OCTET_TEST_WORKSPACE="+w.ws,
		"OCTET_HOME="+w.home, "OPENAI_BASE_URL="+w.prov.URL(), "OPENAI_API_KEY=test-not-a-key",
		"OCTET_EFFECT_POLICY=controlled",
		"XDG_CONFIG_HOME="+w.tmp, "XDG_DATA_HOME="+w.tmp, "XDG_STATE_HOME="+w.tmp,
	), extra...)
}

// runNvim runs the Lua script in headless nvim and returns the result it
// wrote to $OCTET_TEST_RESULT, with nvim's own output for failure messages.
func (w *realWorld) runNvim(t *testing.T, nvim, script string) (result string, out []byte) {
	t.Helper()
	path := filepath.Join(w.tmp, "result.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "--noplugin",
		"-c", "luafile "+script)
	cmd.Dir = w.tmp
	cmd.Env = w.env("OCTET_TEST_RESULT=" + path)
	out, err := cmd.CombinedOutput()
	res, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatalf("nvim wrote no result (err %v): %s", err, out)
	}
	return string(res), out
}

// runClient runs a real client (the command name with args) in the
// world's directory and environment, plus extra, and returns what it
// wrote to $OCTET_TEST_RESULT.
func (w *realWorld) runClient(t *testing.T, name string, args []string, extra ...string) []byte {
	t.Helper()
	result := filepath.Join(w.tmp, "result.json")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = w.tmp
	cmd.Env = w.env(append(extra, "OCTET_TEST_RESULT="+result)...)
	out, err := cmd.CombinedOutput()
	res, rerr := os.ReadFile(result)
	if rerr != nil {
		t.Fatalf("%s wrote no result (err %v): %s", filepath.Base(name), err, out)
	}
	return res
}

// vscodeClient returns node and the testdata/vscode directory, skipping
// the test unless node is installed and `npm ci` has been run there
// (.ci/run does both when npm is available).
func vscodeClient(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	dir, err = filepath.Abs("testdata/vscode")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "vscode-jsonrpc")); err != nil {
		t.Skip("vscode-jsonrpc not installed: run npm ci in server/testdata/vscode")
	}
	if testing.Short() {
		t.Skip("builds the octet binary")
	}
	return node, dir
}

// runNode runs the vscode-jsonrpc client script (in testdata/vscode) and
// decodes the JSON it prints into got; a client that reports "failed"
// fails the test.
func (w *realWorld) runNode(t *testing.T, script string, got any) {
	t.Helper()
	node, dir := vscodeClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, script))
	cmd.Dir = dir
	cmd.Env = w.env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("client %s: %v\nstdout: %s\nstderr (octet's logs): %s", script, err, stdout, stderr.String())
	}
	var failed struct{ Failed string }
	if err := json.Unmarshal(stdout, &failed); err != nil || failed.Failed != "" {
		t.Fatalf("client %s output %s (%v)\nstderr: %s", script, stdout, err, stderr.String())
	}
	if err := json.Unmarshal(stdout, got); err != nil {
		t.Fatalf("client %s output %s: %v", script, stdout, err)
	}
}

// eachNvim runs fn as a parallel subtest per Neovim of testNvims, with the
// built octet binary and the absolute path of testdata/nvim/<script>.
func eachNvim(t *testing.T, script string, fn func(t *testing.T, nvim, bin, script string)) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the octet binary")
	}
	nvims := testbin.Nvims(t)
	if len(nvims) == 0 {
		t.Skip("no nvim to test")
	}
	bin := testbin.Octet(t)
	path, err := filepath.Abs(filepath.Join("testdata", "nvim", script))
	if err != nil {
		t.Fatal(err)
	}
	for _, nvim := range nvims {
		t.Run(testbin.NvimName(nvim), func(t *testing.T) {
			t.Parallel()
			fn(t, nvim, bin, path)
		})
	}
}
