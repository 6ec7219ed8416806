package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// This file reproduces what real ACP clients do that octet once
// mishandled (docs/protocol.md, "ACP dialect": the clients).

// awaitStray waits for n answers to raw lines and returns them in the
// order they arrived.
func (p *peer) awaitStray(n int) []message {
	p.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if got := p.stray(); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%d answers, want %d: %+v", len(p.stray()), n, p.stray())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawRequest is one request line with id.
func rawRequest(id, method string, params any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return string(b)
}

// TestRequestsBeforeInitializeWait: agentic.nvim sends session/new right
// behind initialize without waiting for its answer; a request that
// arrives before initialize is answered waits for it, in order, and is
// never refused. Here session/new even comes first.
func TestRequestsBeforeInitializeWait(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.raw(rawRequest("early", "session/new", map[string]any{"cwd": p.ws, "mcpServers": []any{}}))
	p.raw(rawRequest("init", "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}))
	got := p.awaitStray(2)
	if string(got[0].ID) != `"init"` || got[0].Error != nil {
		t.Fatalf("first answer %s %+v, want initialize's", got[0].ID, got[0].Error)
	}
	var res struct{ SessionID string }
	if got[1].Error != nil || json.Unmarshal(got[1].Result, &res) != nil || res.SessionID == "" {
		t.Fatalf("session/new sent before initialize answered %s %+v", got[1].Result, got[1].Error)
	}
}

// TestSessionNewBehindInitialize: initialize and session/new in one
// write, as agentic.nvim sends them, start a session every time (it
// failed on 10 of 11 starts when requests were handled concurrently).
func TestSessionNewBehindInitialize(t *testing.T) {
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p := newPeer(t, stackOpts{policy: tools.Controlled})
			p.raw(rawRequest("1", "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}) + "\n" +
				rawRequest("2", "session/new", map[string]any{"cwd": p.ws, "mcpServers": []any{}}))
			for _, m := range p.awaitStray(2) {
				if m.Error != nil {
					t.Fatalf("answer %s: %+v", m.ID, m.Error)
				}
			}
		})
	}
}

// TestStartsWithoutHome: agentic.nvim starts the agent with only PATH and
// the user's variables. With neither HOME nor OCTET_HOME octet still
// answers initialize (it once exited first), keeping its state in the
// account's home directory from the user database, and says so in its
// log.
func TestStartsWithoutHome(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("HOME is a Unix variable")
	}
	if testing.Short() {
		t.Skip("builds the octet binary")
	}
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		t.Skip("no user database entry for this account:", err)
	}
	bin := testbin.Octet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "acp")
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.Stdin = strings.NewReader(rawRequest("1", "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}) + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("octet acp: %v\n%s", err, stderr.String())
	}
	var m message
	if err := json.Unmarshal(out, &m); err != nil || m.Error != nil || len(m.Result) == 0 {
		t.Fatalf("initialize answered %q (%v)\nstderr: %s", out, err, stderr.String())
	}
	if want := filepath.Join(u.HomeDir, ".octet"); !strings.Contains(stderr.String(), want) {
		t.Errorf("the log does not say the state goes to %s:\n%s", want, stderr.String())
	}
}

