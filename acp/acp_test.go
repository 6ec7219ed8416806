package acp

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// TestMalformedInput: lines that are not JSON-RPC get JSON-RPC errors
// (id null when there is none), bad params get InvalidParams, and the
// connection keeps serving a well-formed prompt afterwards.
func TestMalformedInput(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.prov.Enqueue(providertest.Text("still fine"))
	p.raw("this is not json")
	p.raw("[1,2,3]")
	p.raw(`{"id":7,"method":"initialize"}`)
	p.raw(`{"jsonrpc":"2.0","id":99,"result":{}}`) // an answer to nothing
	p.raw(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}`)
	codes := func(m message) int {
		if m.Error == nil {
			return 0
		}
		return m.Error.Code
	}
	for _, bad := range []any{"a string", map[string]any{}, map[string]any{"protocolVersion": "one"}} {
		if c := codes(p.call("initialize", bad)); c != codeInvalidParams {
			t.Errorf("initialize %v: code %d", bad, c)
		}
	}
	p.initialize(false)
	cases := []struct {
		method string
		params any
		code   int
	}{
		{"no/such/method", map[string]any{}, codeMethodNotFound},
		{"session/new", map[string]any{"cwd": "relative/dir", "mcpServers": []any{}}, codeInvalidParams},
		{"session/new", map[string]any{"cwd": filepath.Join(p.ws, "missing"), "mcpServers": []any{}}, codeInvalidParams},
		{"session/new", nil, codeInvalidParams},
		{"session/load", map[string]any{"sessionId": "../etc", "cwd": p.ws, "mcpServers": []any{}}, codeInvalidParams},
		{"session/load", map[string]any{"sessionId": "20990101-000000-000000000000", "cwd": p.ws, "mcpServers": []any{}}, codeResourceNotFound},
		{"session/prompt", map[string]any{"sessionId": "nope", "prompt": []any{}}, codeResourceNotFound},
		{"session/set_mode", map[string]any{"sessionId": "nope", "modeId": "controlled"}, codeResourceNotFound},
	}
	for _, c := range cases {
		if got := codes(p.call(c.method, c.params)); got != c.code {
			t.Errorf("%s %v: code %d, want %d", c.method, c.params, got, c.code)
		}
	}
	id := p.newSession()
	for _, prompt := range []any{"a string", []any{}, []any{map[string]any{"type": "image", "data": "", "mimeType": "image/png"}}, []any{map[string]any{"type": "bogus"}}, []any{map[string]any{"type": "resource"}}} {
		m := p.call("session/prompt", map[string]any{"sessionId": id, "prompt": prompt})
		if codes(m) != codeInvalidParams {
			t.Errorf("prompt %v: %+v", prompt, m.Error)
		}
	}
	if c := codes(p.call("session/set_mode", map[string]any{"sessionId": id, "modeId": "yolo"})); c != codeInvalidParams {
		t.Errorf("set_mode yolo: code %d", c)
	}
	if stop := p.prompt(id, "hi"); stop != "end_turn" {
		t.Errorf("prompt after malformed input: %q", stop)
	}
	var parse, invalid int
	for _, m := range p.stray() {
		switch {
		case m.Error != nil && m.Error.Code == codeParseError && string(m.ID) == "null":
			parse++
		case m.Error != nil && m.Error.Code == codeInvalidRequest && string(m.ID) == "7":
			invalid++
		default:
			t.Errorf("unexpected stray message %+v", m)
		}
	}
	if parse != 2 || invalid != 1 {
		t.Errorf("%d parse errors (want 2), %d invalid requests (want 1)", parse, invalid)
	}
}

// TestStopReasons: a response cut at the output limit is max_tokens, a
// run stopped by its turn limit is max_turn_requests, and a provider
// failure is a JSON-RPC error after which the session goes on.
func TestStopReasons(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled, maxTurns: 1})
	os.WriteFile(filepath.Join(p.ws, "a.txt"), []byte("x\n"), 0o600)
	p.prov.Enqueue(
		providertest.Incomplete("max_output_tokens", providertest.Message("partial")),
		providertest.Reply(providertest.FunctionCall("call_1", "read", `{"path":"a.txt"}`)),
		providertest.Status(400, "invalid_request_error", "bad", "the request was bad"),
		providertest.Text("ok"),
	)
	p.initialize(false)
	id := p.newSession()
	if stop := p.prompt(id, "long"); stop != stopMaxTokens {
		t.Errorf("cut response: %q", stop)
	}
	if stop := p.prompt(id, "loop"); stop != stopMaxTurnRequests {
		t.Errorf("turn limit: %q", stop)
	}
	m := p.call("session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]any{"type": "text", "text": "fail"}}})
	if m.Error == nil || !strings.Contains(m.Error.Message, "bad") {
		t.Errorf("failed run answered %+v", m)
	}
	if stop := p.prompt(id, "again"); stop != stopEndTurn {
		t.Errorf("after a failure: %q", stop)
	}
}

// TestRejectAlways: reject_always denies the call and every later call of
// exactly the same command without asking; another command is asked.
func TestRejectAlways(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	var mu sync.Mutex
	var asked []string
	p.onRequest = func(m message) (any, *rpcError) {
		if m.Method != "session/request_permission" {
			return nil, &rpcError{Code: codeMethodNotFound, Message: m.Method}
		}
		var req struct {
			ToolCall struct{ ToolCallID string }
			Options  []struct{ OptionID, Kind string }
		}
		_ = json.Unmarshal(m.Params, &req)
		mu.Lock()
		asked = append(asked, req.ToolCall.ToolCallID)
		mu.Unlock()
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "reject_always"}}, nil
	}
	bash := func(id, cmd string) providertest.Turn {
		return providertest.Reply(providertest.FunctionCall(id, "bash", `{"command":"`+cmd+`"}`))
	}
	p.prov.Enqueue(bash("call_1", "touch one"), bash("call_2", "touch one"), bash("call_3", "touch two"), providertest.Text("done"))
	p.initialize(false)
	id := p.newSession()
	if stop := p.prompt(id, "go"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	if !slices.Equal(asked, []string{"call_1", "call_3"}) {
		t.Errorf("asked for %v, want call_1 and call_3", asked)
	}
	for _, f := range []string{"one", "two"} {
		if _, err := os.Stat(filepath.Join(p.ws, f)); err == nil {
			t.Errorf("%s was made", f)
		}
	}
	reqs := p.prov.Requests()
	if out := callOutput(t, reqs[2].Body, "call_2"); !strings.Contains(out, "not approved") {
		t.Errorf("call_2's result %q", out)
	}
}

// TestRecoveredOutput: an interrupted attempt's partial text arrives as
// _octet/recoveredOutput and its chunks are named discarded by
// _octet/providerRetry; the chunks of the attempt that stands are the
// answer alone.
func TestRecoveredOutput(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled, recovery: true})
	p.prov.Enqueue(providertest.Text("partial words that never finish because the stream drops").DropAfter(7), providertest.Text("Recovered answer."))
	p.initialize(false)
	id := p.newSession()
	if stop := p.prompt(id, "go"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	rec := p.notifications("_octet/recoveredOutput")
	if len(rec) == 0 || !strings.Contains(string(rec[0]), "partial") {
		t.Fatalf("_octet/recoveredOutput %s", rec)
	}
	discarded := map[string]bool{}
	for _, raw := range p.notifications("_octet/providerRetry") {
		var r struct{ DiscardedMessageID string }
		_ = json.Unmarshal(raw, &r)
		discarded[r.DiscardedMessageID] = true
	}
	var kept strings.Builder
	for _, raw := range p.notifications("session/update") {
		var n struct {
			Update struct {
				SessionUpdate, MessageID string
				Content                  struct{ Text string }
			}
		}
		_ = json.Unmarshal(raw, &n)
		if n.Update.SessionUpdate == "agent_message_chunk" && !discarded[n.Update.MessageID] {
			kept.WriteString(n.Update.Content.Text)
		}
	}
	if kept.String() != "Recovered answer." {
		t.Errorf("answer chunks not discarded: %q (discarded %v)", kept.String(), discarded)
	}
}

// refusalTurn is a Responses stream whose message is a refusal part only.
func refusalTurn() providertest.Turn {
	msg := `{"id":"msg_0","type":"message","role":"assistant","status":"completed","content":[{"type":"refusal","refusal":"I can't help with that."}]}`
	return providertest.Events(
		[]byte(`{"type":"response.created","sequence_number":0,"response":{"id":"resp_r","object":"response","status":"in_progress","output":[]}}`),
		[]byte(`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_0","type":"message","role":"assistant","status":"in_progress","content":[]}}`),
		[]byte(`{"type":"response.content_part.added","sequence_number":2,"output_index":0,"item_id":"msg_0","content_index":0,"part":{"type":"refusal","refusal":""}}`),
		[]byte(`{"type":"response.refusal.delta","sequence_number":3,"output_index":0,"item_id":"msg_0","content_index":0,"delta":"I can't help with that."}`),
		[]byte(`{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":`+msg+`}`),
		[]byte(`{"type":"response.completed","sequence_number":5,"response":{"id":"resp_r","object":"response","status":"completed","output":[`+msg+`],"usage":{"input_tokens":5,"output_tokens":5,"total_tokens":10}}}`),
	)
}

