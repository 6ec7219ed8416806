package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestNeovimClient runs a real editor: headless Neovim starts the built
// `octet lsp`, creates a session, prompts, answers octet/confirmEffect
// for the scripted model's edit, and the file must change. It is skipped
// when nvim is not installed (.ci/run installs Debian's neovim).
func TestNeovimClient(t *testing.T) {
	nvim, err := exec.LookPath("nvim")
	if err != nil {
		t.Skip("nvim not installed")
	}
	if testing.Short() {
		t.Skip("builds the octet binary")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "octet")
	build := exec.Command("go", "build", "-o", bin, "github.com/octet-agent/octet/cmd/octet")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build octet: %v\n%s", err, out)
	}
	ws := filepath.Join(tmp, "ws")
	home := filepath.Join(tmp, "home")
	for _, d := range []string{ws, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(ws, "a.txt"), "hello world\n")
	prov := providertest.New(t)
	editScript(&stack{provider: prov})
	script, err := filepath.Abs("testdata/nvim/octet_test.lua")
	if err != nil {
		t.Fatal(err)
	}
	result := filepath.Join(tmp, "result.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "--noplugin",
		"-c", "luafile "+script)
	cmd.Dir = tmp // Neovim's cwd is not the workspace: the server must use rootUri.
	cmd.Env = append(os.Environ(),
		"OCTET_BIN="+bin, "OCTET_TEST_WORKSPACE="+ws, "OCTET_TEST_RESULT="+result,
		"OCTET_HOME="+home, "OPENAI_BASE_URL="+prov.URL(), "OPENAI_API_KEY=test-not-a-key",
		"OCTET_EFFECT_POLICY=controlled", // edits need approval
		"XDG_CONFIG_HOME="+tmp, "XDG_DATA_HOME="+tmp, "XDG_STATE_HOME="+tmp,
	)
	out, err := cmd.CombinedOutput()
	res, rerr := os.ReadFile(result)
	if rerr != nil {
		t.Fatalf("nvim wrote no result (err %v): %s", err, out)
	}
	t.Logf("nvim result:\n%s", res)
	if !strings.HasPrefix(string(res), "ok\n") {
		t.Fatalf("neovim client failed:\n%s\nnvim output: %s", res, out)
	}
	if got := readFile(t, filepath.Join(ws, "a.txt")); got != "goodbye world\n" {
		t.Errorf("a.txt = %q after the approved edit", got)
	}
	sessions, _ := filepath.Glob(filepath.Join(home, "sessions", "*.jsonl"))
	if len(sessions) != 1 {
		t.Errorf("%d session files under OCTET_HOME, want 1", len(sessions))
	}
}
