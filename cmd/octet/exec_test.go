package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// execEnv is a workspace, a home and a scripted provider for exec tests.
type execEnv struct {
	ws, home string
	srv      *providertest.Server
	vars     map[string]string
}

func newExecEnv(t *testing.T, turns ...providertest.Turn) *execEnv {
	t.Helper()
	x := &execEnv{ws: t.TempDir(), home: t.TempDir(), srv: providertest.New(t)}
	x.srv.Enqueue(turns...)
	x.vars = map[string]string{"OCTET_HOME": x.home, "OPENAI_BASE_URL": x.srv.URL(), "OPENAI_API_KEY": fakeKey}
	if err := os.WriteFile(filepath.Join(x.ws, "notes.txt"), []byte("alpha\nbeta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return x
}

func (x *execEnv) sessionFiles(t *testing.T) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(x.home, "sessions", "*.jsonl"))
	return m
}

// oneSession returns the path of the one session file under x's home,
// failing the test when there is none or more than one.
func (x *execEnv) oneSession(t *testing.T) string {
	t.Helper()
	files := x.sessionFiles(t)
	if len(files) != 1 {
		t.Fatalf("session files %v, want one", files)
	}
	return files[0]
}

// sessionIDOf is the id of the session file at path.
func sessionIDOf(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".jsonl")
}

type jsonLine struct {
	SessionID string          `json:"sessionId"`
	RunID     string          `json:"runId"`
	Seq       int64           `json:"seq"`
	Event     json.RawMessage `json:"event"`
}

func parseJSONLines(t *testing.T, out string) ([]jsonLine, []map[string]any) {
	t.Helper()
	var lines []jsonLine
	var events []map[string]any
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, `{"type":"result"`) {
			continue // the final result line (parseResult)
		}
		var jl jsonLine
		if err := json.Unmarshal([]byte(l), &jl); err != nil {
			t.Fatalf("stdout line is not JSON: %q: %v", l, err)
		}
		var ev map[string]any
		if err := json.Unmarshal(jl.Event, &ev); err != nil {
			t.Fatalf("event is not an object: %s", jl.Event)
		}
		lines = append(lines, jl)
		events = append(events, ev)
	}
	return lines, events
}

func TestExecJSON(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.Message("Reading."), providertest.FunctionCall("call_1", "read", `{"path":"notes.txt"}`)),
		providertest.Text("The file lists alpha and beta."),
	)
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "what is in notes.txt?")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	lines, events := parseJSONLines(t, r.stdout)
	var kinds []string
	for i, ev := range events {
		kinds = append(kinds, ev["kind"].(string))
		if lines[i].Seq != int64(i+1) || lines[i].RunID == "" || lines[i].SessionID == "" || lines[i].SessionID != lines[0].SessionID {
			t.Errorf("line %d envelope = %+v", i, lines[i])
		}
	}
	for _, want := range []string{"run_started", "output_delta", "assistant_committed", "tool_started", "tool_policy_decision", "tool_finished", "turn_finished", "run_finished"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no %s event in %v", want, kinds)
		}
	}
	if kinds[0] != "run_started" || kinds[len(kinds)-1] != "run_finished" || events[len(events)-1]["outcome"] != "completed" {
		t.Errorf("first/last = %s/%v", kinds[0], events[len(events)-1])
	}
	var text strings.Builder
	for _, ev := range events {
		if ev["kind"] == "output_delta" && ev["channel"] == "text" {
			text.WriteString(ev["text"].(string))
		}
		if ev["kind"] == "tool_policy_decision" {
			if ev["decision"] != "allowed" {
				t.Errorf("read not allowed: %v", ev)
			}
			pol := ev["effectiveToolPolicy"].(map[string]any)["effect_policy"].(map[string]any)
			if pol["value"] != "unsafe_host" || pol["source"] != "default" {
				t.Errorf("effect policy evidence = %v", pol)
			}
		}
	}
	if !strings.Contains(text.String(), "alpha and beta") {
		t.Errorf("answer text = %q", text.String())
	}
	// The tool really ran: the second request carries the file's content.
	reqs := x.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider requests", len(reqs))
	}
	second, _ := json.Marshal(reqs[1].Input())
	if !strings.Contains(string(second), "beta") {
		t.Errorf("second request lacks the read result: %s", second)
	}
	x.oneSession(t)
	assertNoSecret(t, []string{r.stdout, r.stderr}, x.home, x.ws)
	for _, req := range reqs {
		b, _ := json.Marshal(req)
		if strings.Contains(string(b), fakeKey) {
			t.Error("recorded request shows the key")
		}
	}
}

