package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func req(tool, args string) DispatchRequest {
	return DispatchRequest{Principal: "p", RunID: "r", CallID: "call-1", Tool: tool, Arguments: json.RawMessage(args)}
}

// TestCancelBetweenReservationAndCommitRevokes cancels the run from inside
// a before_tool_call hook: the approved grant is revoked, the tool never
// runs and after_tool_call is not called.
func TestCancelBetweenReservationAndCommitRevokes(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		pt := newProbe("edit", WorkspaceMutation)
		ctx, cancel := context.WithCancel(context.Background())
		var after atomic.Int32
		hook := Hooks{
			BeforeToolCall: func(hctx context.Context, in EffectIntent) error {
				cancel()
				if blocking {
					<-hctx.Done()
					return hctx.Err()
				}
				return nil
			},
			AfterToolCall: func(context.Context, EffectIntent, Result) { after.Add(1) },
		}
		b := NewBroker(BrokerConfig{Approver: approveAll(), Hooks: []Hooks{hook}})
		adm, _ := b.Admit(ctx, mustHost(t, pt), req("edit", `{}`), DispatchObserver{})
		if adm == nil || adm.grant == nil || b.Grants().Outstanding() != 1 {
			t.Fatal("expected an approved admission holding a grant")
		}
		g := *adm.grant
		res, d := adm.Execute(ctx)
		if d.Decision != DecisionDenied || d.Reason != ReasonCancelled || !res.IsError {
			t.Fatalf("blocking=%v: decision %+v", blocking, d)
		}
		if pt.executed.Load() != 0 || after.Load() != 0 {
			t.Fatalf("blocking=%v: executed %d, after hooks %d", blocking, pt.executed.Load(), after.Load())
		}
		if b.Grants().Outstanding() != 0 || !errors.Is(b.Grants().Consume(g, adm.Digest()), ErrGrantInvalid) {
			t.Fatalf("blocking=%v: grant not revoked", blocking)
		}
	}
}

// TestCancelAfterCommitDoesNotRestore: once committed the effect runs (the
// tool observes cancellation itself), after_tool_call runs, and the grant
// stays consumed.
func TestCancelAfterCommitDoesNotRestore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var toolSawCancel atomic.Bool
	ct := &ctxTool{probeTool: newProbe("edit", WorkspaceMutation), run: func(c context.Context) {
		cancel()
		<-c.Done()
		toolSawCancel.Store(true)
	}}
	hr := &hookRecorder{}
	b := NewBroker(BrokerConfig{Approver: approveAll(), Hooks: []Hooks{hr.hooks()}})
	_, d := b.Dispatch(ctx, mustHost(t, ct), req("edit", `{}`), DispatchObserver{})
	if d.Decision != DecisionAllowed || !toolSawCancel.Load() || hr.after.Load() != 1 {
		t.Fatalf("decision %+v, tool saw cancel %v, after %d", d, toolSawCancel.Load(), hr.after.Load())
	}
	if b.Grants().Outstanding() != 0 {
		t.Fatal("grant restored after commit")
	}
}

type ctxTool struct {
	*probeTool
	run func(ctx context.Context)
}

func (t *ctxTool) Execute(ctx context.Context, inv Invocation) (Result, error) {
	t.run(ctx)
	return t.probeTool.Execute(ctx, inv)
}

func TestRevokeBeforeExecute(t *testing.T) {
	pt := newProbe("edit", WorkspaceMutation)
	var decisions []ToolPolicyDecision
	b := NewBroker(BrokerConfig{Approver: approveAll()})
	adm, d0 := b.Admit(context.Background(), mustHost(t, pt), req("edit", `{}`),
		DispatchObserver{OnDecision: func(d ToolPolicyDecision) { decisions = append(decisions, d) }})
	if adm == nil || d0.Final() {
		t.Fatalf("admit: %+v", d0)
	}
	d := adm.Revoke()
	if d.Reason != ReasonCancelled || adm.Revoke().Final() {
		t.Fatalf("revoke: %+v", d)
	}
	res, d2 := adm.Execute(context.Background())
	if d2.Reason != ReasonCommitDenied || !res.IsError || pt.executed.Load() != 0 {
		t.Fatalf("execute after revoke: %+v", d2)
	}
	if len(decisions) != 1 || decisions[0].Reason != ReasonCancelled {
		t.Fatalf("OnDecision calls %+v, want one cancelled", decisions)
	}
	if b.Grants().Outstanding() != 0 {
		t.Fatal("revoked grant still outstanding")
	}
}

