//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"
)

// The tests in this file each guard one rule of the grant store and the
// broker that no other test noticed when it was removed (mutation testing,
// internal/mutants/mutants.txt names the mutants).

// previewProbe is a probeTool that previews its calls as told.
type previewProbe struct {
	*probeTool
	preview func() (Preview, error)
}

func (t previewProbe) Preview(context.Context, json.RawMessage) (Preview, error) { return t.preview() }

// scopedProbe is a probeTool whose calls a standing approval can cover:
// the scope is its "x" argument.
type scopedProbe struct{ *probeTool }

func (t scopedProbe) ApprovalScope(args json.RawMessage) (ApprovalScope, error) {
	var a struct{ X string }
	if err := json.Unmarshal(args, &a); err != nil {
		return ApprovalScope{}, err
	}
	return ApprovalScope{Path: a.X}, nil
}

// TestGrantStoreBound: the store holds at most maxOutstandingGrants live
// grants; expired grants are swept (only they) before a mint is refused.
func TestGrantStoreBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewGrantStore(time.Minute)
		half := maxOutstandingGrants / 2
		for range half {
			if _, err := s.Mint("old"); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Minute) // the first half expires
		live := make([]Grant, 0, maxOutstandingGrants-half)
		for range maxOutstandingGrants - half {
			g, err := s.Mint("live")
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, g)
		}
		if n := s.Outstanding(); n != maxOutstandingGrants {
			t.Fatalf("outstanding = %d, want %d", n, maxOutstandingGrants)
		}
		// Full: the mint sweeps the expired half and succeeds.
		if _, err := s.Mint("next"); err != nil {
			t.Fatalf("mint with expired grants to sweep: %v", err)
		}
		if n, want := s.Outstanding(), maxOutstandingGrants-half+1; n != want {
			t.Fatalf("outstanding after the sweep = %d, want %d", n, want)
		}
		for i, g := range live {
			if err := s.Consume(g, "live"); err != nil {
				t.Fatalf("live grant %d after the sweep: %v", i, err)
			}
		}
		// Full of live grants: the mint is refused, the store stays bounded.
		for s.Outstanding() < maxOutstandingGrants {
			if _, err := s.Mint("fill"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Mint("over"); !errors.Is(err, ErrGrantStoreFull) {
			t.Fatalf("mint into a full store: %v, want ErrGrantStoreFull", err)
		}
		if n := s.Outstanding(); n != maxOutstandingGrants {
			t.Fatalf("outstanding = %d, want %d", n, maxOutstandingGrants)
		}
	})
}

// TestGrantZeroAndGoString: revoking the zero Grant is a no-op, and %#v
// names the type around the redacted value.
func TestGrantZeroAndGoString(t *testing.T) {
	s := NewGrantStore(0)
	s.Revoke(Grant{})
	g, err := s.Mint("d")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%#v", g); got != "tools.Grant{[redacted]}" {
		t.Errorf("%%#v = %q", got)
	}
}

// TestBrokerPolicyValidation: an invalid launch policy is Controlled, and
// SetPolicy refuses an invalid value, keeping the policy.
func TestBrokerPolicyValidation(t *testing.T) {
	b := NewBroker(BrokerConfig{Policy: Policy(99)})
	if b.Policy() != Controlled || b.LaunchPolicy() != Controlled {
		t.Fatalf("policy of an invalid launch value = %v / %v, want controlled", b.Policy(), b.LaunchPolicy())
	}
	u := NewBroker(BrokerConfig{Policy: UnsafeHost})
	for _, p := range []Policy{Policy(-1), Policy(99)} {
		if _, err := u.SetPolicy(p); err == nil {
			t.Errorf("SetPolicy(%d) accepted an invalid value", int(p))
		}
	}
	if u.Policy() != UnsafeHost {
		t.Errorf("policy after refused SetPolicy = %v", u.Policy())
	}
}

// TestAdmitCancelledRunAsksNobody: a call of a cancelled run is denied
// before it is classified or shown to anyone.
func TestAdmitCancelledRunAsksNobody(t *testing.T) {
	pt := newProbe("edit", WorkspaceMutation)
	ap := approveAll()
	b := NewBroker(BrokerConfig{Approver: ap})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	adm, d := b.Admit(ctx, mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "edit"}, DispatchObserver{})
	if adm != nil || d.Reason != ReasonCancelled {
		t.Fatalf("admission %v, decision %+v; want a cancelled denial", adm, d)
	}
	if pt.classified.Load() != 0 || ap.count() != 0 {
		t.Errorf("classified %d times, approver asked %d times", pt.classified.Load(), ap.count())
	}
}