// TestLoadSessionOpenHere: Zed drops an idle thread without
// session/close and reopens it with session/load. A session already open
// on the connection is attached again and replayed, never refused, and
// goes on.
func TestLoadSessionOpenHere(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.prov.Enqueue(providertest.Text("first answer"), providertest.Text("second answer"))
	p.initialize(false)
	id := p.newSession()
	if stop := p.prompt(id, "remember"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	before := len(p.notifications("session/update"))
	var res struct {
		Modes         struct{ CurrentModeID string }
		ConfigOptions []struct{ ID string }
	}
	p.ok("session/load", map[string]any{"sessionId": id, "cwd": p.ws, "mcpServers": []any{}}, &res)
	if res.Modes.CurrentModeID != "controlled" || len(res.ConfigOptions) == 0 {
		t.Errorf("session/load answered %+v", res)
	}
	var replayed strings.Builder
	for _, raw := range p.notifications("session/update")[before:] {
		var n struct {
			Update struct {
				SessionUpdate string
				Content       struct{ Text string }
			}
		}
		_ = json.Unmarshal(raw, &n)
		replayed.WriteString(n.Update.SessionUpdate + ":" + n.Update.Content.Text + "\n")
	}
	if !strings.Contains(replayed.String(), "user_message_chunk:remember\n") || !strings.Contains(replayed.String(), "agent_message_chunk:first answer\n") {
		t.Errorf("replay:\n%s", replayed.String())
	}
	if stop := p.prompt(id, "again"); stop != stopEndTurn {
		t.Errorf("prompt after the reload: %q", stop)
	}
}

// afterPermission calls fn after each session/request_permission the peer
// answers: what an editor does between the approval and the write.
func (p *peer) afterPermission(fn func()) {
	answer := p.onRequest
	p.onRequest = func(m message) (any, *rpcError) {
		res, err := answer(m)
		if m.Method == "session/request_permission" {
			fn()
		}
		return res, err
	}
}

// editTwo has the model edit "two" into text in a.txt, on a connection
// with the fs capabilities, and returns the edit's result.
func (p *peer) editTwo(text string) string {
	p.t.Helper()
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"two","new_text":"`+text+`"}`)), providertest.Text("ok"))
	p.initialize(true)
	id := p.newSession()
	if stop := p.prompt(id, "edit"); stop != stopEndTurn {
		p.t.Fatalf("stop %q", stop)
	}
	return callOutput(p.t, p.prov.Requests()[1].Body, "call_1")
}

// TestBufferWithoutFinalNewline: avante's follow-along opens the file in
// a buffer between the preview and the write, and its buffer read joins
// the lines without the final newline. The approved edit is applied
// through fs/write_text_file (it once failed: "changed after it was
// shown"), with the file's own final newline.
func TestBufferWithoutFinalNewline(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	path := filepath.Join(p.ws, "a.txt")
	writeFile(t, path, "one\ntwo\n")
	var mu sync.Mutex
	opened := false // the buffer, once follow-along opened it
	var wrote []string
	ps := p.answerPermissions("allow_once", diskBuffers(&mu, &wrote, func(disk string) string {
		if opened {
			return strings.TrimSuffix(disk, "\n")
		}
		return disk
	}))
	p.afterPermission(func() {
		mu.Lock()
		opened = true
		mu.Unlock()
	})
	if out := p.editTwo("three"); !strings.HasPrefix(out, "Edited") {
		t.Errorf("the edit's result %q", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(wrote, []string{"one\nthree\n"}) || len(ps.list()) != 1 {
		t.Errorf("fs/write_text_file calls %q after %d permission requests", wrote, len(ps.list()))
	}
}

// TestMissingFileNotAskedOfClient: a client that answers "" for a file it
// does not have (rather than an error) is never asked for a file that is
// not on disk: reading it says there is no such file (it once read as
// empty), and writing it creates it on disk, previewed as a creation.
func TestMissingFileNotAskedOfClient(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	var mu sync.Mutex
	var asked []string
	ps := p.answerPermissions("allow_once", func(m message) (any, *rpcError) {
		var req struct{ Path string }
		_ = json.Unmarshal(m.Params, &req)
		mu.Lock()
		asked = append(asked, m.Method+" "+filepath.Base(req.Path))
		mu.Unlock()
		if m.Method == "fs/read_text_file" {
			return map[string]any{"content": ""}, nil
		}
		return map[string]any{}, nil
	})
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "read", `{"path":"missing.txt"}`)),
		providertest.Reply(providertest.FunctionCall("call_2", "write", `{"path":"new.txt","content":"hello\n"}`)),
		providertest.Text("ok"))
	p.initialize(true)
	id := p.newSession()
	if stop := p.prompt(id, "go"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	reqs := p.prov.Requests()
	if out := callOutput(t, reqs[1].Body, "call_1"); !strings.Contains(strings.ToLower(out), "no such file") && !strings.Contains(strings.ToLower(out), "does not exist") && !strings.Contains(strings.ToLower(out), "not found") {
		t.Errorf("reading a missing file gave the model %q", out)
	}
	if s := readFile(t, filepath.Join(p.ws, "new.txt")); s != "hello\n" {
		t.Errorf("new.txt = %q", s)
	}
	if a := ps.list(); len(a) != 1 || !strings.Contains(permissionText(a[0].content), "create new.txt") {
		t.Errorf("the write was asked for as %+v, want a creation", a)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 0 {
		t.Errorf("the client was asked %q", asked)
	}
}

// TestBufferChangedAfterPreviewRefused: the final-newline allowance is
// no looser than that: a buffer that really changed between the preview
// and the write refuses the approved edit, and nothing is written.
func TestBufferChangedAfterPreviewRefused(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	path := filepath.Join(p.ws, "a.txt")
	writeFile(t, path, "one\ntwo\n")
	var mu sync.Mutex
	buffer := "one\ntwo\n"
	var wrote []string
	p.answerPermissions("allow_once", func(m message) (any, *rpcError) {
		mu.Lock()
		defer mu.Unlock()
		switch m.Method {
		case "fs/read_text_file":
			return map[string]any{"content": buffer}, nil
		case "fs/write_text_file":
			wrote = append(wrote, m.Method)
			return map[string]any{}, nil
		}
		return nil, &rpcError{Code: codeMethodNotFound, Message: m.Method}
	})
	p.afterPermission(func() {
		mu.Lock()
		buffer = "one\ntwo\nthree" // the person typed meanwhile
		mu.Unlock()
	})
	if out := p.editTwo("2"); !strings.Contains(out, "changed") {
		t.Errorf("the edit's result %q, want a refusal", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(wrote) != 0 {
		t.Errorf("written: %v", wrote)
	}
}

// TestAnswerWithoutOptionID: avante answers a permission request with
// outcome "selected" and no optionId after "Always allow". The call is
// not run, and the client is told why in the call's update (it once said
// only "approval_denied"); the model sees a denial.
func TestAnswerWithoutOptionID(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.onRequest = func(m message) (any, *rpcError) {
		return map[string]any{"outcome": map[string]any{"outcome": "selected"}}, nil
	}
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "bash", `{"command":"touch made"}`)), providertest.Text("ok"))
	p.initialize(false)
	id := p.newSession()
	if stop := p.prompt(id, "go"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	if _, err := os.Stat(filepath.Join(p.ws, "made")); err == nil {
		t.Fatal("the call ran")
	}
	c := p.shownCalls()["call_1"]
	if c == nil || len(c.contents) == 0 || !strings.Contains(c.contents[len(c.contents)-1], "no optionId") {
		t.Errorf("the client was shown %+v, want why the call was not run", c)
	}
	if out := callOutput(t, p.prov.Requests()[1].Body, "call_1"); !strings.Contains(out, "not approved") && !strings.Contains(out, "denied") {
		t.Errorf("the model saw %q", out)
	}
}

// TestBashAllowAlways: a bash call octet can scope exactly (the command,
// its directory and environment) is offered allow_always; the rule then
// admits exactly that command without asking, another command is asked.
// Under controlled_bash_approval every command is asked once, and the
// always options are not offered.
func TestBashAllowAlways(t *testing.T) {
	bash := func(id, cmd string) providertest.Turn {
		return providertest.Reply(providertest.FunctionCall(id, "bash", `{"command":"`+cmd+`"}`))
	}
	for _, tc := range []struct {
		policy  tools.Policy
		asked   []string
		options []string
	}{
		{tools.Controlled, []string{"call_1", "call_3"}, []string{"allow_once", "allow_always", "reject_once", "reject_always"}},
		{tools.ControlledBashApproval, []string{"call_1", "call_2", "call_3"}, []string{"allow_once", "reject_once"}},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			p := newPeer(t, stackOpts{policy: tc.policy})
			var mu sync.Mutex
			var asked []string
			var options [][]string
			p.onRequest = func(m message) (any, *rpcError) {
				var req struct {
					ToolCall struct{ ToolCallID string }
					Options  []struct{ OptionID, Kind string }
				}
				_ = json.Unmarshal(m.Params, &req)
				var kinds []string
				choice := "allow_once"
				for _, o := range req.Options {
					kinds = append(kinds, o.Kind)
					if o.Kind == "allow_always" {
						choice = o.OptionID
					}
				}
				mu.Lock()
				asked, options = append(asked, req.ToolCall.ToolCallID), append(options, kinds)
				mu.Unlock()
				return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": choice}}, nil
			}
			p.prov.Enqueue(bash("call_1", "touch one"), bash("call_2", "touch one"), bash("call_3", "touch two"), providertest.Text("done"))
			p.initialize(false)
			id := p.newSession()
			if stop := p.prompt(id, "go"); stop != stopEndTurn {
				t.Fatalf("stop %q", stop)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(asked, tc.asked) || !slices.Equal(options[0], tc.options) {
				t.Errorf("asked for %v with options %v; want %v with %v", asked, options, tc.asked, tc.options)
			}
		})
	}
}

// TestUpdatesFollowSessionAnswer: Zed learns a new session's id from
// session/new's answer (and registers a resumed one once session/resume
// answers) and drops, as "unknown session", any session/update that
// arrives before: the slash commands' available_commands_update must
// follow those answers, or the commands never appear.
func TestUpdatesFollowSessionAnswer(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.initialize(false)
	from := p.noteCount()
	p.raw(rawRequest("new", "session/new", map[string]any{"cwd": p.ws, "mcpServers": []any{}}))
	var res struct{ SessionID string }
	if got := p.awaitStray(1); got[0].Error != nil || json.Unmarshal(got[0].Result, &res) != nil {
		t.Fatalf("session/new answered %+v", got[0])
	}
	p.awaitOrder(`"new"`, from)
	from = p.noteCount()
	p.raw(rawRequest("resume", "session/resume", map[string]any{"sessionId": res.SessionID, "cwd": p.ws, "mcpServers": []any{}}))
	p.awaitStray(2)
	p.awaitOrder(`"resume"`, from)
}

// noteCount is how many notifications and answers to raw lines the
// peer has received.
func (p *peer) noteCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.notes)
}

// awaitOrder waits for the available_commands_update that follows the
// answer to raw request id and fails when one came before that answer,
// after the first from messages received.
func (p *peer) awaitOrder(id string, from int) {
	p.t.Helper()
	isCommands := func(m message) bool {
		var n struct {
			Update struct{ SessionUpdate string }
		}
		return m.Method == "session/update" && json.Unmarshal(m.Params, &n) == nil && n.Update.SessionUpdate == "available_commands_update"
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		notes := slices.Clone(p.notes[from:])
		p.mu.Unlock()
		at := slices.IndexFunc(notes, func(m message) bool { return m.Method == "" && string(m.ID) == id })
		if at < 0 {
			continue
		}
		if slices.ContainsFunc(notes[:at], isCommands) {
			p.t.Fatalf("available_commands_update sent before the answer to %s, which the client drops", id)
		}
		if slices.ContainsFunc(notes[at:], isCommands) {
			return
		}
	}
	p.t.Fatalf("no available_commands_update after the answer to %s", id)
}

// TestCancelRightBehindPrompt: a session/cancel the client sends right
// behind its session/prompt (in one write: a person pressing Escape as
// the prompt goes) cancels that prompt, though the prompt's run may not
// have started when the cancel is read. It was lost, and the prompt ran
// on (here: for ever, the model's stream stalls).
func TestCancelRightBehindPrompt(t *testing.T) {
	for i := range 5 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p := newPeer(t, stackOpts{policy: tools.Controlled})
			p.prov.Enqueue(providertest.Text("Once upon a time, and then ").StallAfter(1))
			p.initialize(false)
			id := p.newSession()
			cancel, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": id}})
			p.raw(rawRequest("p", "session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]any{"type": "text", "text": "tell a story"}}}) + "\n" + string(cancel))
			got := p.awaitStray(1)[0]
			var res struct{ StopReason string }
			if got.Error != nil || json.Unmarshal(got.Result, &res) != nil || res.StopReason != stopCancelled {
				t.Fatalf("prompt answered %s %+v, want stopReason cancelled", got.Result, got.Error)
			}
		})
	}
}

// TestCRLFFileThroughClientBuffer: a Neovim client (avante, agentic)
// reads a CRLF file's buffer as its lines joined with "\n" and writes
// fs/write_text_file's content to the disk as it is. An edit of such a
// file keeps its CRLF line endings (it once turned every line of the
// file to LF, the whole file changed for one edit).
func TestCRLFFileThroughClientBuffer(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	path := filepath.Join(p.ws, "a.txt")
	writeFile(t, path, "one\r\ntwo\r\nthree\r\n")
	var mu sync.Mutex
	var wrote []string
	p.answerPermissions("allow_once", diskBuffers(&mu, &wrote, func(disk string) string {
		lines := strings.Split(strings.TrimSuffix(disk, "\r\n"), "\r\n")
		return strings.Join(lines, "\n")
	}))
	if out := p.editTwo("2"); !strings.HasPrefix(out, "Edited") {
		t.Errorf("the edit's result %q", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if b, _ := os.ReadFile(path); string(b) != "one\r\n2\r\nthree\r\n" {
		t.Errorf("the file is %q after fs/write_text_file calls %q, want its CRLF line endings kept", b, wrote)
	}
}

// TestCancelBehindPromptToReleasedSession: a prompt naming a session the
// connection released (MaxSessions) opens it again before its run
// starts; a session/cancel sent right behind the prompt arrives while it
// is being opened — not open yet — and still cancels the prompt (it
// once answered "not open" and was dropped, and the prompt ran on).
func TestCancelBehindPromptToReleasedSession(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled, maxSessions: 1})
	p.initialize(false)
	a := p.newSession()
	p.newSession() // releases a
	if !p.released(a) {
		t.Fatalf("two sessions open with MaxSessions 1: %s was not released\n%s", a, p.logs.String())
	}
	p.prov.Enqueue(providertest.Text("Once upon a time, and then ").StallAfter(1))
	cancel, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": a}})
	p.raw(rawRequest("p", "session/prompt", map[string]any{"sessionId": a, "prompt": []any{map[string]any{"type": "text", "text": "tell a story"}}}) + "\n" + string(cancel))
	got := p.awaitStray(1)[0]
	var res struct{ StopReason string }
	if got.Error != nil || json.Unmarshal(got.Result, &res) != nil || res.StopReason != stopCancelled {
		t.Fatalf("prompt answered %s %+v, want stopReason cancelled", got.Result, got.Error)
	}
}

// diskBuffers is a client's fs handler over the disk, as an editor with
// no open buffers: fs/read_text_file answers the file's text as view
// renders it, fs/write_text_file saves the content (appended to wrote),
// each under mu.
func diskBuffers(mu *sync.Mutex, wrote *[]string, view func(disk string) string) func(message) (any, *rpcError) {
	return func(m message) (any, *rpcError) {
		var req struct{ Path, Content string }
		_ = json.Unmarshal(m.Params, &req)
		mu.Lock()
		defer mu.Unlock()
		switch m.Method {
		case "fs/read_text_file":
			b, err := os.ReadFile(req.Path)
			if err != nil {
				return nil, &rpcError{Code: codeResourceNotFound, Message: err.Error()}
			}
			return map[string]any{"content": view(string(b))}, nil
		case "fs/write_text_file":
			*wrote = append(*wrote, req.Content)
			os.WriteFile(req.Path, []byte(req.Content), 0o600) // as the editor saves
			return map[string]any{}, nil
		}
		return nil, &rpcError{Code: codeMethodNotFound, Message: m.Method}
	}
}

// TestClientStoppedReading: a client that closes its end of octet's
// output but not of its input (it stopped reading, its process lives
// on) is gone: the next write fails, the running prompt is cancelled
// and settled, and Serve returns without waiting for an end of input
// that may never come (it kept streaming the answer for nobody, and
// octet acp kept running).
func TestClientStoppedReading(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.prov.Enqueue(providertest.Text(strings.Repeat("words for nobody ", 400)).Pace(5 * time.Millisecond))
	p.initialize(false)
	id := p.newSession()
	p.raw(rawRequest("p", "session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]any{"type": "text", "text": "talk"}}}))
	deadline := time.Now().Add(10 * time.Second)
	for len(p.notifications("session/update")) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.out.Close()
	p.awaitServe("the client stopped reading")
	if logs := p.logs.String(); !strings.Contains(logs, "the client stopped reading") {
		t.Errorf("the logs do not say why octet stopped:\n%s", logs)
	}
	s, err := session.Inspect(filepath.Join(p.home, "sessions", id+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if cps := s.Checkpoints(); len(cps) != 1 || cps[0].Outcome != "cancelled" {
		t.Errorf("the run's checkpoints %+v, want it cancelled", cps)
	}
}

// TestCancelDuringClientRead: a client that does not answer an
// fs/read_text_file (an editor busy loading the buffer) does not hold a
// cancelled prompt: session/cancel ends the read, and the prompt is
// answered cancelled at once (it waited out the read's 10 s bound).
func TestCancelDuringClientRead(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	writeFile(t, filepath.Join(p.ws, "a.txt"), "one\ntwo\n")
	reading := make(chan struct{}, 1)
	release := make(chan struct{})
	p.answerPermissions("allow_once", func(m message) (any, *rpcError) {
		if m.Method == "fs/read_text_file" {
			select {
			case reading <- struct{}{}:
			default:
			}
			<-release
		}
		return nil, &rpcError{Code: codeMethodNotFound, Message: m.Method}
	})
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"two","new_text":"2"}`)), providertest.Text("ok"))
	p.initialize(true)
	id := p.newSession()
	stop := make(chan string, 1)
	go func() { stop <- p.prompt(id, "edit") }()
	select {
	case <-reading:
	case <-time.After(10 * time.Second):
		t.Fatal("octet never read the file through the client")
	}
	began := time.Now()
	cancel, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": id}})
	p.raw(string(cancel))
	select {
	case s := <-stop:
		if s != stopCancelled {
			t.Errorf("stop reason %q, want cancelled", s)
		}
		if d := time.Since(began); d > 3*time.Second {
			t.Errorf("the cancelled prompt was answered after %v", d)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the cancelled prompt is still waiting for the client's read")
	}
	if b := readFile(t, filepath.Join(p.ws, "a.txt")); b != "one\ntwo\n" {
		t.Errorf("a.txt = %q after a cancelled edit", b)
	}
	close(release)                     // the client answers at last,
	time.Sleep(200 * time.Millisecond) // before the connection closes
}
