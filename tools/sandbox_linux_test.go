//go:build linux

package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/proc"
	"github.com/octet-agent/octet/internal/sandbox"
)

// requireSandbox skips when this host cannot show the sandbox's
// refusals (no Landlock, or no no-network filter).
func requireSandbox(t testing.TB) sandbox.Status {
	t.Helper()
	st := sandbox.Probe()
	if st.Mechanism != "landlock" || !st.Network {
		t.Skipf("no full sandbox here: %s", st)
	}
	return st
}

// sandboxedBroker is a broker under p whose sandbox setting is profile
// (from config).
func sandboxedBroker(p Policy, profile SandboxProfile, ap Approver) *Broker {
	eff := DefaultToolPolicy(p, ShellSystemBash)
	if profile != "" {
		eff.Sandbox = HostSandbox(profile, SourceConfig)
	}
	return NewBroker(BrokerConfig{Policy: p, Approver: ap, EffectivePolicy: eff})
}

// homeSecret writes a secret outside the workspace (a stand-in for
// $HOME) and returns its path.
func homeSecret(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "id_ed25519")
	writeTestFile(t, p, "HOME-SECRET\n")
	return p
}

// TestSandboxProfileWhen checks which profile runs when, with real
// commands: under controlled an auto-approved read runs read-only and an
// approved command workspace-write; under controlled_bash_approval
// workspace-write; under unsafe_host none unless the config sets one.
// Each call tries to read a secret outside and to write the workspace;
// the outcome must match the profile the decision names.
func TestSandboxProfileWhen(t *testing.T) {
	requireSandbox(t)
	secret := homeSecret(t)
	for _, c := range []struct {
		name    string
		policy  Policy
		config  SandboxProfile
		command string
		want    string // the decision's sandbox
		reason  string
	}{
		{"controlled auto read", Controlled, "", "cat r", "read-only, no network", ReasonReadOnlyCommand},
		{"controlled approved", Controlled, "", "cat " + secret + "; echo x > w", "workspace-write, no network", ReasonApproved},
		{"controlled_bash_approval", ControlledBashApproval, "", "cat " + secret + "; echo x > w", "workspace-write, no network", ReasonApproved},
		{"unsafe_host default", UnsafeHost, "", "cat " + secret + "; echo x > w", "none", ReasonPolicyAdmitted},
		{"unsafe_host with sandbox", UnsafeHost, SandboxWorkspaceWrite, "cat " + secret + "; echo x > w", "workspace-write, no network", ReasonPolicyAdmitted},
		{"unsafe_host read-only", UnsafeHost, SandboxReadOnly, "cat " + secret + "; echo x > w", "read-only, no network", ReasonPolicyAdmitted},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			writeTestFile(t, filepath.Join(ws, "r"), "inside\n")
			b := newBash(t, Config{Root: ws})
			br := sandboxedBroker(c.policy, c.config, approveAll())
			res, d := br.Dispatch(t.Context(), mustHost(t, b), DispatchRequest{CallID: "c1", Tool: "bash",
				Arguments: argsJSON(t, map[string]any{"command": c.command})}, DispatchObserver{})
			if d.Reason != c.reason || d.Sandbox != c.want {
				t.Fatalf("decision %s, sandbox %q; want %s, %q", d.Reason, d.Sandbox, c.reason, c.want)
			}
			if res.Details["sandbox"] != c.want {
				t.Errorf("result details sandbox %v, want %q", res.Details["sandbox"], c.want)
			}
			leaked := strings.Contains(res.Text, "HOME-SECRET")
			if leaked != (c.want == "none") {
				t.Errorf("read the secret outside: %v under %q\n%s", leaked, c.want, res.Text)
			}
			_, err := os.Stat(filepath.Join(ws, "w"))
			wrote := err == nil
			if wantWrite := c.want != "read-only, no network" && c.reason != ReasonReadOnlyCommand; wrote != wantWrite {
				t.Errorf("wrote the workspace: %v, want %v\n%s", wrote, wantWrite, res.Text)
			}
			if c.want != "none" && !strings.Contains(res.Text, "[sandbox: "+c.want+"]") {
				t.Errorf("result does not say the sandbox:\n%s", res.Text)
			}
		})
	}
}