func TestExecuteOnlyOnce(t *testing.T) {
	pt := newProbe("read", Pure)
	b := NewBroker(BrokerConfig{})
	adm, _ := b.Admit(context.Background(), mustHost(t, pt), req("read", `{}`), DispatchObserver{})
	if _, d := adm.Execute(context.Background()); d.Decision != DecisionAllowed {
		t.Fatal(d)
	}
	if _, d := adm.Execute(context.Background()); d.Reason != ReasonCommitDenied {
		t.Fatal(d)
	}
	if adm.Revoke().Final() || pt.executed.Load() != 1 {
		t.Fatal("second execute or revoke changed a committed admission")
	}
}

// TestExpiredGrantDeniesCommit: a grant that expires between approval and
// commit (a slow hook) fails the commit; nothing runs.
func TestExpiredGrantDeniesCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pt := newProbe("edit", WorkspaceMutation)
		hr := &hookRecorder{}
		slow := Hooks{BeforeToolCall: func(context.Context, EffectIntent) error { time.Sleep(2 * time.Second); return nil }}
		b := NewBroker(BrokerConfig{Approver: approveAll(), GrantTTL: time.Second, Hooks: []Hooks{slow, hr.hooks()}})
		_, d := b.Dispatch(context.Background(), mustHost(t, pt), req("edit", `{}`), DispatchObserver{})
		if d.Reason != ReasonCommitDenied || pt.executed.Load() != 0 || hr.after.Load() != 0 {
			t.Fatalf("decision %+v, executed %d, after %d", d, pt.executed.Load(), hr.after.Load())
		}
	})
}

func TestHooksRunInOrderAndStopAtFirstDenial(t *testing.T) {
	var order []string
	mk := func(name string, deny bool) Hooks {
		return Hooks{
			BeforeToolCall: func(context.Context, EffectIntent) error {
				order = append(order, name)
				if deny {
					return errors.New("no")
				}
				return nil
			},
			AfterToolCall: func(context.Context, EffectIntent, Result) { order = append(order, "after-"+name) },
		}
	}
	pt := newProbe("read", Pure)
	b := NewBroker(BrokerConfig{Hooks: []Hooks{mk("a", false), mk("b", true), mk("c", false)}})
	_, d := b.Dispatch(context.Background(), mustHost(t, pt), req("read", `{}`), DispatchObserver{})
	if d.Reason != ReasonHookDenied || strings.Join(order, ",") != "a,b" || pt.executed.Load() != 0 {
		t.Fatalf("decision %+v order %v", d, order)
	}
	order = nil
	b = NewBroker(BrokerConfig{Hooks: []Hooks{mk("a", false), mk("c", false)}})
	_, d = b.Dispatch(context.Background(), mustHost(t, pt), req("read", `{}`), DispatchObserver{})
	if d.Decision != DecisionAllowed || strings.Join(order, ",") != "a,c,after-a,after-c" {
		t.Fatalf("decision %+v order %v", d, order)
	}
}

// TestHookSeesIntentBeforeTool: hooks receive the canonical intent whose
// digest the approver saw.
func TestHookSeesIntentBeforeTool(t *testing.T) {
	pt := newProbe("edit", WorkspaceMutation)
	ap := approveAll()
	var seen EffectIntent
	b := NewBroker(BrokerConfig{Approver: ap, Hooks: []Hooks{{BeforeToolCall: func(_ context.Context, in EffectIntent) error {
		seen = in
		if pt.executed.Load() != 0 {
			t.Error("tool ran before the hook")
		}
		return nil
	}}}})
	host := mustHost(t, pt)
	b.Dispatch(context.Background(), host, req("edit", ` {"x": "v"} `), DispatchObserver{})
	if seen.Digest() != ap.requests()[0].Digest || string(seen.Arguments) != `{"x":"v"}` || seen.CatalogGeneration != host.Generation() || seen.PolicyVersion != b.PolicyVersion() {
		t.Fatalf("hook intent %+v", seen)
	}
}

