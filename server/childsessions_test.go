package server

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// newDelegationStack is the real runtime with the product's subagents
// service (unsafe_host, as octet lsp offers it): each root agent gets the
// service tools, its teams beside the session files and the server's
// delegation hook.
func newDelegationStack(t *testing.T) *stack {
	t.Helper()
	return &stack{hosttest.New(t, hosttest.Options{Policy: tools.UnsafeHost, Delegation: true})}
}

// rpcCode returns the JSON-RPC error code of err (0 for another error).
func rpcCode(err error) jsonrpc2.Code {
	var je *jsonrpc2.Error
	if errors.As(err, &je) {
		return je.Code
	}
	return 0
}

// listRows is octet/session/list's result.
type listRows struct {
	Sessions []host.SessionInfo `json:"sessions"`
}

// TestChildSessionsInSessionMethods: a delegated child's session is
// listed under its parent (octet/session/list parentSessionId) with its
// agent path and status, resumes read-only with its parent, path and
// buffered events, is named in its parent's resume, diffs its own file
// changes, forks into an ordinary session, renames once ended, and
// refuses to be driven (prompt).
func TestChildSessionsInSessionMethods(t *testing.T) {
	st := newDelegationStack(t)
	st.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE write a.txt"}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":30}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("combined").ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("e1", "write", `{"path":"a.txt","content":"alpha\n"}`)).ForRequestContaining("CHILD-ONE"),
		providertest.Text("wrote a").ForRequestContaining("CHILD-ONE"),
	)
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "ROOT-PROMPT delegate"})); ans.Outcome != "completed" {
		t.Fatalf("prompt %+v\n%s", ans, e.dump())
	}
	var top listRows
	e.mustCall("octet/session/list", map[string]any{}, &top)
	if len(top.Sessions) != 1 || top.Sessions[0].SessionID != sid || top.Sessions[0].AgentPath != "" {
		t.Fatalf("top-level list %+v, want only the root", top.Sessions)
	}
	var kids listRows
	e.mustCall("octet/session/list", map[string]any{"parentSessionId": sid}, &kids)
	if len(kids.Sessions) != 1 {
		t.Fatalf("children %+v", kids.Sessions)
	}
	child := kids.Sessions[0]
	if child.ParentSessionID != sid || child.AgentPath != "root/worker1" || child.AgentID != "worker1" || child.Status != "completed" ||
		!strings.HasPrefix(child.Title, "root/worker1: CHILD-ONE") || child.Cwd == "" || child.CreatedAt.IsZero() {
		t.Fatalf("child row %+v", child)
	}

	var res struct {
		SessionID       string            `json:"sessionId"`
		ParentSessionID string            `json:"parentSessionId"`
		AgentPath       string            `json:"agentPath"`
		Status          string            `json:"status"`
		ReadOnly        bool              `json:"readOnly"`
		Transcript      []host.PagedEntry `json:"transcript"`
		Events          []host.Event      `json:"events"`
		Epoch           string            `json:"epoch"`
		LastSeq         int64             `json:"lastSeq"`
		Usage           host.Usage        `json:"usage"`
	}
	e.mustCall("octet/session/resume", map[string]any{"sessionId": child.SessionID, "afterSeq": 0}, &res)
	if res.SessionID != child.SessionID || res.ParentSessionID != sid || res.AgentPath != "root/worker1" || !res.ReadOnly || res.Status != "completed" {
		t.Fatalf("child resume %+v", res)
	}
	if len(res.Transcript) < 4 || res.Transcript[0].Type != "user" || !strings.Contains(res.Transcript[0].Text, "CHILD-ONE") {
		t.Fatalf("child transcript %+v", res.Transcript)
	}
	if len(res.Events) == 0 || int64(len(res.Events)) != res.LastSeq || res.Events[0].Seq != 1 {
		t.Fatalf("child replay: %d events, lastSeq %d", len(res.Events), res.LastSeq)
	}
	for _, ev := range res.Events {
		var env struct {
			SessionID, ParentSessionID, AgentPath, Epoch string
			Event                                        map[string]any
		}
		if err := json.Unmarshal(ev.Params, &env); err != nil || env.SessionID != child.SessionID || env.ParentSessionID != sid || env.AgentPath != "root/worker1" || env.Epoch != res.Epoch {
			t.Fatalf("replayed child event %s (%v)", ev.Params, err)
		}
	}
	var parent struct {
		Children []host.ChildView `json:"children"`
	}
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, &parent)
	if len(parent.Children) != 1 || parent.Children[0].SessionID != child.SessionID || parent.Children[0].AgentPath != "root/worker1" || parent.Children[0].Status != "completed" {
		t.Fatalf("parent resume children %+v", parent.Children)
	}

	var diff diffResult
	e.mustCall("octet/session/diff", map[string]any{"sessionId": child.SessionID}, &diff)
	if len(diff.Changes) != 1 || diff.Changes[0].Path != "a.txt" || diff.Changes[0].Kind != "add" || !strings.Contains(diff.Changes[0].Diff, "+alpha") {
		t.Fatalf("child diff %+v", diff)
	}

	last := res.Transcript[len(res.Transcript)-1].ID
	var fork struct {
		SessionID string `json:"sessionId"`
	}
	e.mustCall("octet/session/fork", map[string]any{"sessionId": child.SessionID, "entryId": last}, &fork)
	e.mustCall("octet/session/list", map[string]any{}, &top)
	if len(top.Sessions) != 2 || fork.SessionID == "" {
		t.Fatalf("after the fork: %+v", top.Sessions)
	}

	e.mustCall("octet/session/rename", map[string]any{"sessionId": child.SessionID, "title": "the writer"}, nil)
	e.mustCall("octet/session/list", map[string]any{"parentSessionId": sid}, &kids)
	if kids.Sessions[0].Title != "the writer" {
		t.Fatalf("renamed child %+v", kids.Sessions[0])
	}

	err := e.call("octet/prompt", map[string]any{"sessionId": child.SessionID, "text": "hi"}, nil)
	if rpcCode(err) != CodeNoSession || !strings.Contains(err.Error(), "delegated child root/worker1") {
		t.Fatalf("prompt to a child session: %v", err)
	}
}

