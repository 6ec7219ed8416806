package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// parseResult returns the final {"type":"result"} line of exec --json
// output, failing the test unless it is the last line.
func parseResult(t *testing.T, out string) execResultLine {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	last := lines[len(lines)-1]
	var r execResultLine
	if err := json.Unmarshal([]byte(last), &r); err != nil || r.Type != "result" {
		t.Fatalf("the last line is not a result object: %q (%v)", last, err)
	}
	return r
}

// TestExecResultAndOutputFile: --json ends with a result object (outcome,
// exit code, final answer, usage, exact cost, session id); -o writes the
// final answer — the last assistant message, not the text before a tool
// call — to a file, relative to the directory octet was started in.
func TestExecResultAndOutputFile(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.Message("Reading."), providertest.FunctionCall("call_1", "read", `{"path":"notes.txt"}`)),
		providertest.Text("The file lists alpha and beta."),
	)
	r := runBin(t, x.ws, x.vars, "", "exec", "--json", "-o", "answer.txt", "what is in notes.txt?")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines, _ := parseJSONLines(t, r.stdout)
	res := parseResult(t, r.stdout)
	if res.Outcome != "completed" || res.ExitCode != 0 || res.Answer != "The file lists alpha and beta." ||
		res.SessionID != lines[0].SessionID || res.RunID != lines[0].RunID {
		t.Errorf("result = %+v", res)
	}
	if res.Usage.Requests != 2 || res.Usage.Input == 0 || !res.Usage.Complete || res.CostUSD == nil || *res.CostUSD == "" || strings.HasPrefix(*res.CostUSD, "$") {
		t.Errorf("result usage/cost = %+v %v", res.Usage, res.CostUSD)
	}
	b, err := os.ReadFile(filepath.Join(x.ws, "answer.txt"))
	if err != nil || string(b) != "The file lists alpha and beta.\n" {
		t.Errorf("-o file = %q, %v", b, err)
	}

	// A failed run still ends with the result object, and -o holds what
	// it has (nothing): a stale answer never survives.
	x.srv.Enqueue(providertest.Status(400, "invalid_request_error", "bad", "the request was bad"))
	r = runBin(t, x.ws, x.vars, "", "exec", "--json", "-o", "answer.txt", "again")
	res = parseResult(t, r.stdout)
	if r.code != exitFailed || res.Outcome != "failed" || res.ExitCode != exitFailed || res.Error == "" || res.Answer != "" {
		t.Errorf("failed run: exit %d, result %+v", r.code, res)
	}
	if b, _ := os.ReadFile(filepath.Join(x.ws, "answer.txt")); len(b) != 0 {
		t.Errorf("-o after a failed run = %q", b)
	}

	// Bad -o and --cd values are refused before any request is made.
	before := len(x.srv.Requests())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "missing/answer.txt"}, "-o missing/answer.txt: its directory"},
		{[]string{"-o", "."}, "-o .: is a directory"},
		{[]string{"--cd", "nowhere"}, "--cd nowhere: no such directory"},
		{[]string{"--cd", "notes.txt"}, "--cd notes.txt: not a directory"},
	} {
		r := runBin(t, x.ws, x.vars, "", append(append([]string{"exec"}, tc.args...), "hi")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if n := len(x.srv.Requests()); n != before {
		t.Errorf("%d requests made for refused command lines", n-before)
	}
}

// TestExecCdLastAndEphemeral: --cd runs in another directory; --last
// continues the latest session started in the working directory (none
// there is a usage error); --ephemeral leaves no session behind, nor its
// temporary directory.
func TestExecCdLastAndEphemeral(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.FunctionCall("call_1", "read", `{"path":"notes.txt"}`)),
		providertest.Text("FIRST ANSWER"),
		providertest.Text("SECOND ANSWER"),
		providertest.Text("EPHEMERAL ANSWER"),
	)
	elsewhere := t.TempDir()
	r := runBin(t, elsewhere, x.vars, "", "exec", "--cd", x.ws, "read notes.txt")
	if r.code != exitOK || r.stdout != "FIRST ANSWER\n" {
		t.Fatalf("--cd: exit %d stdout %q: %s", r.code, r.stdout, r.stderr)
	}
	if in, _ := json.Marshal(x.srv.Requests()[1].Input()); !strings.Contains(string(in), "beta") {
		t.Errorf("the read did not run in --cd's directory: %s", in)
	}
	r = runBin(t, elsewhere, x.vars, "", "exec", "--last", "again")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--last: no session started in "+elsewhere) {
		t.Errorf("--last elsewhere: exit %d: %s", r.code, r.stderr)
	}
	r = runBin(t, x.ws, x.vars, "", "exec", "--last", "SECOND-PROMPT")
	if r.code != exitOK || r.stdout != "SECOND ANSWER\n" {
		t.Fatalf("--last: exit %d stdout %q: %s", r.code, r.stdout, r.stderr)
	}
	if files := x.sessionFiles(t); len(files) != 1 {
		t.Errorf("--last started a new session: %v", files)
	}
	in, _ := json.Marshal(x.srv.Requests()[2].Input())
	if !strings.Contains(string(in), "read notes.txt") || !strings.Contains(string(in), "SECOND-PROMPT") {
		t.Errorf("--last did not continue the conversation: %s", in)
	}
	for _, args := range [][]string{{"--last", "--session", "x"}, {"--ephemeral", "--last"}, {"--session", "x", "--cd", "."}} {
		r := runBin(t, x.ws, x.vars, "", append(append([]string{"exec"}, args...), "hi")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "conflicts") && !strings.Contains(r.stderr, "cannot continue") {
			t.Errorf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}

	tmp := t.TempDir()
	vars := map[string]string{"TMPDIR": tmp}
	for k, v := range x.vars {
		vars[k] = v
	}
	r = runBin(t, x.ws, vars, "", "exec", "--ephemeral", "--json", "EPHEMERAL-PROMPT")
	if r.code != exitOK || parseResult(t, r.stdout).Answer != "EPHEMERAL ANSWER" {
		t.Fatalf("--ephemeral: exit %d: %s\n%s", r.code, r.stdout, r.stderr)
	}
	if files := x.sessionFiles(t); len(files) != 1 {
		t.Errorf("--ephemeral kept a session: %v", files)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("--ephemeral left %v in TMPDIR", left)
	}
	if l := runCLI(t, x.ws, x.vars, "sessions", "list"); strings.Contains(l.stdout, "EPHEMERAL") {
		t.Errorf("listed:\n%s", l.stdout)
	}
}