// TestDecisionReportedBeforeToolRuns: OnDecision("allowed") fires after
// commit and before Execute, so tool_policy_decision precedes output.
func TestDecisionReportedBeforeToolRuns(t *testing.T) {
	var events []string
	ct := &ctxTool{probeTool: newProbe("read", Pure), run: func(context.Context) { events = append(events, "execute") }}
	b := NewBroker(BrokerConfig{Hooks: []Hooks{{BeforeToolCall: func(context.Context, EffectIntent) error {
		events = append(events, "hook")
		return nil
	}}}})
	res, _ := b.Dispatch(context.Background(), mustHost(t, ct), req("read", `{}`), DispatchObserver{
		OnDecision: func(d ToolPolicyDecision) { events = append(events, "decision:"+d.Decision) },
		OnProgress: func(s string) { events = append(events, "progress:"+s) },
	})
	if got := strings.Join(events, ","); got != "hook,decision:allowed,execute,progress:progress" || res.Text != "ok" {
		t.Fatalf("events %s", got)
	}
}

type panicTool struct {
	*probeTool
	where string
}

func (t *panicTool) Classify(args json.RawMessage) (Effect, error) {
	if t.where == "classify" {
		panic("classify bug")
	}
	return t.probeTool.Classify(args)
}

func (t *panicTool) Execute(ctx context.Context, inv Invocation) (Result, error) {
	if t.where == "execute" {
		panic("execute bug SECRET")
	}
	return t.probeTool.Execute(ctx, inv)
}

func TestPanicsFailClosed(t *testing.T) {
	b := NewBroker(BrokerConfig{})
	_, d := b.Dispatch(context.Background(), mustHost(t, &panicTool{newProbe("t", Pure), "classify"}), req("t", `{}`), DispatchObserver{})
	if d.Reason != ReasonInvalidArguments {
		t.Fatalf("classify panic: %+v", d)
	}
	res, d := b.Dispatch(context.Background(), mustHost(t, &panicTool{newProbe("t", Pure), "execute"}), req("t", `{}`), DispatchObserver{})
	if d.Decision != DecisionAllowed || !res.IsError || strings.Contains(res.Text, "SECRET") {
		t.Fatalf("execute panic: %+v %+v", d, res)
	}
	hb := NewBroker(BrokerConfig{Hooks: []Hooks{{
		BeforeToolCall: func(context.Context, EffectIntent) error { panic("hook bug") },
	}}})
	pt := newProbe("t", Pure)
	_, d = hb.Dispatch(context.Background(), mustHost(t, pt), req("t", `{}`), DispatchObserver{})
	if d.Reason != ReasonHookDenied || pt.executed.Load() != 0 {
		t.Fatalf("hook panic: %+v", d)
	}
	ab := NewBroker(BrokerConfig{Logger: slog.New(slog.DiscardHandler), Hooks: []Hooks{{
		AfterToolCall: func(context.Context, EffectIntent, Result) { panic("after bug") },
	}}})
	if res, d := ab.Dispatch(context.Background(), mustHost(t, newProbe("t", Pure)), req("t", `{}`), DispatchObserver{}); d.Decision != DecisionAllowed || res.Text != "ok" {
		t.Fatalf("after panic: %+v", d)
	}
}

type errTool struct{ *probeTool }

func (t *errTool) Execute(context.Context, Invocation) (Result, error) {
	return Result{}, errors.New(strings.Repeat("e", 5000))
}

func TestResultBounds(t *testing.T) {
	pt := newProbe("read", Pure)
	pt.text = strings.Repeat("é", 40_000) // 80,000 bytes
	b := NewBroker(BrokerConfig{})
	res, _ := b.Dispatch(context.Background(), mustHost(t, pt), req("read", `{}`), DispatchObserver{})
	if len(res.Text) > DefaultMaxResultBytes+100 || !strings.Contains(res.Text, "[output truncated: ") || res.Details["result_truncated"] != true {
		t.Fatalf("result not bounded: %d bytes, details %v", len(res.Text), res.Details)
	}
	if !strings.HasPrefix(res.Text, strings.Repeat("é", 100)) || strings.ContainsRune(res.Text, '\uFFFD') {
		t.Fatal("truncation split a rune")
	}
	small := NewBroker(BrokerConfig{MaxResultBytes: 10})
	res, _ = small.Dispatch(context.Background(), mustHost(t, &errTool{newProbe("t", Pure)}), req("t", `{}`), DispatchObserver{})
	if !res.IsError || res.Text != "Tool faile" {
		t.Fatalf("tool error result %q", res.Text)
	}
}