// TestSandboxRefusalExplained: a command the sandbox refuses gets a
// result that says so and names the escalation.
func TestSandboxRefusalExplained(t *testing.T) {
	requireSandbox(t)
	secret := homeSecret(t)
	b := newBash(t, Config{})
	br := sandboxedBroker(ControlledBashApproval, "", approveAll())
	res, _ := br.Dispatch(t.Context(), mustHost(t, b), DispatchRequest{CallID: "c1", Tool: "bash",
		Arguments: argsJSON(t, map[string]any{"command": "cat " + secret})}, DispatchObserver{})
	if !res.IsError || !strings.Contains(res.Text, "Permission denied") {
		t.Fatalf("the read was not refused:\n%s", res.Text)
	}
	for _, want := range []string{"may be the OS sandbox refusing access", "workspace-write sandbox", `"sandbox_escalation"`, `"to": "none"`, "approve"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("result lacks %q:\n%s", want, res.Text)
		}
	}
	if res.Details["sandbox_refusal_suspected"] != true {
		t.Errorf("details %v", res.Details)
	}
}

// TestSandboxEscalation: a call asking to run without the sandbox runs
// unconfined only after an approval whose title showed it plainly and
// whose detail carried the model's reason; a grant for the same command
// in the sandbox does not grant it; under unsafe_host with a configured
// sandbox the escalation still asks.
func TestSandboxEscalation(t *testing.T) {
	requireSandbox(t)
	secret := homeSecret(t)
	command := "cat " + secret
	plain := map[string]any{"command": command}
	escalated := map[string]any{"command": command, "sandbox_escalation": map[string]any{"to": "none", "justification": "needs the deploy key"}}

	t.Run("approved escalation runs unconfined", func(t *testing.T) {
		b := newBash(t, Config{})
		ap := approveAll()
		br := sandboxedBroker(Controlled, "", ap)
		res, d := br.Dispatch(t.Context(), mustHost(t, b), DispatchRequest{CallID: "c1", Tool: "bash", Arguments: argsJSON(t, escalated)}, DispatchObserver{})
		if d.Reason != ReasonApproved || d.Sandbox != "none" || !strings.Contains(res.Text, "HOME-SECRET") {
			t.Fatalf("decision %s %q, result:\n%s", d.Reason, d.Sandbox, res.Text)
		}
		reqs := ap.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d approvals", len(reqs))
		}
		r := reqs[0]
		if !strings.Contains(r.Title, "runs WITHOUT the sandbox: full disk and network access") || r.Sandbox != "none" ||
			!strings.Contains(r.Detail, "The model's reason: needs the deploy key") || !strings.Contains(r.Detail, command) {
			t.Errorf("approval did not show the escalation plainly: %q / %q", r.Title, r.Detail)
		}
	})

	t.Run("denied escalation runs nothing", func(t *testing.T) {
		b := newBash(t, Config{})
		ap := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) { return Approval{Digest: r.Digest}, nil }}
		br := sandboxedBroker(Controlled, "", ap)
		res, d := br.Dispatch(t.Context(), mustHost(t, b), DispatchRequest{CallID: "c1", Tool: "bash", Arguments: argsJSON(t, escalated)}, DispatchObserver{})
		if d.Reason != ReasonApprovalDenied || strings.Contains(res.Text, "HOME-SECRET") {
			t.Fatalf("decision %s, result %s", d.Reason, res.Text)
		}
	})

	t.Run("the sandboxed call's approval does not grant the escalated one", func(t *testing.T) {
		b := newBash(t, Config{})
		host := mustHost(t, b)
		// Learn the digest a person approves for the command in its
		// sandbox (same call id, so the intents differ only by the
		// escalation).
		var sandboxedDigest string
		rec := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
			sandboxedDigest = r.Digest
			return Approval{Approved: true, Digest: r.Digest}, nil
		}}
		br := sandboxedBroker(ControlledBashApproval, "", rec)
		res, d := br.Dispatch(t.Context(), host, DispatchRequest{CallID: "c1", Tool: "bash", Arguments: argsJSON(t, plain)}, DispatchObserver{})
		if d.Sandbox != "workspace-write, no network" || strings.Contains(res.Text, "HOME-SECRET") {
			t.Fatalf("sandboxed call: %q\n%s", d.Sandbox, res.Text)
		}
		// Replay that approval for the escalated call.
		var escalatedDigest string
		replay := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
			escalatedDigest = r.Digest
			return Approval{Approved: true, Digest: sandboxedDigest}, nil
		}}
		br = NewBroker(BrokerConfig{Policy: ControlledBashApproval, Approver: replay, EffectivePolicy: br.EffectiveToolPolicy(), Grants: br.Grants()})
		res, d = br.Dispatch(t.Context(), host, DispatchRequest{CallID: "c1", Tool: "bash", Arguments: argsJSON(t, escalated)}, DispatchObserver{})
		if d.Reason != ReasonApprovalDenied || strings.Contains(res.Text, "HOME-SECRET") {
			t.Fatalf("replayed approval granted the escalation: %s\n%s", d.Reason, res.Text)
		}
		if escalatedDigest == "" || escalatedDigest == sandboxedDigest {
			t.Fatalf("digests: sandboxed %s escalated %s", sandboxedDigest, escalatedDigest)
		}
		// A grant minted for the sandboxed digest cannot be consumed for
		// the escalated one.
		g, err := br.Grants().Mint(sandboxedDigest)
		if err != nil {
			t.Fatal(err)
		}
		if err := br.Grants().Consume(g, escalatedDigest); err == nil {
			t.Fatal("a grant for the sandboxed call was consumed for the escalated one")
		}
	})

	t.Run("unsafe_host with a configured sandbox asks", func(t *testing.T) {
		b := newBash(t, Config{})
		br := sandboxedBroker(UnsafeHost, SandboxWorkspaceWrite, nil)
		res, d := br.Dispatch(t.Context(), mustHost(t, b), DispatchRequest{CallID: "c1", Tool: "bash", Arguments: argsJSON(t, escalated)}, DispatchObserver{})
		if d.Reason != ReasonApprovalUnavailable || strings.Contains(res.Text, "HOME-SECRET") {
			t.Fatalf("escalation admitted without approval: %s\n%s", d.Reason, res.Text)
		}
	})

	t.Run("network escalation", func(t *testing.T) {
		b := newBash(t, Config{})
		ap := approveAll()
		br := sandboxedBroker(Controlled, "", ap)
		args := map[string]any{"command": "cat " + secret, "sandbox_escalation": map[string]any{"to": "network", "justification": "fetch modules"}}
		res, d := br.Dispatch(t.Context(), mustHost(t, b), DispatchRequest{CallID: "c1", Tool: "bash", Arguments: argsJSON(t, args)}, DispatchObserver{})
		if d.Sandbox != "workspace-write, network allowed" || strings.Contains(res.Text, "HOME-SECRET") {
			t.Fatalf("network escalation: %q\n%s", d.Sandbox, res.Text)
		}
		if r := ap.requests(); len(r) != 1 || !strings.Contains(r[0].Title, "WITH network access") {
			t.Fatalf("approval %+v", r)
		}
	})

	t.Run("invalid justification", func(t *testing.T) {
		b := newBash(t, Config{})
		br := sandboxedBroker(Controlled, "", approveAll())
		for _, j := range []string{"", "two\nlines", strings.Repeat("x", 301)} {
			args := map[string]any{"command": "true", "sandbox_escalation": map[string]any{"to": "none", "justification": j}}
			_, d := br.Dispatch(t.Context(), mustHost(t, b), DispatchRequest{CallID: "c1", Tool: "bash", Arguments: argsJSON(t, args)}, DispatchObserver{})
			if d.Reason != ReasonInvalidArguments {
				t.Errorf("justification %q: %s", j, d.Reason)
			}
		}
	})
}

