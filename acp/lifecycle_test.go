package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// TestListPages: session/list answers pages newest first; each cursor
// names the last session of its page, so a session made between two
// pages shifts nothing; every session is listed once; a cursor octet did
// not make is refused.
func TestListPages(t *testing.T) {
	defer func(n int) { listPage = n }(listPage)
	listPage = 2
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.initialize(false)
	var made []string
	for range 5 {
		made = append(made, p.newSession())
	}
	type page struct {
		Sessions   []struct{ SessionID string }
		NextCursor string
	}
	var seen []string
	var pg page
	p.ok("session/list", map[string]any{}, &pg)
	for n := 0; ; n++ {
		if len(pg.Sessions) > listPage {
			t.Fatalf("page of %d", len(pg.Sessions))
		}
		for _, s := range pg.Sessions {
			seen = append(seen, s.SessionID)
		}
		if n == 0 {
			p.newSession() // newer than every page: before the cursor
		}
		if pg.NextCursor == "" {
			break
		}
		cursor := pg.NextCursor
		pg = page{}
		p.ok("session/list", map[string]any{"cursor": cursor}, &pg)
	}
	slices.Reverse(made)
	if !slices.Equal(seen, made) {
		t.Errorf("pages listed %v, want %v", seen, made)
	}
	if m := p.call("session/list", map[string]any{"cursor": "bogus"}); m.Error == nil || m.Error.Code != codeInvalidParams {
		t.Errorf("a made-up cursor: %+v", m.Error)
	}
}