func TestCapabilityGates(t *testing.T) {
	off := DefaultToolPolicy(UnsafeHost, ShellSystemBash)
	off.AllowShell = Setting[bool]{false, SourceFlag}
	b := NewBroker(BrokerConfig{Policy: UnsafeHost, EffectivePolicy: off})
	sp := newShellProbe("bash")
	_, d := b.Dispatch(context.Background(), mustHost(t, sp), req("bash", `{"command":"ls"}`), DispatchObserver{})
	if d.Reason != ReasonCapabilityDisabled || sp.executed.Load() != 0 {
		t.Fatalf("allow_shell=false: %+v", d)
	}
	native := newProbe("proc", HostProcess)
	if _, d := b.Dispatch(context.Background(), mustHost(t, native), req("proc", `{}`), DispatchObserver{}); d.Decision != DecisionAllowed {
		t.Fatalf("allow_shell=false must not gate a native process under unsafe_host: %+v", d)
	}
	off.AllowProcess = Setting[bool]{false, SourceConfig}
	b = NewBroker(BrokerConfig{Policy: UnsafeHost, EffectivePolicy: off})
	if _, d := b.Dispatch(context.Background(), mustHost(t, native), req("proc", `{}`), DispatchObserver{}); d.Reason != ReasonCapabilityDisabled {
		t.Fatalf("allow_process=false: %+v", d)
	}
}

type previewTool struct {
	*probeTool
	err error
}

func (t *previewTool) Preview(_ context.Context, args json.RawMessage) (Preview, error) {
	return Preview{Title: "Edit a.go", Detail: "detail", Diff: "--- a\n+++ b\n"}, t.err
}

func TestConfirmUsesPreview(t *testing.T) {
	ap := approveAll()
	b := NewBroker(BrokerConfig{Approver: ap})
	b.Dispatch(context.Background(), mustHost(t, &previewTool{probeTool: newProbe("edit", WorkspaceMutation)}), req("edit", `{"x":"y"}`), DispatchObserver{})
	if r := ap.requests()[0]; r.Title != "Edit a.go" || r.Detail != "detail" || r.Diff != "--- a\n+++ b\n" {
		t.Fatalf("preview not used: %+v", r)
	}
	b.Dispatch(context.Background(), mustHost(t, &previewTool{probeTool: newProbe("edit", WorkspaceMutation), err: errors.New("x")}), req("edit", `{"x":"y"}`), DispatchObserver{})
	if r := ap.requests()[1]; r.Title != "edit (workspace_mutation)" || r.Detail != `{"x":"y"}` || r.Diff != "" {
		t.Fatalf("fallback preview: %+v", r)
	}
}

func TestAdmissionParallel(t *testing.T) {
	b := NewBroker(BrokerConfig{Policy: UnsafeHost})
	for _, tc := range []struct {
		eff  Effect
		conc Concurrency
		want bool
	}{{WorkspaceRead, Parallel, true}, {Pure, Parallel, true}, {HostRead, Parallel, true}, {WorkspaceRead, Sequential, false}, {HostProcess, Parallel, false}, {WorkspaceMutation, Parallel, false}} {
		pt := newProbe("t", tc.eff)
		pt.concurrency = tc.conc
		adm, _ := b.Admit(context.Background(), mustHost(t, pt), req("t", `{}`), DispatchObserver{})
		if adm.Parallel() != tc.want || adm.Effect() != tc.eff || adm.Tool() != Tool(pt) || adm.CallID() != "call-1" {
			t.Errorf("%s/%d: parallel %v", tc.eff, tc.conc, adm.Parallel())
		}
		adm.Revoke()
	}
	for _, tc := range []struct {
		eff  Effect
		rs   ReplaySafety
		want bool
	}{{Pure, ReplaySafe, true}, {WorkspaceRead, ReplaySafe, true}, {HostRead, ReplaySafe, false}, {WorkspaceRead, ReplayUnsafe, false}, {WorkspaceMutation, ReplaySafe, false}} {
		rt := &replayTool{newProbe("t", tc.eff), tc.rs}
		adm, _ := b.Admit(context.Background(), mustHost(t, rt), req("t", `{}`), DispatchObserver{})
		if adm.ReplaySafe() != tc.want {
			t.Errorf("%s/%d: replay safe %v", tc.eff, tc.rs, adm.ReplaySafe())
		}
		adm.Revoke()
	}
}