// TestStopReasonRefusal: a response that is a refusal answers refusal.
func TestStopReasonRefusal(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.prov.Enqueue(refusalTurn(), providertest.Text("fine"))
	p.initialize(false)
	id := p.newSession()
	if stop := p.prompt(id, "something bad"); stop != stopRefusal {
		t.Errorf("refused response: %q", stop)
	}
	if stop := p.prompt(id, "something good"); stop != stopEndTurn {
		t.Errorf("next prompt: %q", stop)
	}
}

// TestClientGoneMidPrompt: stdin closing while a prompt streams cancels
// the run and Serve returns (rather than waiting for a stalled stream).
func TestClientGoneMidPrompt(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.prov.Enqueue(providertest.Text("Once upon a time, and then it went on ").StallAfter(6))
	p.initialize(false)
	id := p.newSession()
	go p.call("session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]any{"type": "text", "text": "go"}}})
	for deadline := time.Now().Add(10 * time.Second); len(p.updates("agent_message_chunk")) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no chunk streamed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.w.Close()
	p.awaitServe("the client left mid-prompt")
}

// TestWriteDiff: a write's permission request shows the preview octet's
// digest binds (what it replaces and the diff of the file's whole text
// before and after), its final tool_call_update the change octet recorded
// as a diff block of the whole file (the text before and after), and its
// tool_call no diff of the model's; the approved write lands on disk (no
// fs capability).
func TestWriteDiff(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	path := filepath.Join(p.ws, "w.txt")
	os.WriteFile(path, []byte("before\nkept\n"), 0o600)
	ps := p.answerPermissions("allow_once", nil)
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "write", `{"path":"w.txt","content":"after\nkept\n"}`)), providertest.Text("ok"))
	p.initialize(false)
	id := p.newSession()
	if stop := p.prompt(id, "write"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	const diff = "```diff\n--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n-before\n+after\n kept\n```"
	if a, want := ps.list(), "```text\nreplace w.txt (12 -> 11 bytes)\n```"+diff; len(a) != 1 || permissionText(a[0].content) != want {
		t.Errorf("permission requests %+v, want one with content %q", a, want)
	}
	// Completed: the whole file before and after (a client renders the
	// hunks), and the result.
	wantDiff := diffBlock{Path: path, OldText: "before\nkept\n", NewText: "after\nkept\n"}
	if c, want := p.shownCalls()["call_1"], "```text\nReplaced w.txt (11 bytes).\n```"; c == nil || !slices.Equal(c.contents, []string{want}) || !slices.Equal(c.diffs, []diffBlock{wantDiff}) {
		t.Errorf("tool call shown as %+v, want no content until it completed with the diff %+v and %q", c, wantDiff, want)
	}
	if s, _ := os.ReadFile(path); string(s) != "after\nkept\n" {
		t.Errorf("w.txt = %q", s)
	}
}