// TestApprovedBindingExecutes: an approval of a preview bound to a state
// (an editor document version) is asked and committed for the bound
// digest, and the call runs.
func TestApprovedBindingExecutes(t *testing.T) {
	pt := previewProbe{newProbe("edit", WorkspaceMutation), func() (Preview, error) {
		return Preview{Title: "edit a.txt", Diff: "-a\n+b\n", Binding: "doc v7"}, nil
	}}
	ap := approveAll()
	b := NewBroker(BrokerConfig{Approver: ap})
	adm, d := b.Admit(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "edit"}, DispatchObserver{})
	if adm == nil {
		t.Fatalf("denied: %+v", d)
	}
	want := BindDigest(adm.Intent().Digest(), "doc v7")
	if got := ap.requests()[0].Digest; got != want || adm.Digest() != want {
		t.Fatalf("asked for %s, admission %s; want the bound digest %s", got, adm.Digest(), want)
	}
	if _, d := adm.Execute(context.Background()); d.Decision != DecisionAllowed || pt.executed.Load() != 1 {
		t.Fatalf("execute: %+v, executed %d", d, pt.executed.Load())
	}
}

// TestConfirmAnswerEdgeCases: an approver's error outranks an approval
// that came with it; an approver that cannot show the call whole is
// preview_too_large; a failed grant mint denies at approval, before the
// tool could run.
func TestConfirmAnswerEdgeCases(t *testing.T) {
	cases := []struct {
		name   string
		answer func(r ConfirmRequest) (Approval, error)
		full   bool // the grant store is full of live grants
		want   string
	}{
		{"approval with an error", func(r ConfirmRequest) (Approval, error) {
			return Approval{Approved: true, Digest: r.Digest}, errors.New("connection lost")
		}, false, ReasonApprovalDenied},
		{"cannot show it whole", func(r ConfirmRequest) (Approval, error) {
			return Approval{}, fmt.Errorf("editor: %w", ErrPreviewTooLarge)
		}, false, ReasonPreviewTooLarge},
		{"grant store full", func(r ConfirmRequest) (Approval, error) {
			return Approval{Approved: true, Digest: r.Digest}, nil
		}, true, ReasonApprovalDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pt := newProbe("edit", WorkspaceMutation)
			grants := NewGrantStore(time.Hour)
			for tc.full && grants.Outstanding() < maxOutstandingGrants {
				if _, err := grants.Mint("other"); err != nil {
					t.Fatal(err)
				}
			}
			ap := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) { return tc.answer(r) }}
			b := NewBroker(BrokerConfig{Approver: ap, Grants: grants})
			adm, d := b.Admit(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "edit"}, DispatchObserver{})
			if adm != nil || d.Decision != DecisionDenied || d.Reason != tc.want {
				t.Fatalf("admission %v, decision %s/%s; want denied/%s", adm, d.Decision, d.Reason, tc.want)
			}
		})
	}
}

// TestStandingApprovalNeedsScope: "approve for session" of a call that has
// no exact scope approves that call once and records no rule.
func TestStandingApprovalNeedsScope(t *testing.T) {
	pt := newProbe("edit", WorkspaceMutation)
	rules := &memRules{}
	ap := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: true, Digest: r.Digest, ForSession: true}, nil
	}}
	b := NewBroker(BrokerConfig{Approver: ap, Rules: rules})
	_, d := b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "edit", Arguments: json.RawMessage(`{"x":"a"}`)}, DispatchObserver{})
	if d.Reason != ReasonApproved || d.RuleID != "" || len(rules.Rules()) != 0 {
		t.Fatalf("decision %s rule %q, %d rules recorded; want approved once, no rule", d.Reason, d.RuleID, len(rules.Rules()))
	}
	if req := ap.requests()[0]; req.Scope != nil {
		t.Errorf("request offered a scope %+v", req.Scope)
	}
}

// TestStandingApprovalUnderTightenedPolicy: a rule granted after the
// session tightened its policy records that policy, and covers the same
// call under it.
func TestStandingApprovalUnderTightenedPolicy(t *testing.T) {
	pt := scopedProbe{newProbe("edit", WorkspaceMutation)}
	rules := &memRules{}
	ap := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: true, Digest: r.Digest, ForSession: true}, nil
	}}
	b := NewBroker(BrokerConfig{Policy: Controlled, Approver: ap, Rules: rules})
	if _, err := b.SetPolicy(ControlledBashApproval); err != nil {
		t.Fatal(err)
	}
	host := mustHost(t, pt)
	call := func(id string) ToolPolicyDecision {
		_, d := b.Dispatch(context.Background(), host, DispatchRequest{CallID: id, Tool: "edit", Arguments: json.RawMessage(`{"x":"a.txt"}`)}, DispatchObserver{})
		return d
	}
	if d := call("c1"); d.Reason != ReasonApprovedForSession {
		t.Fatalf("first call: %+v", d)
	}
	if rs := rules.Rules(); len(rs) != 1 || rs[0].Policy != ControlledBashApproval {
		t.Fatalf("rules = %+v, want one granted under controlled_bash_approval", rs)
	}
	if d := call("c2"); d.Reason != ReasonSessionRule || ap.count() != 1 {
		t.Fatalf("second call: %s after %d prompts; want the standing rule, one prompt", d.Reason, ap.count())
	}
}

