//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// delegationTurns scripts a root that delegates two tasks, waits and
// combines; child one writes a file (which needs approval once the session
// is tightened), child two answers. Turns are routed by the text each
// agent's requests carry, so the agents can share the scripted server.
// Child one's write is held until tightened is closed.
func delegationTurns(tightened <-chan struct{}) []providertest.Turn {
	use := func(in, out int64) provider.Usage { return provider.Usage{InputTokens: in, OutputTokens: out} }
	return []providertest.Turn{
		providertest.Reply(
			providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE write one.txt"}`),
			providertest.FunctionCall("s2", team.ToolSpawn, `{"task":"CHILD-TWO say two","tools":["read"]}`),
		).WithUsage(use(100, 10)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":60}`)).WithUsage(use(200, 5)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("combined: one and two").WithUsage(use(300, 7)).ForRequestContaining("ROOT-PROMPT"),
		// Child one asks for its write only once the test has tightened
		// the session (after the root's wait was admitted).
		providertest.Reply(providertest.FunctionCall("e1", "write", `{"path":"one.txt","content":"1\n"}`)).WithUsage(use(1_000, 20)).HoldUntil(tightened).ForRequestContaining("CHILD-ONE"),
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
	ready, release := tightenedGate(t)
	srv.Enqueue(delegationTurns(ready)...)
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
	var setPolicyID float64
	for result == nil {
		m := c.read()
		switch {
		case m["id"] == promptID && m["method"] == nil:
			if m["error"] != nil {
				t.Fatalf("prompt: %v\nstderr: %s", m["error"], stderr.String())
			}
			result = m["result"].(map[string]any)
		case tightened && m["id"] == setPolicyID && m["method"] == nil:
			release()
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
				setPolicyID = float64(c.next)
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
		// idle when its run completed (it keeps its context for a
		// follow-up), completed when the root's run ended.
		if strings.Join(st, ",") != "pending,running,idle,completed" {
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
	// A child's session is readable like any session.
	tr := c.call("octet/session/transcript", map[string]any{"sessionId": childSession["root/worker2"]}, nil, nil)
	b, _ := json.Marshal(tr["entries"])
	if !strings.Contains(string(b), "CHILD-TWO say two") || !strings.Contains(string(b), `"two"`) {
		t.Fatalf("child transcript %s", b)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("octet lsp exit: %v\nstderr: %s", err, stderr.String())
	}
	checkChildSessionsAfterRestart(t, home, ws, sid, childSession)
}

// checkChildSessionsAfterRestart starts a new octet lsp on home: the
// children of session sid are listed under it, resume read-only with
// their parent and path, and the parent's resume names them.
func checkChildSessionsAfterRestart(t *testing.T, home, ws, sid string, childSession map[string]string) {
	t.Helper()
	cmd := lspCommand(t, 60*time.Second)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL=http://127.0.0.1:1", "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	c.initialize(ws)
	top, _ := c.call("octet/session/list", map[string]any{}, nil, nil)["sessions"].([]any)
	if len(top) != 1 {
		t.Fatalf("top-level sessions after a restart: %v", top)
	}
	rows, _ := c.call("octet/session/list", map[string]any{"parentSessionId": sid}, nil, nil)["sessions"].([]any)
	got := map[string]string{}
	for _, r := range rows {
		m := r.(map[string]any)
		if m["parentSessionId"] != sid || m["status"] != "completed" {
			t.Fatalf("child row after a restart %v", m)
		}
		got[m["agentPath"].(string)], _ = m["sessionId"].(string)
	}
	if len(got) != 2 || got["root/worker1"] != childSession["root/worker1"] || got["root/worker2"] != childSession["root/worker2"] {
		t.Fatalf("children after a restart %v, want %v", got, childSession)
	}
	res := c.call("octet/session/resume", map[string]any{"sessionId": childSession["root/worker2"], "afterSeq": 0}, nil, nil)
	if res["parentSessionId"] != sid || res["agentPath"] != "root/worker2" || res["readOnly"] != true || res["status"] != "completed" {
		t.Fatalf("child resume after a restart %v", res)
	}
	if tr, _ := json.Marshal(res["transcript"]); !strings.Contains(string(tr), "CHILD-TWO say two") {
		t.Fatalf("child resume transcript %s", tr)
	}
	kids, _ := c.call("octet/session/resume", map[string]any{"sessionId": sid}, nil, nil)["children"].([]any)
	if len(kids) != 2 {
		t.Fatalf("parent resume children %v", kids)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("octet lsp exit: %v\nstderr: %s", err, stderr.String())
	}
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

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
		"  ↳ root/worker1 ▸ read\n", "  ↳ root/worker1 idle\n", "  ↳ root/worker1 completed\n", "  ↳ root/worker2 completed\n",
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
			Event                                 struct{ Kind string }
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
	if paths["root/worker1"] < 3 || paths["root/worker2"] < 3 || updated != 8 {
		t.Fatalf("child lines %v, agent_updated %d", paths, updated)
	}
}

// TestDelegationToolsOffered: the root model gets the subagents service's
// tools only under unsafe_host with the tool allowlist not narrowed; the
// controlled policies deny the Delegation effect, so the tools are not
// offered at all, and the native generic tools are never offered.
func TestDelegationToolsOffered(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--effect-policy", "controlled"}, false},
		{[]string{"--safe-mode"}, false},
		{[]string{"--tools", "read,search,edit,write,bash"}, false},
	} {
		x := newExecEnv(t, providertest.Text("ok"))
		r := runCLI(t, x.ws, x.vars, append(append([]string{"exec"}, tc.args...), "hi")...)
		if r.code != exitOK {
			t.Fatalf("%v: exit %d: %s", tc.args, r.code, r.stderr)
		}
		var names []string
		for _, tl := range x.srv.Requests()[0].Body["tools"].([]any) {
			names = append(names, tl.(map[string]any)["name"].(string))
		}
		got := contains(names, team.ToolSpawn) && contains(names, team.ToolWait) && contains(names, team.ToolList) && contains(names, team.ToolInterrupt)
		if got != tc.want || (!tc.want && strings.Contains(strings.Join(names, ","), "agents_")) {
			t.Errorf("%v: advertised %v", tc.args, names)
		}
		for _, native := range []string{"spawn_agent", "followup_task", "send_message", "wait_agent", "list_agents", "interrupt_agent"} {
			if contains(names, native) {
				t.Errorf("%v: native tool %s advertised", tc.args, native)
			}
		}
	}
}

// markerProcesses lists the processes whose command line contains marker.
func markerProcesses(marker string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			out = append(out, filepath.Base(d)+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// TestExecSIGKILLMidDelegation kills octet exec while the root waits for
// two children, one of them in a bash command and one in a provider
// request: the root session, each child session and provenance.jsonl
// reopen; the root's and the child's unresolved calls become
// indeterminate (never run again); the child's bash process does not
// survive octet.
func TestExecSIGKILLMidDelegation(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc to find surviving processes")
	}
	// The marker is in the command line of the shell and of sleep (a
	// compound command keeps the shell from exec'ing sleep).
	marker := "317." + strconv.Itoa(os.Getpid())
	x := newExecEnv(t,
		providertest.Reply(
			providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE run the command"}`),
			providertest.FunctionCall("s2", team.ToolSpawn, `{"task":"CHILD-TWO think"}`),
		).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":600}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("b1", "bash", `{"command":"sleep `+marker+`; echo done"}`)).ForRequestContaining("CHILD-ONE"),
		providertest.Stall().ForRequestContaining("CHILD-TWO"),
	)
	cmd := exec.CommandContext(t.Context(), octetBin, "exec", "--json", "ROOT-PROMPT do both")
	cmd.Dir = x.ws
	cmd.Env = os.Environ()
	for k, v := range x.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The root's wait call is durable (its request reaching the server
	// is not enough: the kill could come before its answer is recorded).
	rootWaits := func() bool {
		files := x.sessionFiles(t)
		if len(files) != 1 {
			return false
		}
		b, _ := os.ReadFile(files[0])
		return strings.Contains(string(b), `"w1"`)
	}
	for deadline := time.Now().Add(30 * time.Second); len(x.srv.Requests()) < 4 || len(markerProcesses(marker)) == 0 || !rootWaits(); {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("delegation never got under way: %d requests, processes %v, the root's wait recorded %v", len(x.srv.Requests()), markerProcesses(marker), rootWaits())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); len(markerProcesses(marker)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("a child's process survived octet: %v", markerProcesses(marker))
		}
		time.Sleep(20 * time.Millisecond)
	}

	teams, _ := filepath.Glob(filepath.Join(x.home, "sessions", "teams", "team-*"))
	if len(teams) != 1 {
		t.Fatalf("team directories %v", teams)
	}
	recs, err := team.ReadProvenance(filepath.Join(teams[0], team.JournalName))
	if err != nil {
		t.Fatalf("provenance does not reopen: %v", err)
	}
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Kind+":"+r.Status)
	}
	if got := strings.Join(kinds, ","); strings.Count(got, "agent_spawned") != 2 || strings.Count(got, "agent_status:running") != 2 || strings.Contains(got, "team_shutdown") {
		t.Fatalf("provenance after the kill: %s", got)
	}
	children, _ := filepath.Glob(filepath.Join(teams[0], "*.jsonl"))
	children = slices.DeleteFunc(children, func(p string) bool { return filepath.Base(p) == team.JournalName })
	if len(children) != 2 {
		t.Fatalf("child sessions %v", children)
	}
	indeterminate, uncertain := 0, 0
	for _, path := range children {
		s, err := session.Open(path)
		if err != nil {
			t.Fatalf("child session %s does not reopen: %v", path, err)
		}
		if s.Totals().Uncertain {
			uncertain++ // the stalled child's request was in flight
		}
		settleLeftovers(t, s, x.ws)
		for _, e := range s.Branch() {
			if e.Result != nil && e.Result.CallID == "b1" && strings.Contains(e.Result.Text, "indeterminate") && e.Result.IsError {
				indeterminate++
			}
		}
		s.Close()
	}
	if indeterminate != 1 || uncertain != 1 {
		t.Fatalf("after the kill: %d indeterminate bash results, %d uncertain child sessions; want 1 and 1", indeterminate, uncertain)
	}
	// The root session reopens; continuing it settles its unresolved wait
	// as indeterminate without running it.
	file := x.oneSession(t)
	sid := sessionIDOf(file)
	x.srv.Enqueue(providertest.Text("resumed").ForRequestContaining("continue"))
	again := runCLI(t, x.ws, x.vars, "exec", "--session", sid, "continue")
	if again.code != exitOK {
		t.Fatalf("continue after the kill: exit %d: %s", again.code, again.stderr)
	}
	root, err := session.Inspect(file)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	found := false
	for _, e := range root.Branch() {
		if e.Result != nil && e.Result.CallID == "w1" {
			found = strings.Contains(e.Result.Text, "indeterminate") && e.Result.IsError
		}
	}
	if !found {
		t.Fatal("the root's unresolved agents_wait was not settled as indeterminate")
	}
}

// settleLeftovers opens an agent on a reopened child session, which
// settles its calls left without a result under the crash rules (a bash
// call is never run again: indeterminate).
func settleLeftovers(t *testing.T, s *session.Session, ws string) {
	t.Helper()
	builtins, closeTools, err := tools.Builtins(tools.Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer closeTools()
	host := tools.NewHost()
	for _, tl := range builtins {
		if err := host.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	_, err = agent.New(agent.Config{
		Session: s, Transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: "http://127.0.0.1:1/v1"}),
		Model: provider.Model{Name: "m"}, Host: host, Broker: tools.NewBroker(tools.BrokerConfig{Policy: tools.UnsafeHost}),
	})
	if err != nil {
		t.Fatalf("settle the child session: %v", err)
	}
}

// TestLSPCancelChildRun: octet/cancel with a child's runId interrupts that
// child only; the root's wait returns and the root's run completes.
func TestLSPCancelChildRun(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(
		providertest.Reply(
			providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE stall"}`),
			providertest.FunctionCall("s2", team.ToolSpawn, `{"task":"CHILD-TWO answer"}`),
		).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":60}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("one was stopped").ForRequestContaining("ROOT-PROMPT"),
		providertest.Stall().ForRequestContaining("CHILD-ONE"),
		providertest.Text("two").ForRequestContaining("CHILD-TWO"),
	)
	home, ws := t.TempDir(), t.TempDir()
	cmd := lspCommand(t, 60*time.Second)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "capabilities": map[string]any{
		"experimental": map[string]any{"octet": map[string]any{"events": true}}}, "trace": nil}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws}, nil, nil)["sessionId"].(string)
	c.next++
	promptID := float64(c.next)
	c.send(map[string]any{"id": c.next, "method": "octet/prompt", "params": map[string]any{"sessionId": sid, "text": "ROOT-PROMPT go"}})
	final := map[string]string{}
	var result map[string]any
	var cancelID float64
	var cancelAnswer map[string]any
	for result == nil {
		m := c.read()
		switch {
		case m["id"] == promptID && m["method"] == nil:
			result, _ = m["result"].(map[string]any)
		case cancelID != 0 && m["id"] == cancelID && m["method"] == nil:
			cancelAnswer = m
		case m["method"] != nil && m["id"] != nil:
			c.send(map[string]any{"id": m["id"], "result": nil})
		case m["method"] == "octet/event":
			p := m["params"].(map[string]any)
			ev := p["event"].(map[string]any)
			if p["agentPath"] == "root/worker1" && ev["kind"] == "run_started" {
				c.next++
				cancelID = float64(c.next)
				c.send(map[string]any{"id": c.next, "method": "octet/cancel", "params": map[string]any{"runId": p["runId"]}})
			}
			if ev["kind"] == "agent_updated" && ev["status"] != "pending" && ev["status"] != "running" {
				final[ev["agentPath"].(string)] = ev["status"].(string)
			}
		}
	}
	if result["outcome"] != "completed" {
		t.Fatalf("root result %v\nstderr: %s", result, stderr.String())
	}
	if cancelAnswer == nil || cancelAnswer["error"] != nil {
		t.Fatalf("octet/cancel of the child's run answered %v", cancelAnswer)
	}
	if final["root/worker1"] != "cancelled" || final["root/worker2"] != "completed" {
		t.Fatalf("children ended %v", final)
	}
	c.call("shutdown", nil, nil, nil)
	c.send(map[string]any{"method": "exit"})
	stdin.Close()
	cmd.Wait()
}

