package nvim

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// The helpers below follow server/realclient_test.go and
// server/nvim_documents_test.go (buildOctet, testNvims, realWorld); they
// are copied rather than shared because test helpers cannot be imported
// across packages.

func TestMain(m *testing.M) {
	code := m.Run()
	if octetBinDir != "" {
		os.RemoveAll(octetBinDir)
	}
	os.Exit(code)
}

var (
	octetBinOnce sync.Once
	octetBinDir  string
	octetBinErr  error
)

// buildOctet returns an octet binary built from this tree, once per test
// process.
func buildOctet(t *testing.T) string {
	t.Helper()
	octetBinOnce.Do(func() {
		octetBinDir, octetBinErr = os.MkdirTemp("", "octet-nvim-bin-")
		if octetBinErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(octetBinDir, "octet"), "github.com/octet-agent/octet/cmd/octet").CombinedOutput()
		if err != nil {
			octetBinErr = &buildError{err: err, out: out}
		}
	})
	if octetBinErr != nil {
		t.Fatalf("build octet: %v", octetBinErr)
	}
	return filepath.Join(octetBinDir, "octet")
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// defaultNvimExtra is where .ci/fetch-newer-nvim.sh unpacked the newer
// builds on the development machines; used when OCTET_TEST_NVIM_EXTRA is
// unset.
const defaultNvimExtra = "/opt/nvim-newer/trixie/nvim.sh:/opt/nvim-newer/sid/nvim.sh"

// testNvims returns the system nvim (Debian's 0.7.2 in CI) and each one
// of OCTET_TEST_NVIM_EXTRA (colon-separated); missing ones are skipped.
func testNvims(t *testing.T) []string {
	var out []string
	if p, err := exec.LookPath("nvim"); err == nil {
		out = append(out, p)
	} else {
		t.Log("system nvim not installed; skipping it")
	}
	extra, set := os.LookupEnv("OCTET_TEST_NVIM_EXTRA")
	if !set {
		extra = defaultNvimExtra
	}
	for _, p := range filepath.SplitList(extra) {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			t.Logf("OCTET_TEST_NVIM_EXTRA names %s, which is missing; skipping it", p)
			continue
		}
		out = append(out, p)
	}
	return out
}

func nvimName(nvim string) string {
	out, err := exec.Command(nvim, "--version").Output()
	if err != nil {
		return filepath.Base(nvim)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimPrefix(first, "NVIM ")
}

// world is one test's octet binary, workspace, OCTET_HOME, Neovim state
// directories and scripted provider.
type world struct {
	tmp, bin, ws, home, nvim string
	prov                     *providertest.Server
}

// eachNvim runs fn as a parallel subtest per Neovim binary, each with a
// fresh world.
func eachNvim(t *testing.T, fn func(t *testing.T, w *world)) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the octet binary and runs Neovim")
	}
	nvims := testNvims(t)
	if len(nvims) == 0 {
		t.Skip("no nvim to test")
	}
	bin := buildOctet(t)
	for _, nvim := range nvims {
		t.Run(nvimName(nvim), func(t *testing.T) {
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