// TestClientOwnedWriteTool: with the fs capabilities a write of a file
// the client has is asked for with the diff from the client's text and is
// applied through fs/write_text_file; the disk keeps its text.
func TestClientOwnedWriteTool(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	path := filepath.Join(p.ws, "w.txt")
	os.WriteFile(path, []byte("disk\n"), 0o600)
	var mu sync.Mutex
	buffer := "buffer text\n"
	var wrote []string
	ps := p.answerPermissions("allow_once", func(m message) (any, *rpcError) {
		var req struct{ Path, Content string }
		_ = json.Unmarshal(m.Params, &req)
		mu.Lock()
		defer mu.Unlock()
		switch m.Method {
		case "fs/read_text_file":
			if req.Path != path {
				return nil, &rpcError{Code: codeResourceNotFound, Message: "no such buffer"}
			}
			return map[string]any{"content": buffer}, nil
		case "fs/write_text_file":
			wrote = append(wrote, req.Path+"="+req.Content)
			buffer = req.Content
			return map[string]any{}, nil
		}
		return nil, &rpcError{Code: codeMethodNotFound, Message: m.Method}
	})
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "write", `{"path":"w.txt","content":"new\n"}`)), providertest.Text("ok"))
	p.initialize(true)
	id := p.newSession()
	if stop := p.prompt(id, "write"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(wrote, []string{path + "=new\n"}) {
		t.Errorf("fs/write_text_file calls %q", wrote)
	}
	if s, _ := os.ReadFile(path); string(s) != "disk\n" {
		t.Errorf("disk %q: the write went behind the editor", s)
	}
	if a := ps.list(); len(a) != 1 || !strings.Contains(permissionText(a[0].content), "-buffer text\n+new\n") {
		t.Errorf("permission requests %+v: want one with the diff from the client's text", a)
	}
}

