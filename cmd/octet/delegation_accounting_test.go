//go:build unix

package main

import (
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestExecSIGKILLDelegationAccounting: a real `octet exec` is SIGKILLed
// while it delegates: one child has finished (its usage settled), the
// other has one settled request and one in flight. Continuing the root
// session reconciles the children's ledgers into it: the root's
// delegated usage equals the sum of the children's own, and the child
// whose request was in flight makes the root uncertain. Continuing again
// counts nothing twice. `octet sessions show` takes a child's id, and
// lists a root's children. On the old code the root never received the
// killed team's usage and the child sessions were "no session".
func TestExecSIGKILLDelegationAccounting(t *testing.T) {
	use := func(in, out int64) provider.Usage { return provider.Usage{InputTokens: in, OutputTokens: out} }
	x := newExecEnv(t,
		providertest.Reply(
			providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE answer"}`),
			providertest.FunctionCall("s2", team.ToolSpawn, `{"task":"CHILD-TWO read then think"}`),
		).WithUsage(use(100, 10)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":600}`)).WithUsage(use(200, 5)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("one is done").WithUsage(use(1_000, 20)).ForRequestContaining("CHILD-ONE"),
		providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"notes.txt"}`)).WithUsage(use(3_000, 40)).ForRequestContaining("CHILD-TWO"),
		providertest.Stall().ForRequestContaining("CHILD-TWO"),
	)
	cmd := x.octetCmd(t, "exec", "--json", "ROOT-PROMPT do both")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	x.awaitRequests(t, 5)
	// Child one's answer is durable once its run is recorded idle.
	teams, _ := filepath.Glob(filepath.Join(x.home, "sessions", "teams", "team-*"))
	if len(teams) != 1 {
		t.Fatalf("team directories %v", teams)
	}
	journal := filepath.Join(teams[0], team.JournalName)
	for deadline := time.Now().Add(30 * time.Second); ; {
		recs, _ := team.ReadProvenance(journal)
		if slices.ContainsFunc(recs, func(r team.Record) bool { return r.Kind == team.KindAgentStatus && r.Status == string(team.StatusIdle) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child one never went idle: %+v", recs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	children, _ := filepath.Glob(filepath.Join(teams[0], "*.jsonl"))
	children = slices.DeleteFunc(children, func(p string) bool { return filepath.Base(p) == team.JournalName })
	if len(children) != 2 {
		t.Fatalf("child sessions %v", children)
	}
	var sum session.Usage
	uncertainChildren := 0
	for _, p := range children {
		s, err := session.Inspect(p)
		if err != nil {
			t.Fatal(err)
		}
		tot := s.Totals()
		s.Close()
		sum = plusUsage(sum, tot.Own)
		if tot.Uncertain {
			uncertainChildren++
		}
	}
	if sum.Input != 4_000 || sum.Output != 60 || sum.CostPicodollars == 0 || uncertainChildren != 1 {
		t.Fatalf("children's own usage %+v, %d uncertain; want the three settled child requests priced and one in flight", sum, uncertainChildren)
	}

	file := x.oneSession(t)
	sid := sessionIDOf(file)
	rootTotals := func() session.Totals {
		t.Helper()
		s, err := session.Inspect(file)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return s.Totals()
	}
	for i, prompt := range []string{"continue", "and again"} {
		x.srv.Enqueue(providertest.Text("resumed").ForRequestContaining(prompt))
		if r := x.runOctet(t, "exec", "--session", sid, prompt); r.code != exitOK {
			t.Fatalf("%s after the kill: exit %d: %s", prompt, r.code, r.stderr)
		}
		tot := rootTotals()
		d := tot.Delegated
		if d.Input != sum.Input || d.Output != sum.Output || d.CachedInput != sum.CachedInput || d.CostPicodollars != sum.CostPicodollars {
			t.Fatalf("resume %d: the root's delegated usage %+v, want the children's %+v", i+1, d, sum)
		}
		if !tot.Uncertain || tot.DelegatedUncertain == 0 {
			t.Fatalf("resume %d: the root is not uncertain though a child's request was in flight: %+v", i+1, tot)
		}
		if tot.Known.Input != tot.Own.Input+sum.Input {
			t.Fatalf("resume %d: known %+v is not own %+v plus the children's", i+1, tot.Known, tot.Own)
		}
	}

	show := x.runOctet(t, "sessions", "show", sid)
	for _, p := range children {
		if id := strings.TrimSuffix(filepath.Base(p), ".jsonl"); !strings.Contains(show.stdout, "session "+id) {
			t.Errorf("sessions show of the root does not list child %s:\n%s", id, show.stdout)
		}
	}
	child := strings.TrimSuffix(filepath.Base(children[0]), ".jsonl")
	if r := x.runOctet(t, "sessions", "show", child); r.code != exitOK || !strings.Contains(r.stdout, "session "+child) || !strings.Contains(r.stdout, "of session "+sid) {
		t.Errorf("sessions show <child id>: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := x.runOctet(t, "sessions", "export", child); r.code != exitOK || !strings.Contains(r.stdout, `"kind":"header"`) {
		t.Errorf("sessions export <child id>: exit %d\n%s", r.code, r.stderr)
	}
}

func plusUsage(a, b session.Usage) session.Usage {
	a.Input += b.Input
	a.CachedInput += b.CachedInput
	a.Output += b.Output
	a.Reasoning += b.Reasoning
	a.CostPicodollars += b.CostPicodollars
	return a
}