type replayTool struct {
	*probeTool
	rs ReplaySafety
}

func (t *replayTool) ReplaySafety() ReplaySafety { return t.rs }

func TestDenialTextsAreStatic(t *testing.T) {
	reasons := []string{ReasonUnknownTool, ReasonInvalidArguments, ReasonUnknownEffect, ReasonPolicyDenied,
		ReasonCapabilityDisabled, ReasonApprovalDenied, ReasonApprovalExpired, ReasonApprovalUnavailable,
		ReasonHookDenied, ReasonCommitDenied, ReasonCancelled, "made-up <script>"}
	for _, r := range reasons {
		txt := DenialText(r)
		low := strings.ToLower(txt)
		for _, banned := range []string{"hook", "digest", "grant", "token", "parser", "argument:", "broker", "approver", "{", "<", "_"} {
			if strings.Contains(low, banned) {
				t.Errorf("denial text for %s mentions %q: %q", r, banned, txt)
			}
		}
		if len(txt) > 100 {
			t.Errorf("denial text for %s too long", r)
		}
		res := ToolPolicyDecision{Decision: DecisionDenied, Reason: r}.DenialResult()
		if !res.IsError || res.Text != txt {
			t.Errorf("DenialResult(%s) = %+v", r, res)
		}
	}
}

func TestEvidenceJSON(t *testing.T) {
	e := DefaultToolPolicy(ControlledBashApproval, ShellPathBash)
	e.ShellPath.Source = SourceFlag
	b, err := json.Marshal(ToolPolicyDecision{CallID: "c", Decision: DecisionDenied, Reason: ReasonHookDenied, Effect: HostProcess, EffectiveToolPolicy: e})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["callId"] != "c" || got["decision"] != "denied" || got["reason"] != "secondary_hook_denied" || got["effect"] != "host_process" {
		t.Fatalf("decision json %s", b)
	}
	pol := got["effectiveToolPolicy"].(map[string]any)
	want := []string{"effect_policy", "workspace_confinement", "allow_edit", "allow_write", "allow_process", "allow_shell", "shell_path", "bash_timeout_ms", "max_output_bytes", "allow_remote_read", "sandbox"}
	if len(pol) != len(want) {
		t.Fatalf("policy keys %v", pol)
	}
	for _, k := range want {
		s, ok := pol[k].(map[string]any)
		if !ok || len(s) != 2 || s["source"] == nil {
			t.Fatalf("%s = %v, want {value, source}", k, pol[k])
		}
	}
	if pol["effect_policy"].(map[string]any)["value"] != "controlled_bash_approval" ||
		pol["shell_path"].(map[string]any)["value"].(map[string]any)["selection"] != "path_bash" ||
		pol["shell_path"].(map[string]any)["source"] != "flag" ||
		pol["bash_timeout_ms"].(map[string]any)["value"] != float64(120000) ||
		pol["sandbox"].(map[string]any)["value"].(map[string]any)["profile"] != "workspace-write" ||
		pol["sandbox"].(map[string]any)["value"].(map[string]any)["mechanism"] == nil {
		t.Fatalf("policy json %s", b)
	}
	// A path smuggled into the selection is never emitted.
	e.ShellPath.Value.Selection = "/usr/local/bin/zsh"
	b, _ = json.Marshal(e)
	if strings.Contains(string(b), "zsh") || !strings.Contains(string(b), `"shell_path":{"value":{"selection":"unavailable"}`) {
		t.Fatalf("shell path leaked: %s", b)
	}
	// Evidence always carries the broker's own policy.
	br := NewBroker(BrokerConfig{Policy: UnsafeHost, EffectivePolicy: DefaultToolPolicy(Controlled, ShellSystemBash)})
	if br.EffectiveToolPolicy().EffectPolicy.Value != UnsafeHost {
		t.Fatal("effect_policy evidence disagrees with the broker")
	}
	if NewBroker(BrokerConfig{Policy: Controlled}).PolicyVersion() == NewBroker(BrokerConfig{Policy: UnsafeHost}).PolicyVersion() {
		t.Fatal("policy version does not distinguish policies")
	}
}

