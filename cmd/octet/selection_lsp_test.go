//go:build unix

package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestLSPSelectionSurvivesRestart is issue 34's reproduction through the
// real `octet lsp`: set the reasoning effort to high and the model to
// gpt-5.1, close the session, stop the server, start a new one on the
// same home, resume: the resume result and the next request carry high
// and gpt-5.1, not the configuration's medium and gpt-5.1-codex.
func TestLSPSelectionSurvivesRestart(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("before"), providertest.Text("after"))
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(home+"/config.toml", []byte("model = \"gpt-5.1-codex\"\nreasoning = \"medium\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() (*lspClient, func()) {
		cmd := lspCommand(t, 60*time.Second)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
		c, stdin, stderr := startLSP(t, cmd)
		c.initialize(ws)
		return c, func() {
			c.call("shutdown", nil, nil, nil)
			c.send(map[string]any{"method": "exit"})
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("octet lsp exit: %v\nstderr: %s", err, stderr.String())
			}
		}
	}
	c, stop := start()
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)
	c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "one"}, nil, nil)
	if got := c.call("octet/setReasoning", map[string]any{"sessionId": sid, "effort": "high"}, nil, nil); got["effective"] != "high" {
		t.Fatalf("setReasoning = %v", got)
	}
	if got := c.call("octet/setModel", map[string]any{"sessionId": sid, "model": "gpt-5.1"}, nil, nil); got["effective"] != "gpt-5.1" {
		t.Fatalf("setModel = %v", got)
	}
	c.call("octet/session/close", map[string]any{"sessionId": sid}, nil, nil)
	stop()

	c, stop = start()
	defer stop()
	res := c.call("octet/session/resume", map[string]any{"sessionId": sid}, nil, nil)
	if res["model"] != "gpt-5.1" || res["reasoning"] != "high" {
		t.Errorf("resume result model %v reasoning %v, want gpt-5.1 high", res["model"], res["reasoning"])
	}
	if got := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "two"}, nil, nil); got["outcome"] != "completed" {
		t.Fatalf("prompt after resume = %v", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	first, last := reqs[0].Body, reqs[1].Body
	effort := func(b map[string]any) any { r, _ := b["reasoning"].(map[string]any); return r["effort"] }
	if first["model"] != "gpt-5.1-codex" || effort(first) != "medium" {
		t.Errorf("first request %v %v: the configuration should apply before any selection", first["model"], effort(first))
	}
	if last["model"] != "gpt-5.1" || effort(last) != "high" {
		t.Errorf("request after restart and resume: model %v effort %v, want gpt-5.1 high", last["model"], effort(last))
	}
	if !strings.Contains(string(reqs[1].Raw), "one") {
		t.Errorf("the resumed request lost the conversation: %s", reqs[1].Raw)
	}
}

// TestExecSelectionSurvivesContinuation: octet exec records the model
// and effort its flags chose; continuing the session without them keeps
// that selection (not the configuration's), and a flag given again
// changes only what it names.
func TestExecSelectionSurvivesContinuation(t *testing.T) {
	x := newExecEnv(t, providertest.Text("first"), providertest.Text("second"), providertest.Text("third"))
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "--model", "gpt-5.1", "--reasoning", "high", "one")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines, _ := parseJSONLines(t, r.stdout)
	id := lines[0].SessionID
	if r = runCLI(t, x.ws, x.vars, "exec", "--json", "--session", id, "two"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if r = runCLI(t, x.ws, x.vars, "exec", "--json", "--session", id, "--reasoning", "low", "three"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	effort := func(b map[string]any) any { r, _ := b["reasoning"].(map[string]any); return r["effort"] }
	reqs := x.srv.Requests()
	for i, want := range []struct{ model, effort string }{{"gpt-5.1", "high"}, {"gpt-5.1", "high"}, {"gpt-5.1", "low"}} {
		if reqs[i].Body["model"] != want.model || effort(reqs[i].Body) != want.effort {
			t.Errorf("request %d: %v %v, want %s %s", i+1, reqs[i].Body["model"], effort(reqs[i].Body), want.model, want.effort)
		}
	}
}

// TestExecFeaturesNeedTheRoute is issue 34's second reproduction: on a
// route whose runtime_profile is none the endpoint grants only the
// controls every wire format has (reasoning, parallel calls), so a
// request of a model that has every feature carries no prompt_cache_key
// and no encrypted-reasoning include; the default codex route carries
// them.
func TestExecFeaturesNeedTheRoute(t *testing.T) {
	for _, profile := range []string{"none", "codex"} {
		t.Run(profile, func(t *testing.T) {
			x := newExecEnv(t, providertest.Text("ok"))
			if err := os.WriteFile(x.home+"/config.toml", []byte("runtime_profile = \""+profile+"\"\nmodel = \"gpt-5.1-codex\"\nreasoning = \"high\"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if r := runCLI(t, x.ws, x.vars, "exec", "--json", "go"); r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			b := x.srv.Requests()[0].Body
			r, _ := b["reasoning"].(map[string]any)
			_, cacheKey := b["prompt_cache_key"]
			_, include := b["include"]
			if r["effort"] != "high" {
				t.Errorf("reasoning %v, want the configured high on every route", b["reasoning"])
			}
			want := profile == "codex"
			_, parallel := b["parallel_tool_calls"]
			if parallel != want || (want && b["parallel_tool_calls"] != true) || cacheKey != want || include != want {
				t.Errorf("parallel_tool_calls %v, prompt_cache_key %v, include %v; want each sent: %v on a %s route", b["parallel_tool_calls"], cacheKey, include, want, profile)
			}
		})
	}
}

// TestExecCompact: `octet exec --compact --session ID` summarizes the
// session in a run of its own (compaction events, the summary request
// without tools); the next prompt sees the summary instead of the
// earlier conversation. Without a session to continue, or with a
// prompt, it is a usage error.
func TestExecCompact(t *testing.T) {
	x := newExecEnv(t, providertest.Text("EARLIER ANSWER"), providertest.Text("THE SUMMARY"), providertest.Text("after"))
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "EARLIER QUESTION")
	lines, _ := parseJSONLines(t, r.stdout)
	id := lines[0].SessionID
	r = runCLI(t, x.ws, x.vars, "exec", "--json", "--compact", "--session", id)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	_, events := parseJSONLines(t, r.stdout)
	if len(eventsOfKind(events, "compaction_started")) != 1 || len(eventsOfKind(events, "compaction_finished")) != 1 {
		t.Errorf("compaction events missing: %v", events)
	}
	if r = runCLI(t, x.ws, x.vars, "exec", "--json", "--session", id, "next"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	reqs := x.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	if s := string(reqs[1].Raw); !strings.Contains(s, "EARLIER QUESTION") || strings.Contains(s, `"tools"`) {
		t.Errorf("summary request: %s", s)
	}
	if s := string(reqs[2].Raw); !strings.Contains(s, "THE SUMMARY") || strings.Contains(s, "EARLIER QUESTION") {
		t.Errorf("the prompt after --compact sent %s", s)
	}
	for _, args := range [][]string{{"exec", "--compact"}, {"exec", "--compact", "--session", id, "a prompt"}} {
		if r := runCLI(t, x.ws, x.vars, args...); r.code != 2 || !strings.Contains(r.stderr, "--compact") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, r.code, r.stderr)
		}
	}
}
