package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestNeovimClient runs a real editor: headless Neovim starts the built
// `octet lsp`, creates a session, prompts, answers octet/confirmEffect
// for the scripted model's edit, and the file must change, on each of
// testNvims (.ci/run installs Debian's neovim and unpacks newer builds).
func TestNeovimClient(t *testing.T) {
	eachNvim(t, "octet_test.lua", func(t *testing.T, nvim, bin, script string) {
		w := newRealWorld(t, bin)
		writeFile(t, filepath.Join(w.ws, "a.txt"), "hello world\n")
		editScript(&stack{&hosttest.Stack{Provider: w.prov}})
		res, out := w.runNvim(t, nvim, script)
		t.Logf("nvim result:\n%s", res)
		if !strings.HasPrefix(res, "ok\n") {
			t.Fatalf("neovim client failed:\n%s\nnvim output: %s", res, out)
		}
		if got := readFile(t, filepath.Join(w.ws, "a.txt")); got != "goodbye world\n" {
			t.Errorf("a.txt = %q after the approved edit", got)
		}
		sessions, _ := filepath.Glob(filepath.Join(w.home, "sessions", "*.jsonl"))
		if len(sessions) != 1 {
			t.Errorf("%d session files under OCTET_HOME, want 1", len(sessions))
		}
	})
}

// TestNeovimReadmeSnippet runs the bare vim.lsp client of the Neovim
// plugin README (editors/nvim/README.md, "Without the plugin") verbatim in
// headless Neovim (0.7+ API): `octet` is found on PATH, the workspace is
// Neovim's cwd, and `:Octet edit a.txt` must end with the approved edit
// applied. vim.fn.confirm (a dialog) answers "Approve" and records what it
// was shown; vim.notify records the outcome.
func TestNeovimReadmeSnippet(t *testing.T) {
	nvim, err := exec.LookPath("nvim")
	if err != nil {
		t.Skip("nvim not installed")
	}
	if testing.Short() {
		t.Skip("builds the octet binary")
	}
	readme, err := os.ReadFile("../editors/nvim/README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippet := readmeLua(t, string(readme), "## Without the plugin")
	tmp := t.TempDir()
	bin := filepath.Dir(testbin.Octet(t)) // a directory holding only octet, for PATH
	ws, home := filepath.Join(tmp, "ws"), filepath.Join(tmp, "home")
	for _, d := range []string{ws, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(ws, "a.txt"), "hello world\n")
	prov := providertest.New(t)
	editScript(&stack{&hosttest.Stack{Provider: prov}})
	result := filepath.Join(tmp, "result.txt")
	init := filepath.Join(tmp, "init.lua")
	writeFile(t, init, snippet)
	prelude := `local out = os.getenv("OCTET_TEST_RESULT")
local shown = {}
vim.fn.confirm = function(msg) table.insert(shown, msg) return 1 end
vim.notify = function(msg)
  local f = io.open(out, "w")
  f:write(msg .. "\n" .. table.concat(shown, "\n---\n") .. "\n")
  f:close()
  vim.cmd("qa!")
end
vim.defer_fn(function() vim.notify("timed out") end, 60000)`
	pre := filepath.Join(tmp, "prelude.lua")
	writeFile(t, pre, prelude)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "--noplugin",
		"-c", "luafile "+pre, "-c", "luafile "+init,
		"-c", "lua vim.defer_fn(function() vim.cmd('Octet edit a.txt') end, 500)")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"OCTET_TEST_RESULT="+result,
		"OCTET_HOME="+home, "OPENAI_BASE_URL="+prov.URL(), "OPENAI_API_KEY=test-not-a-key",
		"OCTET_EFFECT_POLICY=controlled",
		"XDG_CONFIG_HOME="+tmp, "XDG_DATA_HOME="+tmp, "XDG_STATE_HOME="+tmp,
	)
	out, err := cmd.CombinedOutput()
	res, rerr := os.ReadFile(result)
	if rerr != nil {
		t.Fatalf("the snippet reported nothing (nvim err %v): %s", err, out)
	}
	if !strings.HasPrefix(string(res), "octet: completed\n") {
		t.Fatalf("README snippet run:\n%s\nnvim output: %s", res, out)
	}
	if !strings.Contains(string(res), "edit a.txt\n--- a/a.txt") || !strings.Contains(string(res), "+goodbye world") {
		t.Errorf("the confirm dialog showed %q, want the title and the diff", res)
	}
	if got := readFile(t, filepath.Join(ws, "a.txt")); got != "goodbye world\n" {
		t.Errorf("a.txt = %q after the approved edit", got)
	}
}

// readmeLua returns the first ```lua block after heading in readme.
func readmeLua(t *testing.T, readme, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "\n"+heading)
	if !ok {
		t.Fatalf("README has no %q section", heading)
	}
	_, rest, ok = strings.Cut(rest, "```lua\n")
	if !ok {
		t.Fatalf("README %q section has no lua block", heading)
	}
	code, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("README %q lua block is not closed", heading)
	}
	return code + "\n"
}

// TestNeovimApprovalRules drives the approval choices from headless
// Neovim (testdata/nvim/approvals_test.lua) on each of testNvims:
// approve_for_session
// on an edit, the next edit of the file admitted by the standing rule
// (no prompt; session_rule with its ruleId), a bash denial whose reason
// the model sees, approvals/list and revoke, and the edit asked again.
func TestNeovimApprovalRules(t *testing.T) {
	eachNvim(t, "approvals_test.lua", func(t *testing.T, nvim, bin, script string) {
		w := newRealWorld(t, bin)
		writeFile(t, filepath.Join(w.ws, "a.txt"), "hello\n")
		edit := func(id, from, to string) providertest.Turn {
			return providertest.Reply(providertest.FunctionCall(id, "edit", `{"path":"a.txt","old_text":"`+from+`","new_text":"`+to+`"}`))
		}
		w.prov.Enqueue(edit("call_1", "hello", "hi"), edit("call_2", "hi", "hey"),
			providertest.Reply(providertest.FunctionCall("call_3", "bash", `{"command":"touch made"}`)),
			providertest.Text("Done."),
			edit("call_4", "hey", "yo"), providertest.Text("Done again."))
		res, _ := w.runNvim(t, nvim, script)
		got := strings.TrimSpace(res)
		for _, want := range []string{
			"ok first=completed second=completed rules=1 scope=a.txt asked=call_1,call_3,call_4 ",
			"decisions=call_1:approved_for_session:rule,call_2:session_rule:rule,call_3:approval_denied:-,call_4:approved:-",
			"The user's reason: use make instead",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("result %s\nwant it to contain %s", got, want)
			}
		}
		if got := readFile(t, filepath.Join(w.ws, "a.txt")); got != "yo\n" {
			t.Errorf("a.txt = %q", got)
		}
	})
}
