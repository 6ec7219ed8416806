//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/harness"
	"github.com/octet-agent/octet/provider/providertest"
)

// This file checks what the real octet binary tells the model, on the
// requests the scripted endpoint received: the system prompt, the
// environment context (and when it is sent again), reasoning.summary and
// the tools offered; the recorded reasoning stream reaching every front
// door; and apply_patch end to end.

// approvePrompt is how octet asks on a terminal (runOnPTY answers it).
const approvePrompt = "Approve? [y/N]"

// inputMessages returns the role and text of each message item of a
// request's input ("" role for other items, with their type as text).
func inputMessages(r providertest.Request) [][2]string {
	var out [][2]string
	for _, it := range r.Input() {
		m, _ := it.(map[string]any)
		role, _ := m["role"].(string)
		if role == "" {
			out = append(out, [2]string{"", m["type"].(string)})
			continue
		}
		var text string
		for _, c := range m["content"].([]any) {
			t, _ := c.(map[string]any)["text"].(string) // input_image parts have none
			text += t
		}
		out = append(out, [2]string{role, text})
	}
	return out
}

// environmentItems returns the texts of the environment context items of
// a request, in order.
func environmentItems(r providertest.Request) []string {
	var out []string
	for _, m := range inputMessages(r) {
		if m[0] == "user" && strings.HasPrefix(m[1], "<environment_context>") {
			out = append(out, m[1])
		}
	}
	return out
}

func toolNames(r providertest.Request) []string {
	var out []string
	for _, tl := range r.Body["tools"].([]any) {
		out = append(out, tl.(map[string]any)["name"].(string))
	}
	return out
}