// TestPreviewMustBeWhole: a call whose preview cannot be shown whole (the
// Previewer says so, or a field is over its bound) is refused before
// anyone is asked; a title is always one line.
func TestPreviewMustBeWhole(t *testing.T) {
	cases := []struct {
		name string
		p    Preview
		err  error
	}{
		{"previewer refuses", Preview{}, fmt.Errorf("diff: %w", ErrPreviewTooLarge)},
		{"title", Preview{Title: strings.Repeat("t", MaxPreviewTitle+1)}, nil},
		{"detail", Preview{Title: "t", Detail: strings.Repeat("d", MaxPreviewDetail+1)}, nil},
		{"diff", Preview{Title: "t", Diff: strings.Repeat("+", MaxPreviewDiff+1)}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pt := previewProbe{newProbe("edit", WorkspaceMutation), func() (Preview, error) { return tc.p, tc.err }}
			ap := approveAll()
			b := NewBroker(BrokerConfig{Approver: ap})
			_, d := b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "edit"}, DispatchObserver{})
			if d.Reason != ReasonPreviewTooLarge || ap.count() != 0 || pt.executed.Load() != 0 {
				t.Fatalf("decision %s, asked %d, executed %d; want preview_too_large before asking", d.Reason, ap.count(), pt.executed.Load())
			}
		})
	}
	pt := previewProbe{newProbe("edit", WorkspaceMutation), func() (Preview, error) {
		return Preview{Title: "edit a\nb.txt", Detail: "line 1\nline 2"}, nil
	}}
	ap := approveAll()
	b := NewBroker(BrokerConfig{Approver: ap})
	b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "edit"}, DispatchObserver{})
	if req := ap.requests()[0]; strings.Contains(req.Title, "\n") || !strings.Contains(req.Detail, "\n") {
		t.Errorf("title %q must be one line, detail %q keeps its lines", req.Title, req.Detail)
	}
}

// TestApproverIgnoringContextCannotHoldTheRun: an approver that never
// returns cannot hold the call past the approval deadline.
func TestApproverIgnoringContextCannotHoldTheRun(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	pt := newProbe("edit", WorkspaceMutation)
	ap := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		<-block
		return Approval{Approved: true, Digest: r.Digest}, nil
	}}
	b := NewBroker(BrokerConfig{Approver: ap, ApprovalTimeout: 50 * time.Millisecond})
	done := make(chan ToolPolicyDecision, 1)
	go func() {
		_, d := b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "edit"}, DispatchObserver{})
		done <- d
	}()
	select {
	case d := <-done:
		if d.Reason != ReasonApprovalExpired || pt.executed.Load() != 0 {
			t.Fatalf("decision %+v, executed %d", d, pt.executed.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an approver ignoring its context held the call past its deadline")
	}
}

// invShell is a shell-channel probe that records the Invocation it got.
type invShell struct {
	shellProbe
	got chan Invocation
}

func (t invShell) Execute(ctx context.Context, inv Invocation) (Result, error) {
	t.got <- inv
	if inv.Progress != nil {
		inv.Progress("out: SECR") // a prefix of the secret is held back until more comes, or the end
	}
	return Result{Text: "ok"}, nil
}

// TestInvocationReadOnlyAndProgress: only a command auto-approved as
// read-only runs with Invocation.ReadOnly (bash then skips its change
// snapshot), and progress held back by the redactor is flushed when the
// tool returns.
func TestInvocationReadOnlyAndProgress(t *testing.T) {
	for _, c := range []struct {
		command  string
		readOnly bool
	}{{"ls", true}, {"touch x", false}} {
		pt := invShell{newShellProbe("bash"), make(chan Invocation, 1)}
		var progress strings.Builder
		b := NewBroker(BrokerConfig{Approver: approveAll(), Redactor: NewRedactor("SECRET-KEY-VALUE")})
		args := json.RawMessage(fmt.Sprintf(`{"command":%q}`, c.command))
		_, d := b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "bash", Arguments: args},
			DispatchObserver{OnProgress: func(s string) { progress.WriteString(s) }})
		if d.Decision != DecisionAllowed {
			t.Fatalf("%s: %+v", c.command, d)
		}
		if inv := <-pt.got; inv.ReadOnly != c.readOnly {
			t.Errorf("%s: Invocation.ReadOnly = %v, want %v (decision %s)", c.command, inv.ReadOnly, c.readOnly, d.Reason)
		}
		if progress.String() != "out: SECR" {
			t.Errorf("%s: progress = %q, want the whole text flushed", c.command, progress.String())
		}
	}
}