// TestChildSessionDeleteRules: a running child's session cannot be
// deleted, nor its parent's; once the parent's run ended, deleting the
// parent removes its children's sessions and provenance too.
func TestChildSessionDeleteRules(t *testing.T) {
	st := newDelegationStack(t)
	st.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-TWO stall"}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":600}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Stall().ForRequestContaining("CHILD-TWO"),
	)
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "ROOT-PROMPT delegate"})
	var childID string
	e.await("the child running", func(notes []note) bool {
		for _, ev := range eventsIn(notes, "") {
			if ev.SessionID == sid && ev.Event["kind"] == "agent_updated" && ev.Event["status"] == "running" {
				childID, _ = ev.Event["sessionId"].(string)
			}
		}
		return childID != ""
	})
	err := e.call("octet/session/delete", map[string]any{"sessionId": childID}, nil)
	if rpcCode(err) != CodeSessionBusy || !strings.Contains(err.Error(), "root/worker1") {
		t.Fatalf("delete of a running child: %v", err)
	}
	if err := e.call("octet/session/rename", map[string]any{"sessionId": childID, "title": "x"}, nil); rpcCode(err) != CodeSessionBusy {
		t.Fatalf("rename of a running child: %v", err)
	}
	if err := e.call("octet/session/delete", map[string]any{"sessionId": sid}, nil); rpcCode(err) != CodeSessionBusy {
		t.Fatalf("delete of the parent of a running child: %v", err)
	}
	var kids listRows
	e.mustCall("octet/session/list", map[string]any{"parentSessionId": sid}, &kids)
	if len(kids.Sessions) != 1 || kids.Sessions[0].Status != "running" {
		t.Fatalf("running child listed as %+v", kids.Sessions)
	}
	runID := e.awaitRunID(sid)
	e.mustCall("octet/cancel", map[string]any{"runId": runID}, nil)
	if ans := waitAnswer(t, ch); ans.Outcome != "cancelled" {
		t.Fatalf("prompt %+v", ans)
	}
	teams := filepath.Join(st.Runtime.SessionsDir, "teams")
	des, _ := os.ReadDir(teams)
	if len(des) != 1 {
		t.Fatalf("%d team dirs, want 1", len(des))
	}
	// The parent's run is over: its child ended with it.
	deadline := time.Now().Add(editorTimeout)
	for {
		e.mustCall("octet/session/list", map[string]any{"parentSessionId": sid}, &kids)
		if len(kids.Sessions) == 1 && kids.Sessions[0].Status == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child after the parent's cancel: %+v", kids.Sessions)
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.mustCall("octet/session/delete", map[string]any{"sessionId": sid}, nil)
	if des, _ := os.ReadDir(teams); len(des) != 0 {
		t.Fatalf("team dirs left after the parent's delete: %v", des)
	}
	if err := e.call("octet/session/resume", map[string]any{"sessionId": childID}, nil); rpcCode(err) != CodeNoSession {
		t.Fatalf("resume of a deleted parent's child: %v", err)
	}
}

// TestDisconnectedChildSession: a child whose provenance says it was
// running when its octet stopped (no team_shutdown), and that no run of
// this server drives, is listed and resumed as disconnected, and can be
// deleted.
func TestDisconnectedChildSession(t *testing.T) {
	st := newDelegationStack(t)
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	dir := filepath.Join(st.Runtime.SessionsDir, "teams", "team-0123456789abcdef0123456789abcdef")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	child, err := session.Create(dir, session.Header{Cwd: st.Workspace, Title: "root/worker1: lost"})
	if err != nil {
		t.Fatal(err)
	}
	cid, path := child.Header().ID, child.Path()
	child.Close()
	var journal []byte
	for _, r := range []team.Record{
		{Kind: team.KindTeamStarted, Team: "t", Owner: sid, RunID: "run_x"},
		{Kind: team.KindAgentSpawned, Agent: "worker1", Path: "root/worker1", Parent: "root", Session: cid, Depth: 1, Task: "lost"},
		{Kind: team.KindAgentStatus, Agent: "worker1", Path: "root/worker1", Status: "running"},
	} {
		b, _ := json.Marshal(r)
		journal = append(append(journal, b...), '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, team.JournalName), journal, 0o600); err != nil {
		t.Fatal(err)
	}
	var kids listRows
	e.mustCall("octet/session/list", map[string]any{"parentSessionId": sid}, &kids)
	if len(kids.Sessions) != 1 || kids.Sessions[0].SessionID != cid || kids.Sessions[0].Status != "disconnected" || kids.Sessions[0].Title != "root/worker1: lost" {
		t.Fatalf("children %+v", kids.Sessions)
	}
	var res struct{ Status, AgentPath string }
	e.mustCall("octet/session/resume", map[string]any{"sessionId": cid}, &res)
	if res.Status != "disconnected" || res.AgentPath != "root/worker1" {
		t.Fatalf("resume %+v", res)
	}
	e.mustCall("octet/session/delete", map[string]any{"sessionId": cid}, nil)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("child file after delete: %v", err)
	}
	e.mustCall("octet/session/list", map[string]any{"parentSessionId": sid}, &kids)
	if len(kids.Sessions) != 0 {
		t.Fatalf("a deleted child is still listed: %+v", kids.Sessions)
	}
}