// gitRepo makes ws a repository on branch main with one committed file
// changed since and one untracked file.
func gitRepo(t *testing.T, ws string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	run := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "-b", "main")
	writeFile(t, filepath.Join(ws, "src", "main.go"), "package main\n")
	run("add", ".")
	run("commit", "-q", "-m", "init")
	writeFile(t, filepath.Join(ws, "src", "main.go"), "package main // changed\n")
	writeFile(t, filepath.Join(ws, "new.txt"), "new\n")
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHarnessLSPFirstRequests drives the real octet lsp through three
// prompts, tightening the session's policy before the third. The
// endpoint's requests carry octet's prompt with the workspace AGENTS.md
// after it, reasoning.summary "auto", apply_patch among the tools (the
// default model knows it), and the environment context: before the
// first prompt (workspace, OS, shell, date, the policy in words, the git
// summary, the editor's name from clientInfo and its open document), not
// again while nothing changed, and again, once, with the new policy.
func TestHarnessLSPFirstRequests(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("one"), providertest.Text("two"), providertest.Text("three"))
	home, ws := t.TempDir(), t.TempDir()
	gitRepo(t, ws)
	writeFile(t, filepath.Join(ws, "AGENTS.md"), "Indent with tabs.\n")
	cmd := lspCommand(t, 60*time.Second)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "clientInfo": map[string]any{"name": "Neovim", "version": "0.11"},
		"capabilities": map[string]any{"experimental": map[string]any{"octet": map[string]any{"events": false}}}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	c.send(map[string]any{"method": "textDocument/didOpen", "params": map[string]any{"textDocument": map[string]any{
		"uri": "file://" + filepath.Join(ws, "src", "main.go"), "languageId": "go", "version": 1, "text": "package main // changed\n"}}})
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)
	for _, p := range []string{"first", "second"} {
		if res := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": p}, nil, nil); res["outcome"] != "completed" {
			t.Fatalf("prompt %s: %v\n%s", p, res, stderr)
		}
	}
	c.call("octet/session/setPolicy", map[string]any{"sessionId": sid, "effectPolicy": "controlled"}, nil, nil)
	if res := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "third"}, nil, nil); res["outcome"] != "completed" {
		t.Fatalf("prompt third: %v", res)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	cmd.Wait()

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	instr, _ := reqs[0].Body["instructions"].(string)
	if !strings.HasPrefix(instr, harness.Instructions(harness.Options{})) || !strings.HasSuffix(instr, "Indent with tabs.") {
		t.Errorf("instructions are not octet's prompt then AGENTS.md:\n%s", instr)
	}
	if r, _ := json.Marshal(reqs[0].Body["reasoning"]); string(r) != `{"effort":"medium","summary":"auto"}` {
		t.Errorf("reasoning = %s", r)
	}
	if tools := toolNames(reqs[0]); !slices.Equal(tools[:6], []string{"read", "search", "edit", "write", "apply_patch", "bash"}) {
		t.Errorf("tools offered = %v", tools)
	}
	env := environmentItems(reqs[0])
	if len(env) != 1 {
		t.Fatalf("first request environment items: %q", env)
	}
	for _, want := range []string{
		"workspace root: " + ws + "\n", "os: ", "shell: /", "date: " + time.Now().Format("2006-01"),
		"effect policy: unsafe_host\n  runs without asking: reading and searching workspace files;",
		"git: branch main; 1 file with unstaged changes, 2 files untracked (in the workspace)", // new.txt, AGENTS.md
		"editor: Neovim\n", "open in the editor: src/main.go\n",
	} {
		if !strings.Contains(env[0], want) {
			t.Errorf("environment lacks %q:\n%s", want, env[0])
		}
	}
	if msgs := inputMessages(reqs[0]); len(msgs) != 2 || msgs[1] != [2]string{"user", "first"} {
		t.Errorf("first request input = %q, want the environment then the prompt", msgs)
	}
	if got := environmentItems(reqs[1]); !slices.Equal(got, env) {
		t.Errorf("second request (nothing changed) environment items: %q", got)
	}
	got := environmentItems(reqs[2])
	if len(got) != 2 || got[0] != env[0] || !strings.Contains(got[1], "effect policy: controlled\n") ||
		!strings.Contains(got[1], "asks the user first: changing workspace files; other shell commands") ||
		!strings.Contains(got[1], "the file tools accept only paths inside the workspace") {
		t.Errorf("after the policy change the environment items are %q", got)
	}
	msgs := inputMessages(reqs[2])
	if n := len(msgs); n < 2 || msgs[n-2][1] != got[1] || msgs[n-1] != [2]string{"user", "third"} {
		t.Errorf("the new environment is not right before the third prompt: %q", msgs)
	}
}