func TestParsePolicy(t *testing.T) {
	for s, want := range map[string]Policy{"controlled": Controlled, "controlled_bash_approval": ControlledBashApproval, " Unsafe_Host ": UnsafeHost} {
		if p, err := ParsePolicy(s); err != nil || p != want {
			t.Errorf("ParsePolicy(%q) = %v, %v", s, p, err)
		}
	}
	for _, s := range []string{"", "yolo", "unsafe", "safe"} {
		if _, err := ParsePolicy(s); err == nil || !strings.Contains(err.Error(), "unsafe_host") {
			t.Errorf("ParsePolicy(%q) err = %v", s, err)
		}
	}
	var p Policy
	if err := json.Unmarshal([]byte(`"unsafe_host"`), &p); err != nil || p != UnsafeHost {
		t.Fatal(p, err)
	}
	if b, _ := json.Marshal(ControlledBashApproval); string(b) != `"controlled_bash_approval"` {
		t.Fatal(string(b))
	}
	if _, err := json.Marshal(Policy(9)); err == nil {
		t.Fatal("invalid policy marshalled")
	}
}

// TestRealBashThroughBroker drives the built-in bash tool: under
// Controlled a read-only command is auto-approved and runs, a mutating one
// asks and, denied, leaves the file in place; ControlledBashApproval asks
// even for the read-only one.
func TestRealBashThroughBroker(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no shell")
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/keep.txt", []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bash, err := NewBash(Config{Root: dir, SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer bash.Close()
	host := mustHost(t, bash)
	deny := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: false, Digest: r.Digest}, nil
	}}
	b := NewBroker(BrokerConfig{Policy: Controlled, Approver: deny})
	// The bash tool runs in its configured root only when it says so; use
	// a path-free read-only command.
	res, d := b.Dispatch(context.Background(), host, req("bash", `{"command":"echo read-only ok"}`), DispatchObserver{})
	if d.Reason != ReasonReadOnlyCommand || !strings.Contains(res.Text, "read-only ok") || deny.count() != 0 {
		t.Fatalf("read-only: %+v %q", d, res.Text)
	}
	_, d = b.Dispatch(context.Background(), host, req("bash", `{"command":"rm -f keep.txt"}`), DispatchObserver{})
	if d.Reason != ReasonApprovalDenied || deny.count() != 1 {
		t.Fatalf("mutating: %+v", d)
	}
	if r := deny.requests()[0]; !strings.Contains(r.Detail, "rm -f keep.txt") {
		t.Fatalf("prompt does not show the command: %+v", r)
	}
	if _, err := os.Stat(dir + "/keep.txt"); err != nil {
		t.Fatal("denied command ran")
	}
	safe := NewBroker(BrokerConfig{Policy: ControlledBashApproval, Approver: deny})
	_, d = safe.Dispatch(context.Background(), host, req("bash", `{"command":"echo read-only ok"}`), DispatchObserver{})
	if d.Reason != ReasonApprovalDenied || deny.count() != 2 {
		t.Fatalf("safe mode read-only: %+v", d)
	}
}

// TestReadOnlyBashNeedsFixedCommandLookup: with an empty (current
// directory) PATH entry a repository file named "ls" would be the program
// an auto-approved "ls" runs, so Controlled asks instead; the same for a
// relative BASH_ENV, which the shell sources first.
func TestReadOnlyBashNeedsFixedCommandLookup(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/ls", []byte("#!/bin/sh\ntouch pwned\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bash, err := NewBash(Config{Root: dir, SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer bash.Close()
	host := mustHost(t, bash)
	deny := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: false, Digest: r.Digest}, nil
	}}
	b := NewBroker(BrokerConfig{Policy: Controlled, Approver: deny})
	path := os.Getenv("PATH")
	for i, env := range []map[string]string{
		{"PATH": ":" + path},
		{"PATH": path + ":."},
		{"PATH": "bin:" + path},
		{"BASH_ENV": "setup.sh"},
		{"ENV": "./setup.sh"},
	} {
		t.Run(fmt.Sprint(env), func(t *testing.T) {
			for k, v := range env {
				t.Setenv(k, v)
			}
			_, d := b.Dispatch(context.Background(), host, req("bash", `{"command":"ls"}`), DispatchObserver{})
			if d.Reason != ReasonApprovalDenied || deny.count() != i+1 {
				t.Errorf("decision %+v after %d prompts", d, deny.count())
			}
			if _, err := os.Stat(dir + "/pwned"); err == nil {
				t.Fatal("the workspace's ls ran")
			}
		})
	}
	t.Setenv("BASH_ENV", "/etc/octet-test-not-there")
	if _, d := b.Dispatch(context.Background(), host, req("bash", `{"command":"ls"}`), DispatchObserver{}); d.Reason != ReasonReadOnlyCommand {
		t.Errorf("absolute PATH and BASH_ENV: %+v", d)
	}
}

