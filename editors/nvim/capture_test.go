package nvim

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider/providertest"
)

// scene is one terminal capture: the workspace's files, the model's
// turns, the Lua that starts it (after the chat opened), and the texts
// on screen that say it is ready.
type scene struct {
	name  string
	files map[string]string
	turns []providertest.Turn
	start string
	ready []string
	// gopls: the scene runs gopls as greet.go's language server (skipped
	// without it).
	gopls bool
	// rows of the pane (default 34).
	rows int
}

const greetGo = "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello world\")\n}\n"

// answerText is a streamed answer with a table and code.
const answerText = "Three ways to choose whom to greet:\n\n" +
	"| Option   | Set by           | Needs    |\n|----------|------------------|----------|\n| flag     | `-name ada`      | nothing  |\n| variable | `GREET_NAME=ada` | nothing  |\n| file     | `greet.toml`     | a parser |\n\n" +
	"The flag is the simplest:\n\n```go\nname := flag.String(\"name\", \"world\", \"whom to greet\")\nflag.Parse()\nfmt.Printf(\"hello, %s\\n\", *name)\n```\n\nShall I add it?"

var scenes = []scene{
	{
		name:  "answer",
		files: map[string]string{"greet.go": greetGo},
		turns: []providertest.Turn{providertest.Reply(
			providertest.Reasoning("enc", "Compare the ways a name can reach the program."),
			providertest.Message(answerText),
		).Pace(15 * time.Millisecond)},
		start: `vim.cmd("Octet how can greet.go take a name?")`,
		ready: []string{"Shall I add it?", "· idle ·"},
	},
	{
		name:  "approval",
		files: map[string]string{"greet.go": greetGo},
		turns: []providertest.Turn{
			providertest.Reply(
				providertest.Reasoning("enc", "The greeting lives in greet.go; change it there."),
				providertest.Message("I'll change the greeting in greet.go."),
				providertest.FunctionCall("call_1", "edit", `{"path":"greet.go","old_text":"hello world","new_text":"hello, octet"}`),
			),
			providertest.Text("Done: greet.go now prints \"hello, octet\"."),
		},
		start: `vim.cmd("Octet change the greeting to hello, octet")`,
		ready: []string{"[a] approve", "APPROVAL PENDING"},
	},
	{
		name:  "plan",
		files: map[string]string{"greet.go": greetGo},
		turns: []providertest.Turn{
			providertest.Reply(
				providertest.Message("A flag it is; here is the plan."),
				providertest.FunctionCall("p1", "update_plan", `{"explanation":"a -name flag","plan":[{"step":"Read greet.go","status":"in_progress"},{"step":"Add the -name flag","status":"pending"},{"step":"Run go vet","status":"pending"}]}`),
			),
			providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"greet.go"}`)),
			providertest.Reply(providertest.FunctionCall("p2", "update_plan", `{"plan":[{"step":"Read greet.go","status":"completed"},{"step":"Add the -name flag","status":"in_progress"},{"step":"Run go vet","status":"pending"}]}`)),
			providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"greet.go","old_text":"import \"fmt\"","new_text":"import (\n\t\"flag\"\n\t\"fmt\"\n)"}`)),
		},
		start: `vim.cmd("Octet add a -name flag to greet.go")`,
		ready: []string{"[>] Add the -name flag", "[a] approve"},
	},
	{
		name:  "diagnostics",
		gopls: true,
		rows:  48,
		files: map[string]string{"go.mod": "module greet\n\ngo 1.22\n", "greet.go": strings.Replace(greetGo, "Println", "Printn", 1)},
		turns: []providertest.Turn{
			providertest.Reply(
				providertest.Message("Let me see what the editor reports for greet.go."),
				providertest.FunctionCall("d1", "diagnostics", `{"path":"greet.go"}`),
			),
			providertest.Reply(providertest.FunctionCall("e1", "edit", `{"path":"greet.go","old_text":"fmt.Printn","new_text":"fmt.Println"}`)),
			providertest.Text("Fixed: `fmt.Printn` is `fmt.Println`; gopls reports no problem now."),
		},
		// Once gopls has reported, ask; approve the edit as "a" would;
		// show the tool blocks open when the run is over.
		start: `local function go()
  if #vim.diagnostic.get(vim.fn.bufnr("greet.go")) == 0 then return vim.defer_fn(go, 200) end
  -- As a person reads the error first: octet has it by then.
  vim.defer_fn(function() vim.cmd("Octet greet.go does not build: fix it") end, 1500)
end
go()
vim.api.nvim_create_autocmd("User", { pattern = "OctetApproval", callback = function()
  vim.defer_fn(function()
    local ap = require("octet.approval")
    local a = ap.current()
    if a then ap.decide(a, "approve") end
  end, 500)
end })
vim.api.nvim_create_autocmd("User", { pattern = "OctetRunFinished", callback = function()
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    local b = vim.api.nvim_win_get_buf(w)
    if vim.b[b].octet_session then
      vim.wo[w].foldlevel = 99
      local top = 1
      for i, l in ipairs(vim.api.nvim_buf_get_lines(b, 0, -1, false)) do
        if l == "## octet" then top = i end
      end
      vim.api.nvim_win_call(w, function() vim.api.nvim_win_set_cursor(w, { top, 0 }) vim.cmd("normal! zt") end)
    end
  end
end })`,
		ready: []string{"gopls reports no problem", "1 went away", "· idle ·"},
	},
}