// TestRevokeDuringHooks: a revocation while the before hooks run revokes
// the grant at once, and the call never runs once they pass.
func TestRevokeDuringHooks(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	hook := Hooks{BeforeToolCall: func(context.Context, EffectIntent) error {
		close(entered)
		<-release
		return nil
	}}
	pt := newProbe("edit", WorkspaceMutation)
	b := NewBroker(BrokerConfig{Approver: approveAll(), Hooks: []Hooks{hook}})
	adm, d := b.Admit(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "edit"}, DispatchObserver{})
	if adm == nil {
		t.Fatalf("denied: %+v", d)
	}
	done := make(chan ToolPolicyDecision, 1)
	go func() { _, d := adm.Execute(context.Background()); done <- d }()
	<-entered
	adm.Revoke()
	if n := b.Grants().Outstanding(); n != 0 {
		t.Errorf("%d grants outstanding after Revoke returned", n)
	}
	close(release)
	if d := <-done; d.Decision != DecisionDenied || d.Reason != ReasonCancelled || pt.executed.Load() != 0 {
		t.Fatalf("execute after revoke: %+v, executed %d", d, pt.executed.Load())
	}
}

// TestCancelledBeforeHooks: hooks never see a call whose run was
// cancelled before it executed.
func TestCancelledBeforeHooks(t *testing.T) {
	h := &hookRecorder{}
	pt := newProbe("read", WorkspaceRead)
	b := NewBroker(BrokerConfig{Hooks: []Hooks{h.hooks()}})
	adm, d := b.Admit(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "read"}, DispatchObserver{})
	if adm == nil {
		t.Fatalf("denied: %+v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, d := adm.Execute(ctx); d.Reason != ReasonCancelled || h.before.Load() != 0 || pt.executed.Load() != 0 {
		t.Fatalf("decision %s, hook ran %d times, executed %d", d.Reason, h.before.Load(), pt.executed.Load())
	}
}

// TestDenialOfRuleAdmittedCallNamesNoRule: a rule-admitted call that a
// hook denies is not reported as allowed by the rule.
func TestDenialOfRuleAdmittedCallNamesNoRule(t *testing.T) {
	pt := scopedProbe{newProbe("edit", WorkspaceMutation)}
	rules := &memRules{}
	if _, err := rules.AddRule(StandingRule{Tool: "edit", Effect: WorkspaceMutation, Scope: ApprovalScope{Path: "a"}, Policy: Controlled}); err != nil {
		t.Fatal(err)
	}
	b := NewBroker(BrokerConfig{Approver: approveAll(), Rules: rules, Hooks: []Hooks{(&hookRecorder{deny: true}).hooks()}})
	_, d := b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "edit", Arguments: json.RawMessage(`{"x":"a"}`)}, DispatchObserver{})
	if d.Decision != DecisionDenied || d.Reason != ReasonHookDenied || d.RuleID != "" {
		t.Fatalf("decision %+v; want a hook denial naming no rule", d)
	}
}

// TestOutOfRangeEffectIsUnknown: a classification outside the known
// effects is Unknown, and denied as such.
func TestOutOfRangeEffectIsUnknown(t *testing.T) {
	pt := newProbe("odd", Effect(len(effectNames)+3))
	b := NewBroker(BrokerConfig{Policy: UnsafeHost})
	_, d := b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "odd"}, DispatchObserver{})
	if d.Reason != ReasonUnknownEffect || d.Effect != Unknown || pt.executed.Load() != 0 {
		t.Fatalf("decision %+v, executed %d", d, pt.executed.Load())
	}
}

// TestBoundTextCutsOnRuneBoundary: a cut never splits a UTF-8 sequence.
func TestBoundTextCutsOnRuneBoundary(t *testing.T) {
	for n, want := range map[int]string{0: "", 1: "", 2: "é", 3: "é", 4: "éé", 5: "éé€"[:4]} {
		if got := boundText("éé€", n); got != want {
			t.Errorf("boundText(éé€, %d) = %q, want %q", n, got, want)
		}
	}
	r := boundResult(Result{Text: strings.Repeat("€", 100)}, 100)
	if !utf8.ValidString(r.Text) || len(r.Text) > 100 {
		t.Errorf("bounded result %q (%d bytes) is not valid UTF-8 within the limit", r.Text, len(r.Text))
	}
}
