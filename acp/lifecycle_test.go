package acp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

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