// TestClientOwnedReadRefusesLinks: a hostile repository's link
// (notes.txt -> a file outside the workspace) is refused by read as on
// disk; octet never asks the client for it, which would follow it and
// hand the model the target's text.
func TestClientOwnedReadRefusesLinks(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.UnsafeHost})
	secret := filepath.Join(t.TempDir(), "id_rsa")
	os.WriteFile(secret, []byte("PRIVATE KEY\n"), 0o600)
	if err := os.Symlink(secret, filepath.Join(p.ws, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	p.onRequest = func(m message) (any, *rpcError) {
		var req struct{ Path string }
		_ = json.Unmarshal(m.Params, &req)
		if m.Method != "fs/read_text_file" {
			return nil, &rpcError{Code: codeMethodNotFound, Message: m.Method}
		}
		mu.Lock()
		asked = append(asked, req.Path)
		mu.Unlock()
		b, err := os.ReadFile(req.Path) // as an editor does: following links
		if err != nil {
			return nil, &rpcError{Code: codeResourceNotFound, Message: err.Error()}
		}
		return map[string]any{"content": string(b)}, nil
	}
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "read", `{"path":"notes.txt"}`)), providertest.Text("ok"))
	p.initialize(true)
	id := p.newSession()
	if stop := p.prompt(id, "read notes"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	reqs := p.prov.Requests()
	if out := callOutput(t, reqs[1].Body, "call_1"); strings.Contains(out, "PRIVATE KEY") || !strings.Contains(out, "symbolic link") {
		t.Errorf("read of the link gave %q", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 0 {
		t.Errorf("the client was asked for %q", asked)
	}
}

// TestClientOwnedSearchRefusesLinks: search with a path naming a link
// does not ask the client for it either.
func TestClientOwnedSearchRefusesLinks(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.UnsafeHost})
	secret := filepath.Join(t.TempDir(), "id_rsa")
	os.WriteFile(secret, []byte("PRIVATE KEY\n"), 0o600)
	if err := os.Symlink(secret, filepath.Join(p.ws, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	p.onRequest = func(m message) (any, *rpcError) {
		if m.Method != "fs/read_text_file" {
			return nil, &rpcError{Code: codeMethodNotFound, Message: m.Method}
		}
		var req struct{ Path string }
		_ = json.Unmarshal(m.Params, &req)
		b, err := os.ReadFile(req.Path)
		if err != nil {
			return nil, &rpcError{Code: codeResourceNotFound, Message: err.Error()}
		}
		return map[string]any{"content": string(b)}, nil
	}
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "search", `{"pattern":"PRIVATE","path":"notes.txt"}`)), providertest.Text("ok"))
	p.initialize(true)
	id := p.newSession()
	if stop := p.prompt(id, "search"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	if out := callOutput(t, p.prov.Requests()[1].Body, "call_1"); strings.Contains(out, "PRIVATE KEY") {
		t.Errorf("search of the link gave %q", out)
	}
}