// execBin runs the real `octet exec` in ws with home's configuration.
func execBin(t *testing.T, ws, home string, srv *providertest.Server, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(octetBin, append([]string{"exec"}, args...)...)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("octet exec %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

// TestHarnessExecModelFeatures: apply_patch goes to the models the table
// says know it (auto), to any model with apply_patch = "on", to none with
// "off"; reasoning_summary reaches reasoning.summary of models that reason
// ("none" asks for none); a model without reasoning gets no reasoning.
func TestHarnessExecModelFeatures(t *testing.T) {
	for _, c := range []struct {
		name, config, model string
		patch               bool
		reasoning           string
	}{
		{"table model", "", "gpt-5-nano", true, `{"effort":"medium","summary":"auto"}`},
		{"detailed", "reasoning_summary = \"detailed\"\n", "gpt-5-nano", true, `{"effort":"medium","summary":"detailed"}`},
		{"no summary", "reasoning_summary = \"none\"\n", "gpt-5-nano", true, `{"effort":"medium"}`},
		{"off", "apply_patch = \"off\"\n", "gpt-5-nano", false, `{"effort":"medium","summary":"auto"}`},
		{"unknown model", "", "local-coder", false, `null`},
		{"unknown model, on", "apply_patch = \"on\"\n", "local-coder", true, `null`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := providertest.New(t)
			srv.Enqueue(providertest.Text("ok"))
			home, ws := t.TempDir(), t.TempDir()
			writeFile(t, filepath.Join(home, "config.toml"), c.config)
			execBin(t, ws, home, srv, "--model", c.model, "hi")
			req := srv.Requests()[0]
			if got := slices.Contains(toolNames(req), "apply_patch"); got != c.patch {
				t.Errorf("apply_patch offered = %v, want %v (tools %v)", got, c.patch, toolNames(req))
			}
			if r, _ := json.Marshal(req.Body["reasoning"]); string(r) != c.reasoning {
				t.Errorf("reasoning = %s, want %s", r, c.reasoning)
			}
			if len(environmentItems(req)) != 1 {
				t.Errorf("exec sent %d environment items", len(environmentItems(req)))
			}
		})
	}
}

// recordedReasoning returns the recorded four-response stream of a real
// reasoning model (a reasoning summary, calls, an answer) as turns, and
// the summary text it streams.
func recordedReasoning(t *testing.T) ([]providertest.Turn, string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "provider", "testdata", "responses", "vercel-ai__openai-reasoning-encrypted-content.1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var turns []providertest.Turn
	var cur bytes.Buffer
	var summary string
	flush := func() {
		if cur.Len() == 0 {
			return
		}
		tu, err := providertest.FromJSONL(bytes.Clone(cur.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, tu)
		cur.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct{ Type, Text string }
		json.Unmarshal(sc.Bytes(), &ev)
		if ev.Type == "response.created" {
			flush()
		}
		if ev.Type == "response.reasoning_summary_text.done" {
			summary += ev.Text
		}
		cur.Write(sc.Bytes())
		cur.WriteByte('\n')
	}
	flush()
	if len(turns) != 4 || summary == "" {
		t.Fatalf("fixture: %d responses, summary %q", len(turns), summary)
	}
	return turns, summary
}

// TestReasoningSummaryReachesEveryFrontDoor replays a recorded stream of
// a real reasoning model: its summary deltas reach octet/event
// (output_delta, channel reasoning), ACP (agent_thought_chunk), `octet
// exec --json` and `octet exec` on a terminal (dimmed, on stderr).
func TestReasoningSummaryReachesEveryFrontDoor(t *testing.T) {
	t.Run("lsp", func(t *testing.T) {
		turns, summary := recordedReasoning(t)
		srv := providertest.New(t)
		srv.Enqueue(turns...)
		home, ws := t.TempDir(), t.TempDir()
		cmd := lspCommand(t, 60*time.Second)
		cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
		c, stdin, _ := startLSP(t, cmd)
		c.call("initialize", map[string]any{"rootUri": "file://" + ws, "capabilities": map[string]any{"experimental": map[string]any{"octet": map[string]any{"events": true}}}}, nil, nil)
		c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
		sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)
		var notes []map[string]any
		c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "compute"}, nil, &notes)
		c.call("shutdown", nil, nil, nil)
		c.send(map[string]any{"method": "exit"})
		stdin.Close()
		cmd.Wait()
		var got strings.Builder
		for _, n := range notes {
			if n["method"] != "octet/event" {
				continue
			}
			ev := n["params"].(map[string]any)["event"].(map[string]any)
			if ev["kind"] == "output_delta" && ev["channel"] == "reasoning" {
				got.WriteString(ev["text"].(string))
			}
		}
		if got.String() != summary {
			t.Errorf("octet/event reasoning = %q, want %q", got.String(), summary)
		}
	})
	t.Run("acp", func(t *testing.T) {
		turns, summary := recordedReasoning(t)
		srv := providertest.New(t)
		srv.Enqueue(turns...)
		p := startACP(t, srv, t.TempDir(), 60*time.Second)
		p.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}, "clientInfo": map[string]any{"name": "zed"}})
		var s struct{ SessionID string }
		json.Unmarshal(p.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}), &s)
		id := p.send("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{map[string]string{"type": "text", "text": "compute"}}})
		var got strings.Builder
		for {
			m := p.read()
			if m.Method == "" && string(m.ID) == jsonInt(id) {
				break
			}
			if m.Method != "session/update" {
				continue
			}
			var u struct {
				Update struct {
					SessionUpdate string `json:"sessionUpdate"`
					Content       struct{ Text string }
				}
			}
			json.Unmarshal(m.Params, &u)
			if u.Update.SessionUpdate == "agent_thought_chunk" {
				got.WriteString(u.Update.Content.Text)
			}
		}
		if got.String() != summary {
			t.Errorf("agent_thought_chunk text = %q, want %q", got.String(), summary)
		}
		if env := environmentItems(srv.Requests()[0]); len(env) != 1 || !strings.Contains(env[0], "editor: zed\n") {
			t.Errorf("ACP environment does not name the client: %q", env)
		}
	})
	t.Run("exec json", func(t *testing.T) {
		turns, summary := recordedReasoning(t)
		srv := providertest.New(t)
		srv.Enqueue(turns...)
		out, _ := execBin(t, t.TempDir(), t.TempDir(), srv, "--json", "compute")
		var got strings.Builder
		for l := range strings.Lines(out) {
			var jl struct{ Event map[string]any }
			json.Unmarshal([]byte(l), &jl)
			if jl.Event["kind"] == "output_delta" && jl.Event["channel"] == "reasoning" {
				got.WriteString(jl.Event["text"].(string))
			}
		}
		if got.String() != summary {
			t.Errorf("exec --json reasoning = %q, want %q", got.String(), summary)
		}
	})
	t.Run("exec terminal", func(t *testing.T) {
		if _, err := os.Stat("/dev/ptmx"); err != nil {
			t.Skip("no pseudo-terminals")
		}
		turns, summary := recordedReasoning(t)
		srv := providertest.New(t)
		srv.Enqueue(turns...)
		cmd := exec.Command(octetBin, "exec", "compute")
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "OCTET_HOME="+t.TempDir(), "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
		shown, _, err := runOnPTY(t, cmd, approvePrompt, "")
		if err != nil {
			t.Fatalf("exec: %v\n%s", err, shown)
		}
		first, _, _ := strings.Cut(summary, "\n")
		want := sgrDim + "┆ " + first
		if !strings.Contains(shown.String(), want) || !strings.Contains(shown.String(), sgrNormal) {
			t.Errorf("the terminal did not show the summary dimmed (%q):\n%q", want, shown)
		}
	})
}