// tightenedGate is the channel delegationTurns holds child one's write
// on, and its release (also at cleanup, so a failed test never leaves the
// scripted server waiting).
func tightenedGate(t *testing.T) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return ch, release
}

// TestExecDelegationLiveCostCeiling: octet exec's root and children share
// the session cost ceiling live. The second child's response crosses it:
// that child's next request and the root's are refused before sending,
// and the refusal names the ceiling and what to do.
func TestExecDelegationLiveCostCeiling(t *testing.T) {
	// 1000 input + 1000 output tokens of gpt-5.1-codex cost $0.01125.
	big := provider.Usage{InputTokens: 1000, OutputTokens: 1000}
	x := newExecEnv(t,
		providertest.Reply(providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE answer"}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":60}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("s2", team.ToolSpawn, `{"task":"CHILD-TWO read notes"}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w2", team.ToolWait, `{"timeout_seconds":60}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("must not be sent").ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("one").WithUsage(big).ForRequestContaining("CHILD-ONE"),
		providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"notes.txt"}`)).WithUsage(big).ForRequestContaining("CHILD-TWO"),
		providertest.Text("must not be sent either").ForRequestContaining("CHILD-TWO"),
	)
	x.writeGlobalConfig(t, "max_session_cost_usd = \"0.02\"\n")
	r := runCLI(t, x.ws, x.vars, "exec", "ROOT-PROMPT delegate")
	if r.code != exitFailed {
		t.Fatalf("exit %d, want %d\nstderr: %s", r.code, exitFailed, r.stderr)
	}
	roots, children := 0, 0
	for _, q := range x.srv.Requests() {
		switch raw := string(q.Raw); {
		case strings.Contains(raw, "CHILD-ONE") || strings.Contains(raw, "CHILD-TWO"):
			if !strings.Contains(raw, "ROOT-PROMPT") {
				children++
			} else {
				roots++
			}
		default:
			roots++
		}
	}
	if roots != 4 || children != 2 {
		t.Fatalf("%d root and %d child requests sent, want 4 and 2 (the next of each refused)\nstderr: %s", roots, children, r.stderr)
	}
	for _, want := range []string{"hard cost ceiling reached", "of $0.02", "max_session_cost_usd counting its delegated child agents", "start a new session, or raise or remove the ceiling", "root/worker2 failed"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

// TestRewindUndoesChildrenChanges: a rewind of the root's prompt undoes
// what the children its run delegated to changed, as well as the root's
// own changes, and a second rewind finds nothing left to do. It planned
// from the root's records alone: the dry run listed root.txt only, and
// child.txt stayed.
func TestRewindUndoesChildrenChanges(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-W write the child file"}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("r1", "write", `{"path":"root.txt","content":"root\n"}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("both written").ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("c1", "write", `{"path":"child.txt","content":"child\n"}`)).ForRequestContaining("CHILD-W"),
		providertest.Reply(providertest.FunctionCall("c2", "write", `{"path":"notes.txt","content":"child's notes\n"}`)).ForRequestContaining("CHILD-W"),
		providertest.Text("wrote").ForRequestContaining("CHILD-W"),
	)
	if r := x.runOctet(t, "exec", "ROOT-PROMPT write both"); r.code != exitOK {
		t.Fatalf("exec: exit %d\n%s", r.code, r.stderr)
	}
	for _, f := range []string{"root.txt", "child.txt"} {
		if _, err := os.Stat(filepath.Join(x.ws, f)); err != nil {
			t.Fatalf("the run did not write %s: %v", f, err)
		}
	}
	file := x.oneSession(t)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sid, entry := sessionIDOf(file), firstEntry(t, string(raw))
	dry := x.runOctet(t, "sessions", "rewind", sid, entry, "--dry-run")
	for _, want := range []string{"delete   root.txt", "delete   child.txt", "notes.txt"} {
		if !strings.Contains(dry.stdout, want) {
			t.Errorf("the dry run lacks %q:\n%s%s", want, dry.stdout, dry.stderr)
		}
	}
	if r := x.runOctet(t, "sessions", "rewind", sid, entry, "--files"); r.code != exitOK {
		t.Fatalf("rewind: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, f := range []string{"root.txt", "child.txt"} {
		if _, err := os.Stat(filepath.Join(x.ws, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after the rewind: %v, want it gone", f, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(x.ws, "notes.txt")); string(got) != "alpha\nbeta\n" {
		t.Errorf("notes.txt after the rewind: %q", got)
	}
	again := x.runOctet(t, "sessions", "rewind", sid, entry, "--dry-run")
	if again.code != exitOK || !strings.Contains(again.stdout, ": 0 path(s), 0 conflict(s)") {
		t.Errorf("a second rewind's dry run: exit %d\n%s%s", again.code, again.stdout, again.stderr)
	}
}