// TestSandboxStandingRuleNeverEscalates: a standing approval granted for
// a command in its sandbox does not admit the same command escalated.
func TestSandboxStandingRuleNeverEscalates(t *testing.T) {
	requireSandbox(t)
	b := newBash(t, Config{})
	host := mustHost(t, b)
	var asked atomic.Int32
	ap := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		asked.Add(1)
		return Approval{Approved: true, Digest: r.Digest, ForSession: r.Scope != nil}, nil
	}}
	br := NewBroker(BrokerConfig{Policy: Controlled, Approver: ap, Rules: &memRules{}, EffectivePolicy: DefaultToolPolicy(Controlled, ShellSystemBash)})
	plain := argsJSON(t, map[string]any{"command": "echo hi > f"})
	if _, d := br.Dispatch(t.Context(), host, DispatchRequest{CallID: "c1", Tool: "bash", Arguments: plain}, DispatchObserver{}); d.Reason != ReasonApprovedForSession {
		t.Fatalf("first call: %s", d.Reason)
	}
	if _, d := br.Dispatch(t.Context(), host, DispatchRequest{CallID: "c2", Tool: "bash", Arguments: plain}, DispatchObserver{}); d.Reason != ReasonSessionRule {
		t.Fatalf("second call: %s", d.Reason)
	}
	esc := argsJSON(t, map[string]any{"command": "echo hi > f", "sandbox_escalation": map[string]any{"to": "none", "justification": "x"}})
	if _, d := br.Dispatch(t.Context(), host, DispatchRequest{CallID: "c3", Tool: "bash", Arguments: esc}, DispatchObserver{}); d.Reason != ReasonApproved || asked.Load() != 2 {
		t.Fatalf("escalated call: %s after %d questions", d.Reason, asked.Load())
	}
}