// TestRewindKeepsLaterChanges: /rewind of a prompt whose edit was changed
// again by the person afterwards changes nothing (the conflict is listed)
// and the conversation keeps the prompt.
func TestRewindKeepsLaterChanges(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.UnsafeHost})
	path := filepath.Join(p.ws, "a.txt")
	writeFile(t, path, "one\n")
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"one","new_text":"two"}`)),
		providertest.Text("edited"), providertest.Text("next"))
	p.initialize(false)
	id := p.newSession()
	if stop := p.prompt(id, "EDIT PROMPT"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	writeFile(t, path, "two, and mine\n")
	if stop := p.prompt(id, "/rewind"); stop != stopEndTurn {
		t.Fatalf("/rewind: %q", stop)
	}
	said := p.updates("agent_message_chunk")
	if last := said[len(said)-1]["content"].(map[string]any)["text"].(string); !strings.Contains(last, "Nothing was rewound") || !strings.Contains(last, "`a.txt`") {
		t.Errorf("/rewind said %q", last)
	}
	if s := readFile(t, path); s != "two, and mine\n" {
		t.Errorf("a.txt = %q: the person's change was lost", s)
	}
	p.prompt(id, "go on")
	if reqs := p.prov.Requests(); !strings.Contains(string(reqs[len(reqs)-1].Raw), "EDIT PROMPT") {
		t.Error("the conversation lost the prompt /rewind refused to undo")
	}
}

// TestAuthRequired: while the runtime has no key, session/new is
// auth_required (-32000) and names octet login; authenticate with the
// terminal method is refused (the client runs it), with the other one it
// reads the credentials again, and session/new then works.
func TestAuthRequired(t *testing.T) {
	var keyed, reads atomic.Bool
	p := newPeer(t, stackOpts{policy: tools.Controlled, runtime: func(rt *host.Runtime) {
		newAgent := rt.NewAgent
		rt.NewAgent = func(ctx context.Context, spec host.AgentSpec) (*host.Built, error) {
			if !keyed.Load() {
				return nil, fmt.Errorf("%w: no OpenAI API key: run octet login", host.ErrAuthRequired)
			}
			return newAgent(ctx, spec)
		}
		rt.Authenticate = func(context.Context) error {
			reads.Store(true)
			if !keyed.Load() {
				return fmt.Errorf("%w: still no key", host.ErrAuthRequired)
			}
			return nil
		}
	}})
	p.initializeWith(map[string]any{"auth": map[string]any{"terminal": true}})
	m := p.call("session/new", map[string]any{"cwd": p.ws, "mcpServers": []any{}})
	if m.Error == nil || m.Error.Code != codeAuthRequired || !strings.Contains(m.Error.Message, "octet login") {
		t.Fatalf("session/new without a key: %+v", m.Error)
	}
	if files, _ := os.ReadDir(filepath.Join(p.home, "sessions")); len(files) != 0 {
		t.Errorf("a refused session/new left %d files", len(files))
	}
	if m := p.call("authenticate", map[string]any{"methodId": authLogin}); m.Error == nil || m.Error.Code != codeInvalidParams {
		t.Errorf("authenticate with the terminal method: %+v", m.Error)
	}
	if m := p.call("authenticate", map[string]any{"methodId": authCredentials}); m.Error == nil || m.Error.Code != codeAuthRequired || !reads.Load() {
		t.Errorf("authenticate with no key yet: %+v", m.Error)
	}
	keyed.Store(true)
	p.ok("authenticate", map[string]any{"methodId": authCredentials}, nil)
	p.newSession()
}

// TestOpenSessionBound: a connection holds at most MaxSessions sessions
// open, as octet lsp does (host.Registry): one more releases the least
// recently used idle one, which the next prompt naming it opens again
// with its conversation; while every open session has a prompt running,
// session/new is refused (-32600) and leaves no session file.
func TestOpenSessionBound(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled, maxSessions: 2})
	p.prov.Enqueue(providertest.Text("one"), providertest.Text("two"))
	p.initialize(false)
	a := p.newSession()
	if stop := p.prompt(a, "remember the word kumquat"); stop != stopEndTurn {
		t.Fatalf("first prompt: %q", stop)
	}
	b := p.newSession()
	c := p.newSession() // releases a, the least recently used
	if !p.released(a) {
		t.Fatalf("three sessions open with MaxSessions 2: %s was not released\n%s", a, p.logs.String())
	}
	if stop := p.prompt(a, "which word?"); stop != stopEndTurn {
		t.Fatalf("prompt to the released session: %q", stop)
	}
	reqs := p.prov.Requests()
	if last := string(reqs[len(reqs)-1].Raw); !strings.Contains(last, "kumquat") {
		t.Errorf("the reopened session lost its conversation: %s", last)
	}
	if !p.released(b) {
		t.Errorf("reopening %s did not release %s, the least recently used", a, b)
	}

	p.prov.Enqueue(providertest.Text("slow and steady ").StallAfter(6), providertest.Text("slow and steady ").StallAfter(6))
	before := len(p.notifications("session/update"))
	for _, id := range []string{a, c} {
		go p.call("session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]any{"type": "text", "text": "go"}}})
	}
	// Both prompts are running once each session streamed a chunk.
	streaming := func() bool {
		seen := map[string]bool{}
		for _, raw := range p.notifications("session/update")[before:] {
			var n struct {
				SessionID string
				Update    map[string]any
			}
			if json.Unmarshal(raw, &n) == nil && n.Update["sessionUpdate"] == "agent_message_chunk" {
				seen[n.SessionID] = true
			}
		}
		return seen[a] && seen[c]
	}
	for deadline := time.Now().Add(10 * time.Second); !streaming(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the two prompts did not start")
		}
	}
	files, _ := filepath.Glob(filepath.Join(p.home, "sessions", "*.jsonl"))
	m := p.call("session/new", map[string]any{"cwd": p.ws, "mcpServers": []any{}})
	if m.Error == nil || m.Error.Code != codeInvalidRequest {
		t.Fatalf("session/new with every open session busy: %+v", m)
	}
	if after, _ := filepath.Glob(filepath.Join(p.home, "sessions", "*.jsonl")); len(after) != len(files) {
		t.Errorf("the refused session/new left a file: %d session files, %d before", len(after), len(files))
	}
	for _, id := range []string{a, c} {
		p.send(message{Method: "session/cancel", Params: json.RawMessage(fmt.Sprintf(`{"sessionId":%q}`, id))})
	}
}

// released reports whether the server logged releasing session id for
// the open-session bound.
func (p *peer) released(id string) bool {
	return strings.Contains(p.logs.String(), fmt.Sprintf(`msg="session closed" session=%s why="released for another session (open-session bound)"`, id))
}

// TestRewindForce: /rewind refused for a file the person changed since
// says how to rewind anyway, in this client — `/rewind force`, not a
// "force this path" it has no way to give — and `/rewind force` restores
// the file and takes the conversation back. An argument it does not know
// changes nothing and says what it takes.
func TestRewindForce(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.UnsafeHost})
	path := filepath.Join(p.ws, "a.txt")
	writeFile(t, path, "one\n")
	p.prov.Enqueue(providertest.Text("first"), providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"one","new_text":"two"}`)),
		providertest.Text("edited"), providertest.Text("next"))
	p.initialize(false)
	id := p.newSession()
	p.prompt(id, "FIRST PROMPT")
	p.prompt(id, "EDIT PROMPT")
	writeFile(t, path, "two, and mine\n")
	lastSaid := func() string {
		said := p.updates("agent_message_chunk")
		return said[len(said)-1]["content"].(map[string]any)["text"].(string)
	}
	p.prompt(id, "/rewind")
	if last := lastSaid(); !strings.Contains(last, "Nothing was rewound") || !strings.Contains(last, "`/rewind force`") {
		t.Errorf("/rewind said %q", last)
	}
	p.prompt(id, "/rewind now")
	if last := lastSaid(); !strings.Contains(last, "Nothing was rewound") || !strings.Contains(last, "`force`") {
		t.Errorf("/rewind now said %q", last)
	}
	if s := readFile(t, path); s != "two, and mine\n" {
		t.Fatalf("a.txt = %q before /rewind force", s)
	}
	p.prompt(id, "/rewind force")
	if last := lastSaid(); !strings.Contains(last, "Rewound the last prompt") {
		t.Errorf("/rewind force said %q", last)
	}
	if s := readFile(t, path); s != "one\n" {
		t.Errorf("a.txt = %q after /rewind force, want it restored", s)
	}
	p.prompt(id, "go on")
	if reqs := p.prov.Requests(); strings.Contains(string(reqs[len(reqs)-1].Raw), "EDIT PROMPT") {
		t.Error("the conversation still holds the prompt /rewind force undid")
	}
}

// TestRewindUnforceable: a file octet wrote that is a symbolic link now
// cannot be rewound even forced: /rewind says to do what its conflict
// says, and that `/rewind force` would leave it (not overwrite it).
func TestRewindUnforceable(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.UnsafeHost})
	p.prov.Enqueue(providertest.Text("first"),
		providertest.Reply(providertest.FunctionCall("call_1", "write", `{"path":"made.txt","content":"made\n"}`)),
		providertest.Text("written"))
	p.initialize(false)
	id := p.newSession()
	p.prompt(id, "FIRST PROMPT")
	p.prompt(id, "WRITE PROMPT")
	made := filepath.Join(p.ws, "made.txt")
	if err := os.Remove(made); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("elsewhere", made); err != nil {
		t.Fatal(err)
	}
	p.prompt(id, "/rewind")
	said := p.updates("agent_message_chunk")
	last := said[len(said)-1]["content"].(map[string]any)["text"].(string)
	if !strings.Contains(last, "symbolic link now") || !strings.Contains(last, "leave these as they are") || strings.Contains(last, "overwriting") {
		t.Errorf("/rewind said %q", last)
	}
}