// TestExecSessionSaysWhereItRuns: --session continues a session in the
// directory it started in, and says so when that is not the current one.
func TestExecSessionSaysWhereItRuns(t *testing.T) {
	x := newExecEnv(t, providertest.Text("one"), providertest.Text("two"))
	r := runBin(t, x.ws, x.vars, "", "exec", "--json", "hi")
	id := parseResult(t, r.stdout).SessionID
	r = runBin(t, t.TempDir(), x.vars, "", "exec", "--session", id[:12], "more")
	if r.code != exitOK || !strings.Contains(r.stderr, "continuing session "+id+" in its own directory "+x.ws) {
		t.Errorf("exit %d: %s", r.code, r.stderr)
	}
}

// TestExecSessionDirectoryGone: continuing a session whose directory no
// longer exists is a usage error (exit 2) naming the directory and what
// to do, before anything runs. It failed with exit 1 and
// "set up tools: tools config: workspace root: stat …: no such file or
// directory".
func TestExecSessionDirectoryGone(t *testing.T) {
	x := newExecEnv(t, providertest.Text("one"))
	ws := filepath.Join(t.TempDir(), "project")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	r := runBin(t, ws, x.vars, "", "exec", "--json", "hi")
	id := parseResult(t, r.stdout).SessionID
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	r = runBin(t, x.ws, x.vars, "", "exec", "--session", id, "more")
	if r.code != exitUsage || !strings.Contains(r.stderr, "session "+id+" started in "+ws+", which no longer exists") || strings.Contains(r.stderr, "set up tools") {
		t.Errorf("exit %d: %s", r.code, r.stderr)
	}
	if n := len(x.srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestExecPromptArgumentNotUTF8: a prompt argument that is not valid
// UTF-8 is a usage error before anything runs, as the same prompt on
// stdin is. It was sent with each invalid byte replaced by U+FFFD.
func TestExecPromptArgumentNotUTF8(t *testing.T) {
	x := newExecEnv(t, providertest.Text("ok"))
	r := runBin(t, x.ws, x.vars, "", "exec", "caf\xe9 au lait")
	if r.code != exitUsage || !strings.Contains(r.stderr, "not valid UTF-8") {
		t.Errorf("exit %d: %s", r.code, r.stderr)
	}
	if n := len(x.srv.Requests()); n != 0 || len(x.sessionFiles(t)) != 0 {
		t.Errorf("%d requests, sessions %v", n, x.sessionFiles(t))
	}
	r = runBin(t, x.ws, x.vars, "caf\xe9 au lait", "exec", "-")
	if r.code != exitUsage || !strings.Contains(r.stderr, "not valid UTF-8") {
		t.Errorf("on stdin: exit %d: %s", r.code, r.stderr)
	}
}

// TestExecAppendsStdin: with a prompt argument, piped stdin is appended
// to it as a <stdin> context block; an empty pipe adds nothing.
func TestExecAppendsStdin(t *testing.T) {
	x := newExecEnv(t, providertest.Text("ok"), providertest.Text("ok"))
	r := runBin(t, x.ws, x.vars, "line one\nline two\n", "exec", "summarize this")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	in, _ := json.Marshal(x.srv.Requests()[0].Input())
	want, _ := json.Marshal("summarize this\n\n<stdin>\nline one\nline two\n</stdin>")
	if !strings.Contains(string(in), strings.Trim(string(want), `"`)) {
		t.Errorf("request input lacks the stdin block: %s", in)
	}
	r = runBin(t, x.ws, x.vars, "", "exec", "plain")
	in, _ = json.Marshal(x.srv.Requests()[1].Input())
	if r.code != exitOK || strings.Contains(string(in), "<stdin>") {
		t.Errorf("empty stdin: exit %d, input %s", r.code, in)
	}
}

// TestExecStreamsToPipe: on a pipe the answer arrives as the model writes
// it, not only once the message is complete.
func TestExecStreamsToPipe(t *testing.T) {
	x := newExecEnv(t, providertest.Text("The answer is forty two and nothing else").StallAfter(7))
	cmd := exec.CommandContext(t.Context(), octetBin, "exec", "question")
	cmd.Dir = x.ws
	cmd.Env = binEnv(x.vars)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	got := make(chan string, 1)
	go func() {
		var b strings.Builder
		r := bufio.NewReader(out)
		for !strings.Contains(b.String(), "The answer") {
			c, err := r.ReadByte()
			if err != nil {
				break
			}
			b.WriteByte(c)
		}
		got <- b.String()
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, "The answer") {
			t.Errorf("stdout ended with %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer text on the pipe while the model is mid-message")
	}
}

// TestExecPipeRetryKeepsOutputFileClean: on a pipe the text of an attempt
// that fails mid-message has already been written; stderr says it is
// discarded, and -o (like the --json result) holds only the answer.
func TestExecPipeRetryKeepsOutputFileClean(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.Message("partial words that will be cut off here")).DropAfter(4+3),
		providertest.Text("the whole answer"),
	)
	r := runBin(t, x.ws, x.vars, "", "exec", "-o", "answer.txt", "hi")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "partial words") || !strings.HasSuffix(r.stdout, "the whole answer\n") {
		t.Errorf("stdout = %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "answer text already written from the failed attempt is discarded") {
		t.Errorf("stderr does not say the streamed text is discarded:\n%s", r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(x.ws, "answer.txt")); string(b) != "the whole answer\n" {
		t.Errorf("-o file = %q", b)
	}
}

// TestZeroPriceIsAPrice: a model priced at 0 costs $0 in exec, in
// sessions list and in sessions show alike; only a model without a price
// is unpriced.
func TestZeroPriceIsAPrice(t *testing.T) {
	x := newExecEnv(t, providertest.Text("ok"), providertest.Text("ok"))
	x.writeGlobalConfig(t, "[prices.\"free-model\"]\ninput = \"0\"\ncached_input = \"0\"\noutput = \"0\"\n")
	r := runBin(t, x.ws, x.vars, "", "exec", "--json", "--model", "free-model", "hi")
	res := parseResult(t, r.stdout)
	if r.code != exitOK || res.CostUSD == nil || *res.CostUSD != "0" {
		t.Fatalf("exec: exit %d, cost %v: %s", r.code, res.CostUSD, r.stderr)
	}
	list := runBin(t, x.ws, x.vars, "", "sessions", "list")
	show := runBin(t, x.ws, x.vars, "", "sessions", "show", res.SessionID)
	if strings.Contains(list.stdout, "unpriced") || !strings.Contains(list.stdout, " $0\n") {
		t.Errorf("list:\n%s", list.stdout)
	}
	if !strings.Contains(show.stdout, "cost $0 — complete") {
		t.Errorf("show:\n%s", show.stdout)
	}
	// A model without a price stays unpriced everywhere.
	r = runBin(t, x.ws, x.vars, "", "exec", "--json", "--model", "local-model", "hi")
	res = parseResult(t, r.stdout)
	if res.CostUSD != nil {
		t.Errorf("unpriced exec: cost %v", *res.CostUSD)
	}
	show = runBin(t, x.ws, x.vars, "", "sessions", "show", res.SessionID)
	if !strings.Contains(show.stdout, "cost unknown (no price for the model)") {
		t.Errorf("unpriced show:\n%s", show.stdout)
	}
}