func TestExecTextStreamsAnswerToStdout(t *testing.T) {
	x := newExecEnv(t, providertest.Text("Hello from the model."))
	r := runCLI(t, x.ws, x.vars, "exec", "say hello")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if r.stdout != "Hello from the model.\n" {
		t.Errorf("stdout = %q (only the answer belongs there)", r.stdout)
	}
	if !strings.Contains(r.stderr, "session ") {
		t.Errorf("stderr lacks the session note: %q", r.stderr)
	}
	assertNoSecret(t, []string{r.stdout, r.stderr}, x.home)
}

func editTurns() []providertest.Turn {
	return []providertest.Turn{
		providertest.Reply(providertest.FunctionCall("c1", "read", `{"path":"notes.txt"}`)),
		providertest.Reply(providertest.FunctionCall("c2", "edit", `{"path":"notes.txt","old_text":"beta","new_text":"gamma"}`)),
		providertest.Text("edited"),
	}
}

func TestExecApproveAndDeny(t *testing.T) {
	for _, tc := range []struct {
		flag, want string
	}{
		{"--approve", "alpha\ngamma\n"},
		{"--deny", "alpha\nbeta\n"},
		{"", "alpha\nbeta\n"}, // no terminal to ask: denied
	} {
		t.Run(tc.flag, func(t *testing.T) {
			x := newExecEnv(t, editTurns()...)
			args := []string{"exec", "--effect-policy", "controlled"}
			if tc.flag != "" {
				args = append(args, tc.flag)
			}
			r := runCLI(t, x.ws, x.vars, append(args, "change beta")...)
			if r.code != exitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			got, _ := os.ReadFile(filepath.Join(x.ws, "notes.txt"))
			if string(got) != tc.want {
				t.Errorf("notes.txt = %q, want %q", got, tc.want)
			}
			if !strings.Contains(r.stderr, "approval needed: ") || !strings.Contains(r.stderr, "-beta") {
				t.Errorf("stderr lacks the approval preview with diff:\n%s", r.stderr)
			}
		})
	}
}