// TestClientOwnedWriteSkipsHardLinks: a file with another name (a hard
// link) is written by the disk path, which replaces this name only, not
// by the client, which would write through to the other name.
func TestClientOwnedWriteSkipsHardLinks(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.UnsafeHost})
	other := filepath.Join(t.TempDir(), "bashrc")
	os.WriteFile(other, []byte("original\n"), 0o600)
	path := filepath.Join(p.ws, "w.txt")
	if err := os.Link(other, path); err != nil {
		t.Skip("hard links across these directories:", err)
	}
	var mu sync.Mutex
	var wrote []string
	p.onRequest = func(m message) (any, *rpcError) {
		var req struct{ Path, Content string }
		_ = json.Unmarshal(m.Params, &req)
		switch m.Method {
		case "fs/read_text_file":
			b, _ := os.ReadFile(req.Path)
			return map[string]any{"content": string(b)}, nil
		case "fs/write_text_file":
			mu.Lock()
			wrote = append(wrote, req.Path)
			mu.Unlock()
			os.WriteFile(req.Path, []byte(req.Content), 0o600) // through the path, as an editor does
			return map[string]any{}, nil
		}
		return nil, &rpcError{Code: codeMethodNotFound, Message: m.Method}
	}
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "write", `{"path":"w.txt","content":"new\n"}`)), providertest.Text("ok"))
	p.initialize(true)
	id := p.newSession()
	if stop := p.prompt(id, "write"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(wrote) != 0 {
		t.Errorf("written through the client: %q", wrote)
	}
	if b, _ := os.ReadFile(other); string(b) != "original\n" {
		t.Errorf("the other name of the file now holds %q", b)
	}
}

// TestPlanUpdate: an update_plan call reaches the client as a plan
// session update holding the whole plan.
func TestPlanUpdate(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.prov.Enqueue(
		providertest.Reply(providertest.FunctionCall("p1", "update_plan", `{"plan":[{"step":"Read","status":"completed"},{"step":"Fix","status":"in_progress"},{"step":"Test","status":"pending"}]}`)),
		providertest.Text("done"),
	)
	p.initialize(false)
	id := p.newSession()
	if stop := p.prompt(id, "go"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	var plans []string
	for _, raw := range p.notifications("session/update") {
		var n struct {
			Update struct {
				SessionUpdate string
				Entries       []struct{ Content, Priority, Status string }
			}
		}
		_ = json.Unmarshal(raw, &n)
		if n.Update.SessionUpdate != "plan" {
			continue
		}
		var steps []string
		for _, e := range n.Update.Entries {
			steps = append(steps, e.Status+":"+e.Content+":"+e.Priority)
		}
		plans = append(plans, strings.Join(steps, ","))
	}
	if len(plans) != 1 || plans[0] != "completed:Read:medium,in_progress:Fix:medium,pending:Test:medium" {
		t.Errorf("plan updates %q", plans)
	}
	// session/load replays the session, its plan last.
	p.ok("session/load", map[string]any{"sessionId": id, "cwd": p.ws, "mcpServers": []any{}}, nil)
	if got := p.updates("plan"); len(got) != 2 || fmt.Sprint(got[1]["entries"]) != fmt.Sprint(got[0]["entries"]) {
		t.Errorf("plan updates after session/load: %v", got)
	}
}

// TestOverlongRequestAnswered: a request line over the message bound is
// refused with an error that carries its id (the client is waiting for
// that answer), whether the id comes before the long params, as the SDKs
// and Zed write it, or after them, as Neovim's encoder may order a Lua
// table's keys (codecompanion, avante); the connection goes on.
func TestOverlongRequestAnswered(t *testing.T) {
	defer func(n int) { maxMessage = n }(maxMessage)
	maxMessage = 4 << 10
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	p.initialize(false)
	id := p.newSession()
	params := `{"sessionId":"` + id + `","prompt":[{"type":"text","text":"` + strings.Repeat("x", 100<<10) + `","id":"inner"}]}`
	for i, tc := range []struct{ line, id string }{
		{`{"jsonrpc":"2.0","id":"long","method":"session/prompt","params":` + params + `}`, `"long"`},
		{`{"params":` + params + `,"method":"session/prompt","jsonrpc":"2.0","id":17}`, `17`},
	} {
		p.raw(tc.line)
		got := p.awaitStray(i + 1)[i]
		if string(got.ID) != tc.id || got.Error == nil || got.Error.Code != codeInvalidRequest {
			t.Fatalf("answer %s %+v, want -32600 for id %s", got.ID, got.Error, tc.id)
		}
		p.ok("session/list", map[string]any{}, nil)
	}
}
