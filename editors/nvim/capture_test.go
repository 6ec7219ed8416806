package nvim

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestCapture regenerates captures/approval-0.7.txt and .ansi: Neovim in
// a tmux pane with the chat open, an edit waiting for approval in its
// float, captured with tmux capture-pane. It runs only when
// OCTET_CAPTURE_DIR names the directory to write to (scripts/capture.sh
// sets it).
func TestCapture(t *testing.T) {
	dir := os.Getenv("OCTET_CAPTURE_DIR")
	if dir == "" {
		t.Skip("OCTET_CAPTURE_DIR not set: run scripts/capture.sh")
	}
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	// The newer builds of .ci/fetch-newer-nvim.sh run through their own
	// loader, which cannot start the separate TUI process of 0.10+, so
	// the default is the nvim on PATH.
	nvim := os.Getenv("OCTET_CAPTURE_NVIM")
	if nvim == "" {
		if nvim, err = exec.LookPath("nvim"); err != nil {
			t.Skip("nvim not installed")
		}
	}
	bin := testbin.Octet(t)
	plugin, _ := filepath.Abs(".")
	tmp := t.TempDir()
	ws, home := filepath.Join(tmp, "project"), filepath.Join(tmp, "home")
	for _, d := range []string{ws, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(ws, "greet.go"), "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello world\")\n}\n")
	prov := providertest.New(t)
	prov.Enqueue(
		providertest.Reply(
			providertest.Reasoning("enc", "The greeting lives in greet.go; change it there."),
			providertest.Message("I'll change the greeting in greet.go."),
			providertest.FunctionCall("call_1", "edit", `{"path":"greet.go","old_text":"hello world","new_text":"hello, octet"}`),
		),
		providertest.Text("Done: greet.go now prints \"hello, octet\"."),
	)
	init := filepath.Join(tmp, "init.lua")
	writeFile(t, init, `vim.opt.rtp:prepend("`+plugin+`")
vim.cmd("runtime! plugin/octet.lua")
vim.cmd("syntax on") vim.cmd("filetype plugin on")
vim.o.termguicolors = true
vim.o.laststatus = 2
vim.o.statusline = "%t %= %{%luaeval(\"require'octet'.statusline()\")%} "
require("octet").setup({ cmd = { "`+bin+`", "lsp" }, root = "`+ws+`", width = 64 })
vim.cmd("edit `+filepath.Join(ws, "greet.go")+`")
vim.defer_fn(function() vim.cmd("Octet change the greeting to hello, octet") vim.cmd("OctetChat") end, 300)
`)
	sock := filepath.Join(tmp, "tmux.sock")
	shell := strings.Join([]string{"exec", "env", "TERM=tmux-256color", "OCTET_HOME=" + home, "OPENAI_BASE_URL=" + prov.URL(),
		"OPENAI_API_KEY=test-not-a-key", "XDG_CONFIG_HOME=" + tmp, "XDG_DATA_HOME=" + tmp, "XDG_STATE_HOME=" + tmp,
		nvim, "-u", init, "-i", "NONE", "-n", "2>" + filepath.Join(tmp, "nvim.err")}, " ")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(args ...string) string {
		out, err := exec.CommandContext(ctx, tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			log, _ := os.ReadFile(filepath.Join(tmp, "nvim.err"))
			t.Fatalf("tmux %v: %v\n%s\nnvim stderr: %s", args, err, out, log)
		}
		return string(out)
	}
	run("new-session", "-d", "-s", "octet", "-x", "150", "-y", "34", shell)
	defer exec.Command(tmux, "-S", sock, "kill-server").Run()
	var text string
	for ctx.Err() == nil {
		text = run("capture-pane", "-p", "-t", "octet")
		if strings.Contains(text, "[a] approve") && strings.Contains(text, "APPROVAL PENDING") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("no approval float on screen:\n%s", text)
	}
	time.Sleep(300 * time.Millisecond)
	text = run("capture-pane", "-p", "-t", "octet")
	ansi := run("capture-pane", "-p", "-e", "-t", "octet")
	for name, data := range map[string]string{"approval-0.7.txt": text, "approval-0.7.ansi": ansi} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("captured:\n%s", text)
}