func TestExecOutcomeExitCodes(t *testing.T) {
	t.Run("failed", func(t *testing.T) {
		x := newExecEnv(t, providertest.Status(400, "invalid_request_error", "bad_request", "nope"))
		r := runCLI(t, x.ws, x.vars, "exec", "hi")
		if r.code != exitFailed || !strings.Contains(r.stderr, "run failed") {
			t.Errorf("exit %d stderr %q", r.code, r.stderr)
		}
	})
	t.Run("max_turns", func(t *testing.T) {
		x := newExecEnv(t,
			providertest.Reply(providertest.FunctionCall("c1", "read", `{"path":"notes.txt"}`)),
			providertest.Reply(providertest.FunctionCall("c2", "read", `{"path":"notes.txt"}`)),
		)
		r := runCLI(t, x.ws, x.vars, "exec", "--max-turns", "1", "loop")
		if r.code != exitMaxTurns || !strings.Contains(r.stderr, "max_turns") {
			t.Errorf("exit %d stderr %q", r.code, r.stderr)
		}
		// It says how to go on: the session to continue.
		file := x.oneSession(t)
		sid := sessionIDOf(file)
		if want := "octet exec --session " + sid + ` "continue"`; !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q does not say %s", r.stderr, want)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		x := newExecEnv(t)
		x.vars["OPENAI_BASE_URL"] = "http://127.0.0.1:1/v1"
		// A refused connection to a loopback endpoint ends the run at
		// once on every route: nothing listens there.
		r := runCLI(t, x.ws, x.vars, "exec", "hi")
		if r.code != exitFailed || !strings.Contains(r.stderr, "no server is listening at http://127.0.0.1:1/v1: start it, or check OPENAI_BASE_URL") {
			t.Errorf("exit %d stderr %q", r.code, r.stderr)
		}
		assertNoSecret(t, []string{r.stdout, r.stderr}, x.home)
	})
	t.Run("refused key", func(t *testing.T) {
		x := newExecEnv(t, providertest.Status(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided"))
		r := runCLI(t, x.ws, x.vars, "exec", "hi")
		if r.code != exitFailed || !strings.Contains(r.stderr, "refused the API key") {
			t.Errorf("exit %d stderr %q", r.code, r.stderr)
		}
		assertNoSecret(t, []string{r.stdout, r.stderr}, x.home)
	})
}

func TestExecToolsFlagLimitsAdvertisedTools(t *testing.T) {
	x := newExecEnv(t, providertest.Text("ok"))
	r := runCLI(t, x.ws, x.vars, "exec", "--tools", "read", "hi")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b, _ := json.Marshal(x.srv.Requests()[0].Body["tools"])
	if !strings.Contains(string(b), `"read"`) || strings.Contains(string(b), `"edit"`) {
		t.Errorf("advertised tools = %s", b)
	}
}

func TestSessionsListShowExport(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.FunctionCall("c1", "read", `{"path":"notes.txt"}`)),
		providertest.Text("token=abcdefghijklmnop is in the file"),
	)
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "read notes.txt; my key is "+"sk-proj-"+strings.Repeat("Z", 40))
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines, _ := parseJSONLines(t, r.stdout)
	id := lines[0].SessionID

	r = runCLI(t, x.ws, x.vars, "sessions", "list")
	if r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Errorf("list: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, x.ws, x.vars, "sessions", "show", id)
	if r.code != 0 || !strings.Contains(r.stdout, "[user] read notes.txt") || !strings.Contains(r.stdout, "run ") || !strings.Contains(r.stdout, "completed") {
		t.Errorf("show: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, x.ws, x.vars, "sessions", "export", id)
	if r.code != 0 || !strings.Contains(r.stdout, `"kind":"header"`) {
		t.Fatalf("export: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, strings.Repeat("Z", 40)) || strings.Contains(r.stdout, "abcdefghijklmnop") {
		t.Errorf("export did not redact secrets:\n%s", r.stdout)
	}
	r = runCLI(t, x.ws, x.vars, "sessions", "show", "20990101-000000-000000000000")
	if r.code != exitUsage || !strings.Contains(r.stderr, `no session "20990101-000000-000000000000" in `) || !strings.Contains(r.stderr, "octet sessions list") {
		t.Errorf("missing session: exit %d, stderr %q", r.code, r.stderr)
	}
	if r = runCLI(t, x.ws, x.vars, "sessions", "export", "nope"); r.code != exitUsage || !strings.Contains(r.stderr, `no session "nope"`) {
		t.Errorf("export of a missing session: exit %d, stderr %q", r.code, r.stderr)
	}
	assertNoSecret(t, []string{r.stdout, r.stderr}, x.home)
}

func TestExecContinuesSession(t *testing.T) {
	x := newExecEnv(t, providertest.Text("first"),
		providertest.Reply(providertest.FunctionCall("c1", "read", `{"path":"notes.txt"}`)), providertest.Text("second"))
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "one")
	lines, _ := parseJSONLines(t, r.stdout)
	id := lines[0].SessionID
	// Run from another directory: the session keeps its own workspace.
	r = runCLI(t, t.TempDir(), x.vars, "exec", "--json", "--session", id, "two")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	l2, ev2 := parseJSONLines(t, r.stdout)
	if l2[0].SessionID != id {
		t.Errorf("continued run reports session %s, want %s", l2[0].SessionID, id)
	}
	for _, ev := range ev2 {
		if ev["kind"] == "tool_finished" && ev["isError"] != false {
			t.Errorf("read in the session's workspace failed: %v", ev)
		}
	}
	if n := len(x.sessionFiles(t)); n != 1 {
		t.Errorf("%d session files, want 1", n)
	}
	in, _ := json.Marshal(x.srv.Requests()[1].Input())
	if !strings.Contains(string(in), "one") || !strings.Contains(string(in), "first") {
		t.Errorf("second run lacks the first exchange: %s", in)
	}
}

// TestExecRecoversOnCodexProfile: with runtime_profile = "codex" an
// interrupted stream is replaced by the agent's recovery envelope; the
// partial text arrives only as recovered_output, never as the answer.
func TestExecRecoversOnCodexProfile(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.Message("partial words that will be cut off here")).DropAfter(4+3),
		providertest.Text("the whole answer"),
	)
	if err := os.WriteFile(filepath.Join(x.home, "config.toml"), []byte("runtime_profile = \"codex\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "hi")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	_, events := parseJSONLines(t, r.stdout)
	var kinds []string
	var recovered string
	for _, ev := range events {
		kinds = append(kinds, ev["kind"].(string))
		if ev["kind"] == "recovered_output" {
			recovered += ev["text"].(string)
		}
	}
	for _, want := range []string{"provider_usage_uncertain", "provider_retry", "recovered_output"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no %s in %v", want, kinds)
		}
	}
	if recovered != "partial words that" {
		t.Errorf("recovered = %q", recovered)
	}
	// Declared without the profile, the same interruption fails the run.
	y := newExecEnv(t, providertest.Reply(providertest.Message("partial words that will be cut off here")).DropAfter(4+3))
	y.writeGlobalConfig(t, "runtime_profile = \"none\"\n")
	r = runCLI(t, y.ws, y.vars, "exec", "hi")
	if r.code != exitFailed {
		t.Errorf("unqualified route: exit %d, want 1 (no replay)", r.code)
	}
}

// TestExecTextOmitsFailedAttempt: written to a file, stdout holds
// only committed answer text — never the text of an interrupted attempt,
// which appears on stderr as recovered output instead.
func TestExecTextOmitsFailedAttempt(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.Message("partial words that will be cut off here")).DropAfter(4+3),
		providertest.Text("the whole answer"),
	)
	if err := os.WriteFile(filepath.Join(x.home, "config.toml"), []byte("runtime_profile = \"codex\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, x.ws, x.vars, "exec", "hi")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if r.stdout != "the whole answer\n" {
		t.Errorf("stdout = %q, want only the committed answer", r.stdout)
	}
	if !strings.Contains(r.stderr, "┆ partial words that") {
		t.Errorf("stderr lacks the recovered output:\n%s", r.stderr)
	}
}

