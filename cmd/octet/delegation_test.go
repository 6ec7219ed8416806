//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// delegationTurns scripts a root that delegates two tasks, waits and
// combines; child one writes a file (which needs approval once the session
// is tightened), child two answers. Turns are routed by the text each
// agent's requests carry, so the agents can share the scripted server.
func delegationTurns() []providertest.Turn {
	use := func(in, out int64) provider.Usage { return provider.Usage{InputTokens: in, OutputTokens: out} }
	return []providertest.Turn{
		providertest.Reply(
			providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE write one.txt"}`),
			providertest.FunctionCall("s2", team.ToolSpawn, `{"task":"CHILD-TWO say two","tools":["read"]}`),
		).WithUsage(use(100, 10)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":60}`)).WithUsage(use(200, 5)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("combined: one and two").WithUsage(use(300, 7)).ForRequestContaining("ROOT-PROMPT"),
		// Child one is slow to ask for its write, so the test can tighten
		// the session after the root's wait was admitted.
		providertest.Reply(providertest.FunctionCall("e1", "write", `{"path":"one.txt","content":"1\n"}`)).WithUsage(use(1_000, 20)).Pace(150 * time.Millisecond).ForRequestContaining("CHILD-ONE"),
		providertest.Text("wrote one").WithUsage(use(1_100, 3)).ForRequestContaining("CHILD-ONE"),
		providertest.Text("two").WithUsage(use(2_000, 1)).ForRequestContaining("CHILD-TWO"),
	}
}

// TestLSPDelegationEndToEnd drives the real octet lsp: the root delegates
// two tasks, both children stream events naming their parent and path,
// the parent gets agent_updated for every status change, one child's
// write needs an approval that names the child, the root waits and
// combines, and the usage of the prompt's result equals the root's own
// plus both children's, as their session files record it.
func TestLSPDelegationEndToEnd(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(delegationTurns()...)
	home, ws := t.TempDir(), t.TempDir()
	cmd := lspCommand(t, 90*time.Second)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "capabilities": map[string]any{
		"experimental": map[string]any{"octet": map[string]any{"confirmEffect": true, "events": true}}}, "trace": nil}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)

	c.next++
	promptID := float64(c.next)
	c.send(map[string]any{"id": c.next, "method": "octet/prompt", "params": map[string]any{"sessionId": sid, "text": "ROOT-PROMPT do both"}})
	var result map[string]any
	var confirms []map[string]any
	childEvents := map[string][]string{} // agentPath → event kinds
	childSession := map[string]string{}
	updates := map[string][]string{} // agentPath → statuses
	tightened := false
	for result == nil {
		m := c.read()
		switch {
		case m["id"] == promptID && m["method"] == nil:
			if m["error"] != nil {
				t.Fatalf("prompt: %v\nstderr: %s", m["error"], stderr.String())
			}
			result = m["result"].(map[string]any)
		case m["method"] == "octet/confirmEffect":
			p := m["params"].(map[string]any)
			confirms = append(confirms, p)
			c.send(map[string]any{"id": m["id"], "result": map[string]any{"decision": "approve", "digest": p["digest"]}})
		case m["method"] != nil && m["id"] != nil:
			c.send(map[string]any{"id": m["id"], "result": nil})
		case m["method"] == "octet/event":
			p := m["params"].(map[string]any)
			ev := p["event"].(map[string]any)
			if path, _ := p["agentPath"].(string); path != "" {
				if p["parentSessionId"] != sid {
					t.Fatalf("child event parentSessionId %v, want %s", p["parentSessionId"], sid)
				}
				childEvents[path] = append(childEvents[path], ev["kind"].(string))
				childSession[path], _ = p["sessionId"].(string)
				continue
			}
			if ev["kind"] == "agent_updated" {
				path := ev["agentPath"].(string)
				updates[path] = append(updates[path], ev["status"].(string))
			}
			if ev["kind"] == "tool_started" && ev["tool"] == team.ToolWait && !tightened {
				// The wait is admitted; from here the session (and, sharing
				// its policy, every child) confirms workspace changes.
				tightened = true
				c.next++
				c.send(map[string]any{"id": c.next, "method": "octet/session/setPolicy", "params": map[string]any{"sessionId": sid, "effectPolicy": "controlled"}})
			}
		}
	}
	if result["outcome"] != "completed" {
		t.Fatalf("prompt result %v\nstderr: %s", result, stderr.String())
	}
	if len(confirms) != 1 || confirms[0]["agentPath"] != "root/worker1" || confirms[0]["tool"] != "write" ||
		confirms[0]["childSessionId"] != childSession["root/worker1"] || !strings.HasPrefix(confirms[0]["title"].(string), "root/worker1: ") {
		t.Fatalf("approvals %v", confirms)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "one.txt")); string(got) != "1\n" {
		t.Fatalf("one.txt = %q", got)
	}
	for _, path := range []string{"root/worker1", "root/worker2"} {
		kinds := childEvents[path]
		if len(kinds) < 3 || kinds[0] != "run_started" || kinds[len(kinds)-1] != "run_finished" || !contains(kinds, "output_delta") {
			t.Fatalf("%s events %v", path, kinds)
		}
		st := updates[path]
		if len(st) != 3 || st[0] != "pending" || st[1] != "running" || st[2] != "completed" {
			t.Fatalf("%s agent_updated statuses %v", path, st)
		}
	}
	// The usage shown is the root's own plus both children's, exactly.
	root, err := session.Inspect(filepath.Join(home, "sessions", sid+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tot := root.Totals()
	root.Close()
	var childCost, childIn int64
	teams, _ := filepath.Glob(filepath.Join(home, "sessions", "teams", "team-*"))
	if len(teams) != 1 {
		t.Fatalf("team directories %v", teams)
	}
	for _, path := range []string{"root/worker1", "root/worker2"} {
		cs, err := session.Inspect(filepath.Join(teams[0], childSession[path]+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		childCost += cs.Totals().Own.CostPicodollars
		childIn += cs.Totals().Own.Input
		cs.Close()
	}
	usage := result["usage"].(map[string]any)
	if childIn != 4_100 || tot.Delegated.CostPicodollars != childCost || tot.Delegated.Input != childIn || tot.DelegatedRecords != 2 {
		t.Fatalf("mirrored %+v (%d records), children's sessions cost %d input %d", tot.Delegated, tot.DelegatedRecords, childCost, childIn)
	}
	if int64(usage["costMicros"].(float64)) != (tot.Own.CostPicodollars+childCost)/1_000_000 || int64(usage["input"].(float64)) != 600+childIn || childCost == 0 {
		t.Fatalf("prompt usage %v, want own %d + children %d", usage, tot.Own.CostPicodollars, childCost)
	}
	recs, err := team.ReadProvenance(filepath.Join(teams[0], team.JournalName))
	if err != nil || recs[0].Kind != team.KindTeamStarted || recs[len(recs)-1].Kind != team.KindTeamShutdown {
		t.Fatalf("provenance %v %v", recs, err)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("octet lsp exit: %v\nstderr: %s", err, stderr.String())
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}


// execDelegationTurns: the root delegates two tasks and combines; no
// approval is needed under the default unsafe_host.
func execDelegationTurns() []providertest.Turn {
	return []providertest.Turn{
		providertest.Reply(
			providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE read notes"}`),
			providertest.FunctionCall("s2", team.ToolSpawn, `{"task":"CHILD-TWO say two"}`),
		).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("combined").ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"notes.txt"}`)).ForRequestContaining("CHILD-ONE"),
		providertest.Text("alpha beta").ForRequestContaining("CHILD-ONE"),
		providertest.Text("two").ForRequestContaining("CHILD-TWO"),
	}
}

// TestExecShowsChildrenIndented: octet exec shows each child's status
// changes and tools indented under the parent's output, and with --json
// every child event names its parent session and path.
func TestExecShowsChildrenIndented(t *testing.T) {
	x := newExecEnv(t, execDelegationTurns()...)
	r := runCLI(t, x.ws, x.vars, "exec", "ROOT-PROMPT do both")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"  ↳ root/worker1 pending: CHILD-ONE read notes\n", "  ↳ root/worker1 running\n",
		"  ↳ root/worker1 ▸ read\n", "  ↳ root/worker1 completed\n", "  ↳ root/worker2 completed\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "combined") {
		t.Errorf("stdout %q", r.stdout)
	}

	x = newExecEnv(t, execDelegationTurns()...)
	r = runCLI(t, x.ws, x.vars, "exec", "--json", "ROOT-PROMPT do both")
	if r.code != exitOK {
		t.Fatalf("--json exit %d: %s", r.code, r.stderr)
	}
	var root string
	paths := map[string]int{}
	updated := 0
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m struct {
			SessionID, ParentSessionID, AgentPath string
			Event                                  struct{ Kind string }
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		switch {
		case m.AgentPath != "":
			paths[m.AgentPath]++
			if root == "" || m.ParentSessionID != root || m.SessionID == root {
				t.Fatalf("child line %q (root %s)", l, root)
			}
		case m.Event.Kind == "agent_updated":
			updated++
		default:
			root = m.SessionID
		}
	}
	if paths["root/worker1"] < 3 || paths["root/worker2"] < 3 || updated != 6 {
		t.Fatalf("child lines %v, agent_updated %d", paths, updated)
	}
}