// TestApproverIgnoringContextCannotHang: an approver that never returns
// does not hold the call past the approval deadline or a cancellation.
func TestApproverIgnoringContextCannotHang(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	defer close(release) // runs before VerifyNone: the stuck approvers return
	stuck := &scriptedApprover{answer: func(context.Context, ConfirmRequest) (Approval, error) {
		<-release
		return Approval{}, errors.New("late")
	}}
	pt := newProbe("edit", WorkspaceMutation)
	b := NewBroker(BrokerConfig{Approver: stuck, ApprovalTimeout: 20 * time.Millisecond})
	_, d := b.Dispatch(context.Background(), mustHost(t, pt), req("edit", `{}`), DispatchObserver{})
	if d.Reason != ReasonApprovalExpired {
		t.Fatalf("deadline: %+v", d)
	}
	b = NewBroker(BrokerConfig{Approver: stuck})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, d = b.Dispatch(ctx, mustHost(t, pt), req("edit", `{}`), DispatchObserver{})
	if d.Reason != ReasonCancelled || pt.executed.Load() != 0 {
		t.Fatalf("cancel: %+v", d)
	}
}

// TestCatalogChangeBeforeCommitDenies: an admission is bound to the catalog
// generation it was admitted in.
func TestCatalogChangeBeforeCommitDenies(t *testing.T) {
	pt := newProbe("edit", WorkspaceMutation)
	host := mustHost(t, pt)
	b := NewBroker(BrokerConfig{Approver: approveAll()})
	adm, _ := b.Admit(context.Background(), host, req("edit", `{}`), DispatchObserver{})
	if err := host.Register(newProbe("late", Pure)); err != nil {
		t.Fatal(err)
	}
	if _, d := adm.Execute(context.Background()); d.Reason != ReasonCommitDenied || pt.executed.Load() != 0 {
		t.Fatalf("decision %+v", d)
	}
	if b.Grants().Outstanding() != 0 {
		t.Fatal("grant not revoked")
	}
}

// FuzzDispatch drives arbitrary argument bytes through the whole pipeline:
// it never panics, a denial never reaches hooks or the tool, and whatever
// runs received exactly the canonical arguments the hook saw.
func FuzzDispatch(f *testing.F) {
	for _, s := range []string{`{}`, `{"x":"a"}`, `{"x":1}`, `{"invalid":true}`, `{"x":"a","x":"b"}`, `[]`, ``, `{"n":3,"x":"\u00e9"}`} {
		f.Add([]byte(s), uint8(WorkspaceRead))
	}
	f.Fuzz(func(t *testing.T, raw []byte, effByte uint8) {
		eff := Effect(int(effByte) % len(effectNames))
		pt := newProbe("probe", eff)
		var hookArgs json.RawMessage
		hooks := Hooks{BeforeToolCall: func(_ context.Context, in EffectIntent) error {
			hookArgs = in.Arguments
			return nil
		}}
		b := NewBroker(BrokerConfig{Policy: UnsafeHost, Hooks: []Hooks{hooks}})
		_, d := b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "probe", Arguments: raw}, DispatchObserver{})
		if d.Denied() {
			if hookArgs != nil || pt.executed.Load() != 0 {
				t.Fatalf("denied (%s) call reached the hook or tool", d.Reason)
			}
			return
		}
		canon, err := CanonicalArguments(raw)
		if err != nil || string(pt.lastArgs) != string(canon) || string(hookArgs) != string(canon) || eff == Unknown {
			t.Fatalf("ran with %q (hook %q), canonical %q, err %v, effect %s", pt.lastArgs, hookArgs, canon, err, eff)
		}
	})
}