// TestExecReadsPromptFromStdin: "octet exec -" takes the whole of stdin as
// the prompt; an empty stdin is a usage error.
func TestExecReadsPromptFromStdin(t *testing.T) {
	x := newExecEnv(t, providertest.Text("ok"))
	prompt := "first line of the prompt\nsecond line: what is in notes.txt?\n"
	r := runCLIStdin(t, x.ws, x.vars, prompt, "exec", "-")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	in, _ := json.Marshal(x.srv.Requests()[0].Input())
	want, _ := json.Marshal(prompt)
	if !strings.Contains(string(in), strings.Trim(string(want), `"`)) {
		t.Fatalf("request input lacks the stdin prompt: %s", in)
	}
	r = runCLIStdin(t, x.ws, x.vars, " \n", "exec", "-")
	if r.code != exitUsage || !strings.Contains(r.stderr, "the prompt on stdin is empty") {
		t.Errorf("empty stdin: exit %d, stderr %q", r.code, r.stderr)
	}
	if n := len(x.srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestSessionIDPrefixes: every command taking a session id accepts an
// unambiguous prefix; an ambiguous one lists the candidates and an unknown
// one is a usage error (exit 2), on exec as on sessions show.
func TestSessionIDPrefixes(t *testing.T) {
	x := newExecEnv(t, providertest.Text("first"), providertest.Text("second"), providertest.Text("third"))
	var ids []string
	for _, p := range []string{"one", "two"} {
		r := runCLI(t, x.ws, x.vars, "exec", "--json", p)
		lines, _ := parseJSONLines(t, r.stdout)
		ids = append(ids, lines[0].SessionID)
	}
	common := 0
	for common < len(ids[0]) && ids[0][common] == ids[1][common] {
		common++
	}
	unique := ids[1][:common+1]

	r := runCLI(t, x.ws, x.vars, "sessions", "show", unique)
	if r.code != exitOK || !strings.Contains(r.stdout, "session "+ids[1]) || !strings.Contains(r.stdout, "[user] two") {
		t.Errorf("show %s: exit %d\n%s%s", unique, r.code, r.stdout, r.stderr)
	}
	if r = runCLI(t, x.ws, x.vars, "sessions", "export", unique); r.code != exitOK || !strings.Contains(r.stdout, ids[1]) {
		t.Errorf("export %s: exit %d %s", unique, r.code, r.stderr)
	}
	r = runCLI(t, x.ws, x.vars, "exec", "--json", "--session", unique, "three")
	if l, _ := parseJSONLines(t, r.stdout); r.code != exitOK || l[0].SessionID != ids[1] {
		t.Errorf("exec --session %s: exit %d %s", unique, r.code, r.stderr)
	}
	if n := len(x.sessionFiles(t)); n != 2 {
		t.Errorf("%d session files, want 2", n)
	}

	ambiguous := ids[0][:common]
	for _, args := range [][]string{{"sessions", "show", ambiguous}, {"exec", "--session", ambiguous, "four"}} {
		r = runCLI(t, x.ws, x.vars, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "is ambiguous: it matches 2 sessions") ||
			!strings.Contains(r.stderr, ids[0]) || !strings.Contains(r.stderr, ids[1]) {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	r = runCLI(t, x.ws, x.vars, "exec", "--session", "20990101-nope", "five")
	if r.code != exitUsage || !strings.Contains(r.stderr, `no session "20990101-nope" in `) || !strings.Contains(r.stderr, "octet sessions list shows the sessions there") {
		t.Errorf("exec with an unknown session: exit %d, stderr %q", r.code, r.stderr)
	}
	if n := len(x.srv.Requests()); n != 3 {
		t.Errorf("%d provider requests, want 3 (none for refused ids)", n)
	}
}

// TestExecShowsWhatRan: the text output shows a command's output
// (tool_output), why calls failed (a command's exit code, a tool's error),
// and the run's usage and cost at its end; sessions list and show give
// the recorded cost too.
func TestExecShowsWhatRan(t *testing.T) {
	usage := provider.Usage{InputTokens: 1000, CachedTokens: 200, OutputTokens: 2000, ReasoningTokens: 500}
	x := newExecEnv(t,
		providertest.Reply(providertest.FunctionCall("c1", "bash", `{"command":"echo hello from bash; echo second line; exit 3"}`)).WithUsage(usage),
		providertest.Reply(providertest.FunctionCall("c2", "read", `{"path":"missing.txt"}`)).WithUsage(usage),
		providertest.Text("done").WithUsage(usage),
	)
	r := runCLI(t, x.ws, x.vars, "exec", "run it")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// gpt-5.1-codex list price, three times: 3 × $0.021025.
	for _, want := range []string{
		"▸ bash", "  │ hello from bash\n  │ second line\n", "  ✗ failed: exit code 3\n",
		"▸ read", "  ✗ failed: ",
		"usage: input 3000 (cached 600), output 6000 (reasoning 1500) tokens, cost $0.063075\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r.stdout != "done\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	if strings.Contains(r.stderr, "read\n  ✗ failed\n") {
		t.Errorf("the read failure does not say why:\n%s", r.stderr)
	}

	r = runCLI(t, x.ws, x.vars, "sessions", "list")
	if r.code != exitOK || !strings.Contains(r.stdout, "COST") || !strings.Contains(r.stdout, "$0.063075") {
		t.Errorf("list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, x.ws, x.vars, "sessions", "show", filepath.Base(strings.TrimSuffix(x.sessionFiles(t)[0], ".jsonl")))
	if r.code != exitOK || !strings.Contains(r.stdout, "usage: 3 requests, input 3000 (cached 600), output 6000 (reasoning 1500), cost $0.063075 — complete") ||
		!strings.Contains(r.stdout, "[result c1 error, exit code 3] hello from bash") {
		t.Errorf("show: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestExecUnpricedCost: a model without a price says its cost is unknown,
// in exec and in the session listing, never $0.
func TestExecUnpricedCost(t *testing.T) {
	x := newExecEnv(t, providertest.Text("ok").WithUsage(provider.Usage{InputTokens: 10, OutputTokens: 5}))
	r := runCLI(t, x.ws, x.vars, "exec", "--model", "local-model", "hi")
	if r.code != exitOK || !strings.Contains(r.stderr, "cost unknown (no price for the model)") {
		t.Errorf("exec: exit %d\n%s", r.code, r.stderr)
	}
	r = runCLI(t, x.ws, x.vars, "sessions", "list")
	if !strings.Contains(r.stdout, "unpriced") || strings.Contains(r.stdout, "$0") {
		t.Errorf("list:\n%s", r.stdout)
	}
}

// TestSessionsShowRenamedTitle: a session renamed (a title record, as
// octet/session/rename writes) is listed and shown with its new title.
func TestSessionsShowRenamedTitle(t *testing.T) {
	x := newExecEnv(t, providertest.Text("done"))
	if r := runCLI(t, x.ws, x.vars, "exec", "--json", "hello"); r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	files := x.sessionFiles(t)
	s, err := session.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetTitle("Renamed title"); err != nil {
		t.Fatal(err)
	}
	id := s.Header().ID
	s.Close()
	if r := runCLI(t, x.ws, x.vars, "sessions", "list"); !strings.Contains(r.stdout, "Renamed title") {
		t.Errorf("list: %q %q", r.stdout, r.stderr)
	}
	if r := runCLI(t, x.ws, x.vars, "sessions", "show", id); !strings.Contains(r.stdout, "title   Renamed title") {
		t.Errorf("show: %q %q", r.stdout, r.stderr)
	}
}

// TestExecTruncatedAnswerSaysSo: an answer that stopped at the model's
// output limit is printed (it is what the model wrote) but stderr says it
// is incomplete and how to go on, on every route; a whole answer has no
// such note.
func TestExecTruncatedAnswerSaysSo(t *testing.T) {
	cut := providertest.Incomplete("max_output_tokens", providertest.Message("the first half of"))
	envs := map[string]*execEnv{"responses": newExecEnv(t, cut, providertest.Text("whole"))}
	for _, rc := range routeCases {
		envs[rc.name] = routeEnv(t, rc, cut, providertest.Text("whole"))
	}
	for name, x := range envs {
		r := runCLI(t, x.ws, x.vars, "exec", "hi")
		if r.code != exitOK || r.stdout != "the first half of\n" {
			t.Fatalf("%s: exit %d, stdout %q: %s", name, r.code, r.stdout, r.stderr)
		}
		sid := sessionIDOf(x.oneSession(t))
		want := "the answer stopped at the model's output limit (max_output_tokens): it is incomplete; to go on, octet exec --session " + sid + ` "continue"`
		if !strings.Contains(r.stderr, want) {
			t.Errorf("%s: stderr lacks %q:\n%s", name, want, r.stderr)
		}
		r = runCLI(t, x.ws, x.vars, "exec", "again")
		if r.code != exitOK || strings.Contains(r.stderr, "output limit") {
			t.Errorf("%s: a whole answer: exit %d, stderr:\n%s", name, r.code, r.stderr)
		}
	}
}
