//go:build unix

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

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/provider/providertest"
)

// acpPeer drives a real `octet acp` message by message.
type acpPeer struct {
	t      *testing.T
	in     *json.Encoder
	out    *bufio.Scanner
	stderr *strings.Builder
	id     int
}

// acpMsg is one message octet acp wrote.
type acpMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func startACP(t *testing.T, srv *providertest.Server, home string, limit time.Duration) *acpPeer {
	t.Helper()
	cmd := exec.Command(octetBin, "acp")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	p := &acpPeer{t: t, stderr: new(strings.Builder)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(limit, func() { cmd.Process.Kill() })
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("octet acp exit: %v\nstderr: %s", err, p.stderr)
		}
		timer.Stop()
	})
	p.in = json.NewEncoder(stdin)
	p.out = bufio.NewScanner(stdout)
	p.out.Buffer(nil, 16<<20)
	return p
}

// send writes one message; a request gets the next id, which it returns.
func (p *acpPeer) send(method string, params any) int {
	p.id++
	if err := p.in.Encode(map[string]any{"jsonrpc": "2.0", "id": p.id, "method": method, "params": params}); err != nil {
		p.t.Fatal(err)
	}
	return p.id
}

func (p *acpPeer) notify(method string, params any) {
	if err := p.in.Encode(map[string]any{"jsonrpc": "2.0", "method": method, "params": params}); err != nil {
		p.t.Fatal(err)
	}
}

func (p *acpPeer) answer(id json.RawMessage, result any) {
	if err := p.in.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": result}); err != nil {
		p.t.Fatal(err)
	}
}

func (p *acpPeer) read() acpMsg {
	p.t.Helper()
	if !p.out.Scan() {
		p.t.Fatalf("octet acp ended: %v\nstderr: %s", p.out.Err(), p.stderr)
	}
	var m acpMsg
	if err := json.Unmarshal(p.out.Bytes(), &m); err != nil {
		p.t.Fatalf("octet acp wrote %q: %v", p.out.Text(), err)
	}
	return m
}

