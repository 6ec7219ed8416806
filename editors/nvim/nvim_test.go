package nvim

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

// The octet binary and the Neovim builds come from internal/testbin,
// shared with server's real-client tests.

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// world is one test's octet binary, workspace, OCTET_HOME, Neovim state
// directories and scripted provider.
type world struct {
	tmp, bin, ws, home, nvim string
	prov                     *providertest.Server
	// errorsExpected: the script makes Neovim report errors on purpose.
	errorsExpected bool
}

// eachNvim runs fn as a parallel subtest per Neovim binary, each with a
// fresh world.
func eachNvim(t *testing.T, fn func(t *testing.T, w *world)) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the octet binary and runs Neovim")
	}
	nvims := testbin.Nvims(t)
	if len(nvims) == 0 {
		t.Skip("no nvim to test")
	}
	bin := testbin.Octet(t)
	for _, nvim := range nvims {
		t.Run(testbin.NvimName(nvim), func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			w := &world{tmp: tmp, bin: bin, ws: filepath.Join(tmp, "ws"), home: filepath.Join(tmp, "home"), nvim: nvim, prov: providertest.New(t)}
			for _, d := range []string{w.ws, w.home} {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			fn(t, w)
		})
	}
}

// result is what a test script reports: facts it recorded, or failed.
type result map[string]any

func (r result) str(k string) string {
	s, _ := r[k].(string)
	return s
}

// run runs testdata/<script> in headless Neovim with the plugin on its
// runtimepath and returns the facts it wrote; a script that failed fails
// the test.
func (w *world) run(t *testing.T, script string, env ...string) result {
	t.Helper()
	plugin, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(w.tmp, "result.json")
	os.Remove(out)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n",
		"--cmd", "set rtp^="+plugin, "--cmd", "runtime! plugin/octet.lua",
		"-c", "luafile "+filepath.Join(plugin, "testdata", script))
	cmd.Dir = w.tmp
	cmd.Env = append(append(os.Environ(),
		"OCTET_BIN="+w.bin, "OCTET_TEST_WORKSPACE="+w.ws, "OCTET_TEST_RESULT="+out,
		"OCTET_TEST_LIB="+filepath.Join(plugin, "testdata", "lib.lua"),
		"OCTET_HOME="+w.home, "OPENAI_BASE_URL="+w.prov.URL(), "OPENAI_API_KEY=test-not-a-key",
		"XDG_CONFIG_HOME="+w.tmp, "XDG_DATA_HOME="+w.tmp, "XDG_STATE_HOME="+w.tmp,
	), env...)
	output, err := cmd.CombinedOutput()
	raw, rerr := os.ReadFile(out)
	if rerr != nil {
		t.Fatalf("%s wrote no result (nvim: %v): %s", script, err, output)
	}
	var r result
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s result %s: %v", script, raw, err)
	}
	if f := r.str("failed"); f != "" {
		t.Fatalf("%s failed: %s\nfacts: %s\nnvim output: %s", script, f, raw, output)
	}
	if !w.errorsExpected {
		// A Lua error in a callback (an event handler, a timer) does not
		// stop the script: Neovim reports it, here on its output.
		for _, e := range []string{"Error executing", "stack traceback", "E5108", "E5113"} {
			if strings.Contains(string(output), e) {
				t.Errorf("%s: Neovim reported an error:\n%s", script, output)
				break
			}
		}
	}
	return r
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
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

// inputText is request i's input items (the conversation the model saw)
// as JSON.
func inputText(t *testing.T, prov *providertest.Server, i int) string {
	t.Helper()
	reqs := prov.Requests()
	if i >= len(reqs) {
		t.Fatalf("the provider got %d requests, want more than %d", len(reqs), i)
	}
	return requestInput(reqs[i])
}

func requestInput(r providertest.Request) string {
	b, err := json.Marshal(r.Input())
	if err != nil {
		return err.Error()
	}
	return string(b)
}