// BenchmarkBashTrueSandboxed measures what the sandbox adds to one bash
// `true` call through the tool: in the same loop, the call unsandboxed
// (BenchmarkBashTrue's tool path), in the read-only sandbox, and in the
// workspace-write sandbox of a workspace with a .git directory (whose
// read-only mount needs a private mount namespace). read-only-added-µs and
// workspace-write-added-µs are the differences per call in wall time;
// the -cpu- metrics are the same in CPU time (octet's and its children's,
// user and system), which a loaded machine does not inflate.
// Run: go test ./tools -run '^$' -bench BashTrueSandboxed -count 8
func BenchmarkBashTrueSandboxed(b *testing.B) {
	requireSandbox(b)
	ws := b.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		b.Fatal(err)
	}
	bt, err := NewBash(Config{Root: ws, SpillDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer bt.Close()
	raw := json.RawMessage(`{"command":"true"}`)
	invs := []Invocation{
		{Arguments: raw},
		{Arguments: raw, Sandbox: CallSandbox{Profile: SandboxReadOnly}},
		{Arguments: raw, Sandbox: CallSandbox{Profile: SandboxWorkspaceWrite}},
	}
	var took, cpu [3]time.Duration
	for b.Loop() {
		for i, inv := range invs {
			c0 := cpuTime(syscall.RUSAGE_SELF) + cpuTime(syscall.RUSAGE_CHILDREN)
			start := time.Now()
			res, err := bt.Execute(context.Background(), inv)
			took[i] += time.Since(start)
			proc.WaitReaped() // the guard's CPU time counts once it is reaped
			cpu[i] += cpuTime(syscall.RUSAGE_SELF) + cpuTime(syscall.RUSAGE_CHILDREN) - c0
			if err != nil || res.IsError {
				b.Fatalf("true: %v %+v", err, res)
			}
		}
	}
	n := float64(b.N)
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
	b.ReportMetric(us(took[0]), "none-µs/call")
	b.ReportMetric(us(took[1]), "read-only-µs/call")
	b.ReportMetric(us(took[2]), "workspace-write-µs/call")
	b.ReportMetric(us(took[1]-took[0]), "read-only-added-µs")
	b.ReportMetric(us(took[2]-took[0]), "workspace-write-added-µs")
	b.ReportMetric(us(cpu[0]), "none-cpu-µs/call")
	b.ReportMetric(us(cpu[1]-cpu[0]), "read-only-added-cpu-µs")
	b.ReportMetric(us(cpu[2]-cpu[0]), "workspace-write-added-cpu-µs")
}

// TestSandboxFollowsSessionPolicy: a session tightened from full access
// to a controlled policy gets that policy's default sandbox (stated with
// source "session"), and its commands run in it; restoring the launch
// policy restores no sandbox.
func TestSandboxFollowsSessionPolicy(t *testing.T) {
	requireSandbox(t)
	secret := homeSecret(t)
	b := newBash(t, Config{})
	host := mustHost(t, b)
	br := NewBroker(BrokerConfig{Policy: UnsafeHost, Approver: approveAll()})
	if s := br.EffectiveToolPolicy().Sandbox; s.Value.Profile != SandboxNone || s.Source != SourceDefault {
		t.Fatalf("launch sandbox %+v", s)
	}
	eff, err := br.SetPolicy(ControlledBashApproval)
	if err != nil {
		t.Fatal(err)
	}
	if s := eff.Sandbox; s.Value.Profile != SandboxWorkspaceWrite || s.Source != SourceSession {
		t.Fatalf("tightened sandbox %+v", s)
	}
	res, d := br.Dispatch(t.Context(), host, DispatchRequest{CallID: "c1", Tool: "bash", Arguments: argsJSON(t, map[string]any{"command": "cat " + secret})}, DispatchObserver{})
	if d.Sandbox != "workspace-write, no network" || strings.Contains(res.Text, "HOME-SECRET") {
		t.Fatalf("tightened session's command: %q\n%s", d.Sandbox, res.Text)
	}
	if eff, _ := br.SetPolicy(UnsafeHost); eff.Sandbox.Value.Profile != SandboxNone {
		t.Fatalf("restored sandbox %+v", eff.Sandbox)
	}
}

// TestSandboxUnavailableFallsBack: on a host without a sandbox the
// controlled policies still admit (and ask) as before, the commands run
// unconfined, and the decision, the approval and the result say so.
func TestSandboxUnavailableFallsBack(t *testing.T) {
	secret := homeSecret(t)
	eff := DefaultToolPolicy(ControlledBashApproval, ShellSystemBash)
	eff.Sandbox.Value = SandboxValue{Profile: SandboxWorkspaceWrite, Mechanism: "unavailable", Note: "Landlock is not enabled in this kernel"}
	ap := approveAll()
	br := NewBroker(BrokerConfig{Policy: ControlledBashApproval, Approver: ap, EffectivePolicy: eff})
	res, d := br.Dispatch(t.Context(), mustHost(t, newBash(t, Config{})), DispatchRequest{CallID: "c1", Tool: "bash",
		Arguments: argsJSON(t, map[string]any{"command": "cat " + secret})}, DispatchObserver{})
	if d.Reason != ReasonApproved || d.Sandbox != "none" || res.Details["sandbox"] != "none" || !strings.Contains(res.Text, "HOME-SECRET") {
		t.Fatalf("fallback: %s %q %v\n%s", d.Reason, d.Sandbox, res.Details["sandbox"], res.Text)
	}
	if r := ap.requests(); len(r) != 1 || !strings.HasSuffix(r[0].Title, "— no sandbox") {
		t.Fatalf("approval does not say there is no sandbox: %+v", r)
	}
}