// call sends a request and reads until its answer.
func (p *acpPeer) call(method string, params any) json.RawMessage {
	p.t.Helper()
	id := p.send(method, params)
	for {
		m := p.read()
		if m.Method == "" && string(m.ID) == jsonInt(id) {
			if m.Error != nil {
				p.t.Fatalf("%s: %s\nstderr: %s", method, m.Error, p.stderr)
			}
			return m.Result
		}
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// acpUpdate is the update of a session/update.
type acpUpdate struct {
	SessionUpdate string            `json:"sessionUpdate"`
	ToolCallID    string            `json:"toolCallId"`
	Title         string            `json:"title"`
	Kind          string            `json:"kind"`
	Status        string            `json:"status"`
	Content       []json.RawMessage `json:"content"`
	Meta          struct {
		Octet struct {
			AgentPath      string `json:"agentPath"`
			ChildSessionID string `json:"childSessionId"`
		} `json:"octet"`
	} `json:"_meta"`
}

// childCard is what a client shows of one delegated child (or of a
// child's call that asked for permission).
type childCard struct {
	title, kind, path string
	statuses          []string
	content           string
}

// follow records a tool_call or tool_call_update of the cards.
func follow(cards map[string]*childCard, u acpUpdate) {
	if !strings.HasPrefix(u.ToolCallID, "octet-agent-") {
		return
	}
	c := cards[u.ToolCallID]
	if u.SessionUpdate == "tool_call" {
		c = &childCard{title: u.Title, kind: u.Kind, path: u.Meta.Octet.AgentPath}
		cards[u.ToolCallID] = c
	}
	if c == nil {
		return
	}
	if u.Status != "" {
		c.statuses = append(c.statuses, u.Status)
	}
	for _, raw := range u.Content {
		var b struct{ Content struct{ Text string } }
		json.Unmarshal(raw, &b)
		c.content = b.Content.Text
	}
}

// acpDelegate opens a session on p and sends the root prompt; caps are
// the client's capabilities.
func acpDelegate(p *acpPeer, ws string, caps map[string]any) (sid string, promptID int) {
	p.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": caps})
	var s struct{ SessionID string }
	json.Unmarshal(p.call("session/new", map[string]any{"cwd": ws, "mcpServers": []any{}}), &s)
	return s.SessionID, p.send("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{map[string]string{"type": "text", "text": "ROOT-PROMPT do both"}}})
}

// TestACPDelegationFallback drives the real octet acp with a client that
// does not advertise subagents: each child appears on the parent session
// as a "think" tool_call titled with its path and task whose status
// follows the child to completed with its final answer; a child's write
// (confirmed once the session is tightened with session/set_mode) asks
// through session/request_permission on the parent session naming the
// child, shown as a tool call of its own that ends completed when allowed
// and failed, the file unwritten, when rejected.
func TestACPDelegationFallback(t *testing.T) {
	for _, tc := range []struct {
		option, asked, file string
	}{
		{"allow_once", "pending,in_progress,completed", "1\n"},
		{"reject_once", "pending,failed", ""},
	} {
		t.Run(tc.option, func(t *testing.T) { testACPDelegationFallback(t, tc.option, tc.asked, tc.file) })
	}
}

func testACPDelegationFallback(t *testing.T, option, askedStatuses, file string) {
	srv := providertest.New(t)
	ready, release := tightenedGate(t)
	srv.Enqueue(delegationTurns(ready)...)
	home, ws := t.TempDir(), t.TempDir()
	p := startACP(t, srv, home, 90*time.Second)
	sid, promptID := acpDelegate(p, ws, map[string]any{})

	cards := map[string]*childCard{}
	var perms []map[string]any
	var stop string
	tightened := false
	setModeID := 0
	for stop == "" {
		m := p.read()
		switch {
		case tightened && m.Method == "" && string(m.ID) == jsonInt(setModeID):
			release()
		case m.Method == "" && string(m.ID) == jsonInt(promptID):
			if m.Error != nil {
				t.Fatalf("prompt: %s\nstderr: %s", m.Error, p.stderr)
			}
			var r struct{ StopReason string }
			json.Unmarshal(m.Result, &r)
			stop = r.StopReason
		case m.Method == "session/request_permission":
			var rp struct {
				SessionID string         `json:"sessionId"`
				ToolCall  map[string]any `json:"toolCall"`
			}
			json.Unmarshal(m.Params, &rp)
			if rp.SessionID != sid {
				t.Errorf("permission asked on session %s, want the parent %s", rp.SessionID, sid)
			}
			perms = append(perms, rp.ToolCall)
			p.answer(m.ID, map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": option}})
		case m.Method != "" && m.ID != nil:
			t.Fatalf("unexpected request %s", m.Method)
		case m.Method == "session/update":
			var n struct {
				SessionID string    `json:"sessionId"`
				Update    acpUpdate `json:"update"`
			}
			json.Unmarshal(m.Params, &n)
			if n.SessionID != sid {
				t.Fatalf("update on session %s, want the parent %s", n.SessionID, sid)
			}
			follow(cards, n.Update)
			if n.Update.SessionUpdate == "tool_call_update" && n.Update.ToolCallID == "w1" && n.Update.Status == "in_progress" && !tightened {
				// The root's wait was admitted (in_progress follows the
				// broker's decision; the first tool_call comes before it,
				// and a controlled session would deny the wait); from here
				// the session (and every child, sharing its policy)
				// confirms workspace changes.
				tightened = true
				setModeID = p.send("session/set_mode", map[string]any{"sessionId": sid, "modeId": "controlled"})
			}
		}
	}
	if stop != "end_turn" {
		t.Fatalf("stopReason %q\nstderr: %s", stop, p.stderr)
	}
	byPath := map[string]*childCard{}
	var asked *childCard
	for id, c := range cards {
		if strings.Contains(id, "/") {
			asked = c
			continue
		}
		byPath[c.path] = c
	}
	for path, want := range map[string]struct{ task, final string }{
		"root/worker1": {"CHILD-ONE write one.txt", "wrote one"},
		"root/worker2": {"CHILD-TWO say two", "two"},
	} {
		c := byPath[path]
		if c == nil {
			t.Fatalf("no tool call for %s: %v", path, cards)
		}
		if c.kind != "think" || c.title != path+": `"+want.task+"`" || c.content != want.final ||
			strings.Join(c.statuses, ",") != "pending,in_progress,completed" { // idle is completed; its end at the run's end adds nothing
			t.Errorf("%s shown as %+v", path, c)
		}
	}
	if len(perms) != 1 {
		t.Fatalf("%d permission requests: %v", len(perms), perms)
	}
	pc := perms[0]
	meta, _ := pc["_meta"].(map[string]any)["octet"].(map[string]any)
	if !strings.HasPrefix(pc["title"].(string), "root/worker1: ") || meta["agentPath"] != "root/worker1" ||
		!strings.HasPrefix(pc["toolCallId"].(string), "octet-agent-") || !strings.HasSuffix(pc["toolCallId"].(string), "/e1") {
		t.Errorf("permission request toolCall %v", pc)
	}
	if asked == nil || asked.path != "root/worker1" || asked.title != pc["title"] || strings.Join(asked.statuses, ",") != askedStatuses {
		t.Errorf("the child's call that asked is shown as %+v", asked)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "one.txt")); string(got) != file {
		t.Fatalf("one.txt = %q, want %q", got, file)
	}
}

// TestACPCancelCancelsChildren: session/cancel of the parent's prompt
// cancels its children too: the prompt answers cancelled and the stalled
// child's tool call ends failed, "Cancelled", its status cancelled.
func TestACPCancelCancelsChildren(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(
		providertest.Reply(providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE stall"}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":60}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Stall().ForRequestContaining("CHILD-ONE"),
	)
	home, ws := t.TempDir(), t.TempDir()
	p := startACP(t, srv, home, 30*time.Second)
	sid, promptID := acpDelegate(p, ws, map[string]any{})
	cards := map[string]*childCard{}
	var stop string
	var child *childCard
	cancelled := false
	for stop == "" || child == nil || child.statuses[len(child.statuses)-1] != "failed" {
		m := p.read()
		switch {
		case m.Method == "" && string(m.ID) == jsonInt(promptID):
			var r struct{ StopReason string }
			json.Unmarshal(m.Result, &r)
			stop = r.StopReason
			if stop == "" {
				t.Fatalf("prompt answered %s %s", m.Result, m.Error)
			}
		case m.Method != "" && m.ID != nil:
			t.Fatalf("unexpected request %s", m.Method)
		case m.Method == "session/update":
			var n struct{ Update acpUpdate }
			json.Unmarshal(m.Params, &n)
			follow(cards, n.Update)
			for _, c := range cards {
				child = c
			}
			if child != nil && !cancelled && child.statuses[len(child.statuses)-1] == "in_progress" {
				cancelled = true
				p.notify("session/cancel", map[string]any{"sessionId": sid})
			}
		}
	}
	if stop != "cancelled" || len(cards) != 1 || child.content != "Cancelled" || strings.Join(child.statuses, ",") != "pending,in_progress,failed" {
		t.Fatalf("stopReason %q, child %+v\nstderr: %s", stop, child, p.stderr)
	}
	teams, _ := filepath.Glob(filepath.Join(home, "sessions", "teams", "team-*"))
	if len(teams) != 1 {
		t.Fatalf("team directories %v", teams)
	}
	recs, err := team.ReadProvenance(filepath.Join(teams[0], team.JournalName))
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	for _, r := range recs {
		if r.Kind == team.KindAgentStatus && r.Path == "root/worker1" {
			last = r.Status
		}
	}
	if last != string(team.StatusCancelled) {
		t.Fatalf("root/worker1 ended %q in provenance", last)
	}
}

// subagentClient is what a client that advertised subagents sees.
type subagentClient struct {
	t      *testing.T
	parent string
	// kids are the announced children: path → child session id; states
	// their subagent_update states in order, by child session id.
	kids   map[string]string
	states map[string][]string
	// updates are the kinds of session/update each child session got,
	// texts its message chunks.
	updates map[string][]string
	texts   map[string]string
}

func newSubagentClient(t *testing.T, parent string) *subagentClient {
	return &subagentClient{t: t, parent: parent, kids: map[string]string{}, states: map[string][]string{}, updates: map[string][]string{}, texts: map[string]string{}}
}

// update records one session/update, failing on child traffic before its
// announcement and on child tool calls shown on the parent.
func (c *subagentClient) update(params json.RawMessage) {
	var n struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			acpUpdate
			ChildID string `json:"sessionId"`
			Title   string `json:"title"`
			State   *struct {
				State      string `json:"state"`
				StopReason string `json:"stopReason"`
			} `json:"state"`
			Content json.RawMessage `json:"content"`
		} `json:"update"`
	}
	if err := json.Unmarshal(params, &n); err != nil {
		c.t.Fatalf("session/update %s: %v", params, err)
	}
	u := n.Update
	if n.SessionID == c.parent {
		if strings.HasPrefix(u.ToolCallID, "octet-agent-") {
			c.t.Errorf("a child shown as a tool call to a client that understands subagents: %s", params)
		}
		if u.SessionUpdate == "subagent_update" {
			if _, ok := c.states[u.ChildID]; !ok {
				c.kids[u.Title] = u.ChildID
			}
			c.states[u.ChildID] = append(c.states[u.ChildID], u.State.State+":"+u.State.StopReason)
		}
		return
	}
	if _, ok := c.states[n.SessionID]; !ok {
		c.t.Fatalf("update on session %s before its subagent_update: %s", n.SessionID, params)
	}
	c.updates[n.SessionID] = append(c.updates[n.SessionID], u.SessionUpdate+":"+u.ToolCallID+":"+u.Status)
	if u.SessionUpdate == "agent_message_chunk" {
		var b struct{ Text string }
		json.Unmarshal(u.Content, &b)
		c.texts[n.SessionID] += b.Text
	}
}

// TestACPSubagents drives the real octet acp with a client that
// advertises subagents: each child is announced on the parent with
// subagent_update (title its path, state running, then idle end_turn)
// before anything carries its sessionId; its task, answer and tool calls
// stream on its own session; its write asks session/request_permission on
// its own session after the call's tool_call there, naming the child.
func TestACPSubagents(t *testing.T) {
	srv := providertest.New(t)
	ready, release := tightenedGate(t)
	srv.Enqueue(delegationTurns(ready)...)
	home, ws := t.TempDir(), t.TempDir()
	p := startACP(t, srv, home, 90*time.Second)
	sid, promptID := acpDelegate(p, ws, map[string]any{"subagents": map[string]any{}})
	c := newSubagentClient(t, sid)
	var perms []json.RawMessage
	var stop string
	tightened := false
	setModeID := 0
	for stop == "" {
		m := p.read()
		switch {
		case tightened && m.Method == "" && string(m.ID) == jsonInt(setModeID):
			release()
		case m.Method == "" && string(m.ID) == jsonInt(promptID):
			var r struct{ StopReason string }
			json.Unmarshal(m.Result, &r)
			if stop = r.StopReason; stop == "" {
				t.Fatalf("prompt answered %s %s\nstderr: %s", m.Result, m.Error, p.stderr)
			}
		case m.Method == "session/request_permission":
			perms = append(perms, m.Params)
			p.answer(m.ID, map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow_once"}})
		case m.Method != "" && m.ID != nil:
			t.Fatalf("unexpected request %s", m.Method)
		case m.Method == "session/update":
			c.update(m.Params)
			// Tightened once the root's wait was admitted (in_progress),
			// not at its first tool_call: a wait admitted under the
			// controlled policy would be denied and end the root's turn.
			if strings.Contains(string(m.Params), `"toolCallId":"w1"`) && strings.Contains(string(m.Params), `"status":"in_progress"`) && !tightened {
				tightened = true
				setModeID = p.send("session/set_mode", map[string]any{"sessionId": sid, "modeId": "controlled"})
			}
		}
	}
	if stop != "end_turn" {
		t.Fatalf("stopReason %q\nstderr: %s", stop, p.stderr)
	}
	one, two := c.kids["root/worker1"], c.kids["root/worker2"]
	if one == "" || two == "" || len(c.kids) != 2 {
		t.Fatalf("announced children %v", c.kids)
	}
	for id, answer := range map[string]string{one: "wrote one", two: "two"} {
		if got := strings.Join(c.states[id], ","); got != "running:,idle:end_turn" {
			t.Errorf("child %s states %s", id, got)
		}
		if c.texts[id] != answer || !strings.HasPrefix(c.updates[id][0], "user_message_chunk") {
			t.Errorf("child %s: answer %q, updates %v", id, c.texts[id], c.updates[id])
		}
	}
	if got := strings.Join(c.updates[one], " "); !strings.Contains(got, "tool_call:e1:pending") || !strings.Contains(got, "tool_call_update:e1:completed") {
		t.Errorf("child one's updates %s", got)
	}
	if len(perms) != 1 {
		t.Fatalf("%d permission requests", len(perms))
	}
	var rp struct {
		SessionID string `json:"sessionId"`
		ToolCall  struct {
			ToolCallID string `json:"toolCallId"`
			Title      string `json:"title"`
		} `json:"toolCall"`
	}
	json.Unmarshal(perms[0], &rp)
	if rp.SessionID != one || rp.ToolCall.ToolCallID != "e1" || !strings.HasPrefix(rp.ToolCall.Title, "root/worker1: ") {
		t.Errorf("permission request %s", perms[0])
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "one.txt")); string(got) != "1\n" {
		t.Fatalf("one.txt = %q", got)
	}
}

// TestACPSubagentCancel: session/cancel with a child's sessionId
// interrupts that child only: its state ends idle cancelled while the
// parent's prompt goes on to end_turn.
func TestACPSubagentCancel(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(
		providertest.Reply(providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE stall"}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":60}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("one was stopped").ForRequestContaining("ROOT-PROMPT"),
		providertest.Stall().ForRequestContaining("CHILD-ONE"),
	)
	home, ws := t.TempDir(), t.TempDir()
	p := startACP(t, srv, home, 30*time.Second)
	sid, promptID := acpDelegate(p, ws, map[string]any{"subagents": map[string]any{}})
	c := newSubagentClient(t, sid)
	var stop string
	cancelled := false
	for stop == "" {
		m := p.read()
		switch {
		case m.Method == "" && string(m.ID) == jsonInt(promptID):
			var r struct{ StopReason string }
			json.Unmarshal(m.Result, &r)
			if stop = r.StopReason; stop == "" {
				t.Fatalf("prompt answered %s %s\nstderr: %s", m.Result, m.Error, p.stderr)
			}
		case m.Method != "" && m.ID != nil:
			t.Fatalf("unexpected request %s", m.Method)
		case m.Method == "session/update":
			c.update(m.Params)
			if id := c.kids["root/worker1"]; id != "" && !cancelled && len(c.updates[id]) > 0 {
				cancelled = true
				p.notify("session/cancel", map[string]any{"sessionId": id})
			}
		}
	}
	id := c.kids["root/worker1"]
	if stop != "end_turn" || !cancelled || strings.Join(c.states[id], ",") != "running:,idle:cancelled" {
		t.Fatalf("stopReason %q, child states %v\nstderr: %s", stop, c.states[id], p.stderr)
	}
}