// patchTurns are a model's apply_patch calls: one whose last hunk does
// not apply, then a multi-file patch (add, update, delete, move).
const (
	badPatch  = "*** Begin Patch\n*** Add File: docs/usage.md\n+# Usage\n*** Update File: src/app.py\n@@\n-    nope()\n+    yes()\n*** End Patch"
	goodPatch = "*** Begin Patch\n*** Add File: docs/usage.md\n+# Usage\n*** Update File: src/app.py\n@@ def main():\n-    run()\n+    run(verbose=True)\n" +
		"*** Delete File: src/old.py\n*** Update File: src/util.py\n*** Move to: src/helpers.py\n@@\n-import os\n+import os.path\n*** End Patch"
)

func patchCall(id, patch string) providertest.Output {
	args, _ := json.Marshal(map[string]string{"input": patch})
	return providertest.FunctionCall(id, "apply_patch", string(args))
}

// tree maps the workspace's files to their content.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

// TestApplyPatchThroughLSP drives the real octet lsp under the
// controlled policy: a patch with a hunk that does not apply writes
// nothing; a multi-file patch asks one octet/confirmEffect whose title,
// detail and diff show every file, then changes them all; a files rewind
// to before it restores every file.
func TestApplyPatchThroughLSP(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(
		providertest.Reply(patchCall("p1", badPatch)),
		providertest.Reply(patchCall("p2", goodPatch)),
		providertest.Text("patched"),
	)
	home, ws := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(ws, "src", "app.py"), "def main():\n    run()\n")
	writeFile(t, filepath.Join(ws, "src", "old.py"), "print('old')\n")
	writeFile(t, filepath.Join(ws, "src", "util.py"), "import os\n")
	before := tree(t, ws)
	cmd := lspCommand(t, 60*time.Second, "--effect-policy", "controlled")
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	c.call("initialize", map[string]any{"rootUri": "file://" + ws, "capabilities": map[string]any{
		"experimental": map[string]any{"octet": map[string]any{"confirmEffect": true, "events": true}}}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)
	var confirms []map[string]any
	var atSecond map[string]string
	var notes []map[string]any
	res := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "patch it"}, func(req map[string]any) any {
		if req["method"] != "octet/confirmEffect" {
			return nil
		}
		p := req["params"].(map[string]any)
		confirms = append(confirms, p)
		if len(confirms) == 2 {
			atSecond = tree(t, ws)
		}
		return map[string]any{"decision": "approve", "digest": p["digest"]}
	}, &notes)
	if res["outcome"] != "completed" || len(confirms) != 2 {
		t.Fatalf("prompt %v after %d confirmations\n%s", res, len(confirms), stderr)
	}
	if d := confirms[0]["detail"].(string); !strings.Contains(d, "hunk 1 of 1 for src/app.py") {
		t.Errorf("the failing patch's approval does not say why it cannot apply: %q", d)
	}
	if !maps.Equal(atSecond, before) {
		t.Errorf("the failing patch wrote: %v", atSecond)
	}
	p := confirms[1]
	if title := p["title"].(string); title != "apply_patch: 4 files (docs/usage.md, src/app.py, src/old.py, src/util.py)" {
		t.Errorf("title %q", title)
	}
	for _, w := range []string{"add docs/usage.md", "update src/app.py", "delete src/old.py", "move src/util.py to src/helpers.py"} {
		if !strings.Contains(p["detail"].(string), w) {
			t.Errorf("detail lacks %q: %q", w, p["detail"])
		}
	}
	for _, w := range []string{"+++ b/docs/usage.md", "+    run(verbose=True)", "--- a/src/old.py\n+++ /dev/null", "--- a/src/util.py\n+++ b/src/helpers.py"} {
		if !strings.Contains(p["diff"].(string), w) {
			t.Errorf("diff lacks %q:\n%s", w, p["diff"])
		}
	}
	want := map[string]string{
		"docs/usage.md": "# Usage\n", "src/app.py": "def main():\n    run(verbose=True)\n", "src/helpers.py": "import os.path\n",
	}
	if got := tree(t, ws); !maps.Equal(got, want) {
		t.Errorf("after the patch: %v, want %v", got, want)
	}
	var entry string
	var finished []map[string]any
	for _, n := range notes {
		if n["method"] != "octet/event" {
			continue
		}
		ev := n["params"].(map[string]any)["event"].(map[string]any)
		if ev["kind"] == "assistant_committed" && entry == "" {
			entry = ev["entryId"].(string)
		}
		if ev["kind"] == "tool_finished" {
			finished = append(finished, ev)
		}
	}
	if len(finished) != 2 || finished[0]["isError"] != true || finished[1]["isError"] != false || len(finished[1]["changes"].([]any)) != 6 {
		t.Errorf("tool_finished events: %v", finished)
	}
	rw := c.call("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": entry, "files": true}, nil, nil)
	if rw["applied"] != true {
		t.Errorf("rewind: %v", rw)
	}
	if got := tree(t, ws); !maps.Equal(got, before) {
		t.Errorf("after the rewind: %v, want %v", got, before)
	}
	if _, err := os.Lstat(filepath.Join(ws, "docs")); !os.IsNotExist(err) {
		t.Errorf("after the rewind, docs, which the patch created: %v", err)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	cmd.Wait()
}