// goplsPath is gopls on PATH or in GOPATH/bin, or "".
func goplsPath() string {
	if p, err := exec.LookPath("gopls"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return ""
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "bin", "gopls")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// TestCapture regenerates captures/<scene>-<version>.txt and .ansi:
// Neovim in a 150×34 tmux pane (150×48 for the diagnostics) against the real `octet lsp` and a
// scripted model, captured with tmux capture-pane, for each scene (a
// streamed answer with a table and code, an approval with its diff, a
// plan, a diagnostics-driven fix with gopls). It runs only when OCTET_CAPTURE_DIR names the directory to
// write to (scripts/capture.sh sets it); OCTET_CAPTURE_NVIM is the Neovim
// to run (default: nvim on PATH). Neovim 0.9 and later run as a headless
// server with a --remote-ui client in the pane: the newer builds of
// .ci/fetch-newer-nvim.sh run through their own loader, which cannot
// start the TUI's own server process.
func TestCapture(t *testing.T) {
	dir := os.Getenv("OCTET_CAPTURE_DIR")
	if dir == "" {
		t.Skip("OCTET_CAPTURE_DIR not set: run scripts/capture.sh")
	}
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	nvim := os.Getenv("OCTET_CAPTURE_NVIM")
	if nvim == "" {
		if nvim, err = exec.LookPath("nvim"); err != nil {
			t.Skip("nvim not installed")
		}
	}
	version := regexp.MustCompile(`^v(\d+)\.(\d+)`).FindStringSubmatch(testbin.NvimName(nvim))
	if version == nil {
		t.Fatalf("cannot tell the version of %s", nvim)
	}
	label := version[1] + "." + version[2]
	major, _ := strconv.Atoi(version[1])
	minor, _ := strconv.Atoi(version[2])
	remote := major > 0 || minor >= 9
	bin := testbin.Octet(t)
	plugin, _ := filepath.Abs(".")
	gopls := goplsPath()
	for _, sc := range scenes {
		t.Run(sc.name, func(t *testing.T) {
			if sc.gopls && gopls == "" {
				t.Skip("gopls not installed (go install golang.org/x/tools/gopls@latest)")
			}
			text, ansi := capture(t, sc, tmux, nvim, bin, plugin, remote, gopls)
			for name, data := range map[string]string{sc.name + "-" + label + ".txt": text, sc.name + "-" + label + ".ansi": ansi} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("captured:\n%s", text)
		})
	}
}

// capture runs scene sc in a tmux pane and returns the pane as text and
// with its colours (ANSI escapes).
func capture(t *testing.T, sc scene, tmux, nvim, bin, plugin string, remote bool, gopls string) (string, string) {
	tmp := t.TempDir()
	ws, home := filepath.Join(tmp, "project"), filepath.Join(tmp, "home")
	for _, d := range []string{ws, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range sc.files {
		writeFile(t, filepath.Join(ws, name), content)
	}
	prov := providertest.New(t)
	prov.Enqueue(sc.turns...)
	init := filepath.Join(tmp, "init.lua")
	first := "greet.go"
	lsp := ""
	if sc.gopls {
		// gopls through vim.lsp, as a user's config starts it (0.7 has no
		// vim.lsp.start).
		lsp = fmt.Sprintf(`vim.api.nvim_create_autocmd("FileType", { pattern = "go", callback = function(a)
  local cfg = { name = "gopls", cmd = { %q }, root_dir = %q }
  if vim.lsp.start then vim.lsp.start(cfg) else vim.lsp.buf_attach_client(a.buf, vim.lsp.start_client(cfg)) end
end })
`, gopls, ws)
	}
	// An unpacked Debian build has its tree-sitter parsers in
	// <prefix>/lib/nvim, beside <prefix>/share/nvim/runtime.
	writeFile(t, init, fmt.Sprintf(`vim.opt.rtp:prepend(%q)
vim.opt.rtp:append(vim.fn.fnamemodify(vim.env.VIMRUNTIME, ":h:h:h") .. "/lib/nvim")
vim.cmd("runtime! plugin/octet.lua")
vim.cmd("syntax on") vim.cmd("filetype plugin on")
vim.o.termguicolors = true
vim.o.laststatus = 2
vim.o.statusline = "%%t %%= %%{%%luaeval(\"require'octet'.statusline()\")%%} "
%srequire("octet").setup({ cmd = { %q, "lsp" }, root = %q, width = 70, approval_delay = 0 })
vim.cmd("edit %s")
vim.defer_fn(function() vim.cmd("OctetChat") vim.defer_fn(function() %s end, 300) end, 300)
`, plugin, lsp, bin, ws, filepath.Join(ws, first), sc.start))
	env := []string{"TERM=tmux-256color", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "OCTET_HOME=" + home, "OPENAI_BASE_URL=" + prov.URL(), "OPENAI_API_KEY=test-not-a-key",
		"XDG_CONFIG_HOME=" + tmp, "XDG_DATA_HOME=" + tmp, "XDG_STATE_HOME=" + tmp}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	errLog := filepath.Join(tmp, "nvim.err")
	var shell string
	if remote {
		sock := filepath.Join(tmp, "nvim.sock")
		logf, err := os.Create(errLog)
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		srv := exec.CommandContext(ctx, nvim, "--headless", "--listen", sock, "-u", init, "-i", "NONE", "-n")
		srv.Dir, srv.Env, srv.Stdout, srv.Stderr = ws, append(os.Environ(), env...), logf, logf
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { srv.Process.Kill(); srv.Wait() }()
		for i := 0; i < 100; i++ {
			if _, err := os.Stat(sock); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		shell = strings.Join([]string{"exec", "env", "TERM=tmux-256color", nvim, "--remote-ui", "--server", sock}, " ")
	} else {
		shell = strings.Join(append(append([]string{"cd", ws, "&&", "exec", "env"}, env...), nvim, "-u", init, "-i", "NONE", "-n", "2>"+errLog), " ")
	}
	sock := filepath.Join(tmp, "tmux.sock")
	run := func(args ...string) string {
		out, err := exec.CommandContext(ctx, tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			log, _ := os.ReadFile(errLog)
			t.Fatalf("tmux %v: %v\n%s\nnvim stderr: %s", args, err, out, log)
		}
		return string(out)
	}
	rows := 34
	if sc.rows > 0 {
		rows = sc.rows
	}
	run("new-session", "-d", "-s", "octet", "-x", "150", "-y", strconv.Itoa(rows), shell)
	defer exec.Command(tmux, "-S", sock, "kill-server").Run()
	var text string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		text = run("capture-pane", "-p", "-t", "octet")
		ready := true
		for _, r := range sc.ready {
			ready = ready && strings.Contains(text, r)
		}
		if ready {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if time.Now().After(deadline) {
		log, _ := os.ReadFile(errLog)
		t.Fatalf("%s: not on screen:\n%s\nnvim stderr: %s", strings.Join(sc.ready, ", "), text, log)
	}
	time.Sleep(500 * time.Millisecond)
	return run("capture-pane", "-p", "-t", "octet"), run("capture-pane", "-p", "-e", "-t", "octet")
}
