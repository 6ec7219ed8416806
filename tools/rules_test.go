//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// memRules is an in-memory RuleStore.
type memRules struct {
	mu    sync.Mutex
	rules []StandingRule
	fail  error
}

func (m *memRules) Rules() []StandingRule {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.rules)
}

func (m *memRules) AddRule(r StandingRule) (StandingRule, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return StandingRule{}, m.fail
	}
	r.ID = "rule_" + string(rune('a'+len(m.rules)))
	m.rules = append(m.rules, r)
	return r, nil
}

func (m *memRules) revokeAll() { m.mu.Lock(); m.rules = nil; m.mu.Unlock() }

// forSessionApprover answers approve_for_session.
func forSessionApprover() *scriptedApprover {
	return &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: true, Digest: r.Digest, ForSession: true}, nil
	}}
}

func editCall(id, path string) DispatchRequest {
	return DispatchRequest{RunID: "run", CallID: id, Tool: "edit",
		Arguments: json.RawMessage(`{"path":` + jsonString(path) + `,"old_text":"a","new_text":"b"}`)}
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestStandingRuleNeverWidens checks the broker's matching directly: a
// rule granted for an edit of a.txt covers a.txt (and ./a.txt, the same
// file) and nothing else — not another path, another case, a subdirectory
// or a path the tool refuses — and a rule revoked between admission and
// commit withdraws the call.
func TestStandingRuleNeverWidens(t *testing.T) {
	ws := t.TempDir()
	edit, err := NewEdit(Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	host := mustHost(t, edit)
	rules := &memRules{}
	ap := forSessionApprover()
	b := NewBroker(BrokerConfig{Policy: Controlled, Approver: ap, Rules: rules})
	ctx := context.Background()

	adm, d := b.Admit(ctx, host, editCall("c1", "a.txt"), DispatchObserver{})
	if adm == nil || adm.reason != ReasonApprovedForSession || len(rules.Rules()) != 1 {
		t.Fatalf("grant: %+v %+v", adm, d)
	}
	if got := rules.Rules()[0]; got.Scope != (ApprovalScope{Path: "a.txt"}) || got.Tool != "edit" || got.Effect != WorkspaceMutation || got.Policy != Controlled {
		t.Fatalf("rule %+v", got)
	}
	adm.Revoke()
	for _, p := range []string{"a.txt", "./a.txt", "a.txt/", "./a.txt//"} {
		adm, _ := b.Admit(ctx, host, editCall("same", p), DispatchObserver{})
		if adm == nil || adm.reason != ReasonSessionRule {
			t.Errorf("%q: not covered by the rule for a.txt", p)
			continue
		}
		adm.Revoke()
	}
	asked := ap.count()
	for _, p := range []string{"A.txt", "b.txt", "sub/a.txt", "a.txt.bak", ".a.txt", "a.txt\u200b"} {
		adm, _ := b.Admit(ctx, host, editCall("other", p), DispatchObserver{})
		if adm == nil || adm.reason == ReasonSessionRule {
			t.Errorf("%q: admitted by the rule for a.txt (or not asked)", p)
		}
		if adm != nil {
			adm.Revoke()
		}
	}
	if ap.count() != asked+6 {
		t.Errorf("asked %d times, want every other path asked", ap.count()-asked)
	}
	abs := filepath.Join(ws, "a.txt")
	if adm, _ := b.Admit(ctx, host, editCall("abs", abs), DispatchObserver{}); adm != nil {
		t.Errorf("absolute path %q admitted", abs)
	}

	// Revoked after admission, before commit: the call does not run.
	mustWrite(t, filepath.Join(ws, "a.txt"), "a\n")
	adm, _ = b.Admit(ctx, host, editCall("late", "a.txt"), DispatchObserver{})
	if adm == nil || adm.reason != ReasonSessionRule {
		t.Fatal("not admitted by the rule")
	}
	rules.revokeAll()
	res, d := adm.Execute(ctx)
	if d.Decision != DecisionDenied || d.Reason != ReasonCommitDenied || !res.IsError {
		t.Errorf("revoked rule still committed: %+v", d)
	}
}

// TestStandingRuleNotRecordedApprovesOnce: a rule that cannot be recorded
// still approves the call the person approved, once.
func TestStandingRuleNotRecordedApprovesOnce(t *testing.T) {
	edit, err := NewEdit(Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rules := &memRules{fail: errors.New("disk full")}
	b := NewBroker(BrokerConfig{Policy: Controlled, Approver: forSessionApprover(), Rules: rules})
	adm, _ := b.Admit(context.Background(), mustHost(t, edit), editCall("c1", "a.txt"), DispatchObserver{})
	if adm == nil || adm.reason != ReasonApproved || adm.ruleID != "" {
		t.Fatalf("admission %+v", adm)
	}
	adm.Revoke()
}

// TestBashScopeCarriesDirAndEnv: the same command text in another
// directory or with another environment has another scope.
func TestBashScopeCarriesDirAndEnv(t *testing.T) {
	args := json.RawMessage(`{"command":"make"}`)
	scope := func(root string) ApprovalScope {
		t.Helper()
		bt, err := NewBash(Config{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bt.Close() })
		s, err := bt.ApprovalScope(args)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	root := t.TempDir()
	a, other := scope(root), scope(t.TempDir())
	if a.Command != "make" || a.Dir != root || len(a.Env) != 64 {
		t.Fatalf("scope %+v", a)
	}
	if a == other {
		t.Error("same scope in another directory")
	}
	t.Setenv("OCTET_RULES_TEST", "1")
	if scope(root) == a {
		t.Error("same scope with another environment")
	}
}

// TestSetPolicyOnlyTightens: SetPolicy refuses a looser policy, reports
// the session source, confines the file tools below unsafe_host, and
// restores the launch snapshot.
func TestSetPolicyOnlyTightens(t *testing.T) {
	ws := t.TempDir()
	confine := &Confinement{}
	read, err := NewRead(Config{Root: ws, AllowExternalPaths: true, Confine: confine})
	if err != nil {
		t.Fatal(err)
	}
	host := mustHost(t, read)
	mustWrite(t, filepath.Join(ws, "a.txt"), "x\n")
	launch := DefaultToolPolicy(UnsafeHost, ShellSystemBash)
	b := NewBroker(BrokerConfig{Policy: UnsafeHost, EffectivePolicy: launch, Confine: confine})
	readReq := DispatchRequest{RunID: "r", CallID: "c", Tool: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`)}

	eff, err := b.SetPolicy(Controlled)
	if err != nil {
		t.Fatal(err)
	}
	if eff.EffectPolicy != (Setting[Policy]{Controlled, SourceSession}) || eff.WorkspaceConfinement != (Setting[bool]{true, SourceSession}) || !confine.On() {
		t.Errorf("snapshot %+v %+v, confined %v", eff.EffectPolicy, eff.WorkspaceConfinement, confine.On())
	}
	// Confined, a workspace read is a workspace read (admitted under
	// controlled), and an absolute path is refused.
	if res, d := b.Dispatch(context.Background(), host, readReq, DispatchObserver{}); d.Decision != DecisionAllowed || res.IsError || d.Effect != WorkspaceRead {
		t.Errorf("confined read: %+v %q", d, res.Text)
	}
	abs := readReq
	abs.Arguments = json.RawMessage(`{"path":` + jsonString(filepath.Join(ws, "a.txt")) + `}`)
	if _, d := b.Dispatch(context.Background(), host, abs, DispatchObserver{}); d.Decision != DecisionDenied {
		t.Errorf("absolute read under a confined session policy: %+v", d)
	}
	b2 := NewBroker(BrokerConfig{Policy: Controlled})
	if _, err := b2.SetPolicy(UnsafeHost); !errors.Is(err, ErrPolicyLooser) || !strings.Contains(err.Error(), "looser than the launch policy controlled") {
		t.Errorf("looser policy: %v", err)
	}
	if _, err := b2.SetPolicy(ControlledBashApproval); err != nil {
		t.Errorf("stricter policy: %v", err)
	}
	if _, err := b2.SetPolicy(Controlled); err != nil || b2.Policy() != Controlled {
		t.Errorf("back to launch: %v", err)
	}
	eff, err = b.SetPolicy(UnsafeHost)
	if err != nil || eff != launch || confine.On() {
		t.Errorf("restore launch: %v %+v confined %v", err, eff, confine.On())
	}
}

// TestDenialNoteBoundedAndVisible: a person's reason reaches the model
// text bounded, on one line, with controls and invisible characters
// made visible.
func TestDenialNoteBoundedAndVisible(t *testing.T) {
	d := ToolPolicyDecision{Decision: DecisionDenied, Reason: ReasonApprovalDenied, Note: denialNote("no\x1b[2J\u202eevil\nsecond")}
	got := d.DenialResult().Text
	want := "Tool call was not approved. The user's reason: no^[[2J⟨U+202E⟩evil ⏎ second"
	if got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	long := denialNote(strings.Repeat("é", 2000))
	if len(long) > maxDenialNote+64 || !strings.HasSuffix(long, "[reason truncated]") {
		t.Errorf("long note %d bytes: %q…", len(long), long[:20])
	}
	if denialNote("  ") != "" {
		t.Error("blank reason not dropped")
	}
}
