package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// probeTool is a real Tool for broker tests: its classification is fixed
// per instance (or refused when the arguments say "invalid"), and it
// records every Classify and Execute so tests can prove what reached it.
type probeTool struct {
	name        string
	effect      Effect
	concurrency Concurrency

	classified atomic.Int32
	executed   atomic.Int32
	mu         sync.Mutex
	lastArgs   json.RawMessage
	text       string
}

var _ Tool = (*probeTool)(nil)

func newProbe(name string, eff Effect) *probeTool {
	return &probeTool{name: name, effect: eff, text: "ok"}
}

func (t *probeTool) Name() string               { return t.name }
func (t *probeTool) Description() string        { return "probe tool for broker tests" }
func (t *probeTool) Concurrency() Concurrency   { return t.concurrency }
func (t *probeTool) ReplaySafety() ReplaySafety { return ReplayUnsafe }
func (t *probeTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"},"invalid":{"type":"boolean"},"n":{"type":"integer"}}}`)
}

func (t *probeTool) Classify(args json.RawMessage) (Effect, error) {
	t.classified.Add(1)
	var a struct {
		Invalid bool `json:"invalid"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return Unknown, err
	}
	if a.Invalid {
		return Unknown, errors.New("probe: SECRET-CLASSIFY-DETAIL")
	}
	return t.effect, nil
}

func (t *probeTool) Execute(ctx context.Context, inv Invocation) (Result, error) {
	t.executed.Add(1)
	t.mu.Lock()
	t.lastArgs = append(json.RawMessage(nil), inv.Arguments...)
	t.mu.Unlock()
	if inv.Progress != nil {
		inv.Progress("progress")
	}
	return Result{Text: t.text}, nil
}

// shellProbe is a probeTool that is a shell process channel: it reports
// its "command" argument to the broker like the bash tool.
type shellProbe struct{ *probeTool }

var _ ShellCommander = shellProbe{}

func newShellProbe(name string) shellProbe {
	return shellProbe{newProbe(name, HostProcess)}
}

func (t shellProbe) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)
}

func (t shellProbe) ShellCommand(args json.RawMessage) (ShellCall, error) {
	var a struct {
		Command string `json:"command"`
	}
	err := json.Unmarshal(args, &a)
	shell, _ := ResolveShell("")
	return ShellCall{Command: a.Command, Dir: os.TempDir(), Env: commandEnv(os.Environ(), nil), Shell: shell}, err
}

// scriptedApprover answers every request with a function of it and
// records the requests.
type scriptedApprover struct {
	mu     sync.Mutex
	reqs   []ConfirmRequest
	answer func(ctx context.Context, req ConfirmRequest) (Approval, error)
}

func (a *scriptedApprover) Confirm(ctx context.Context, req ConfirmRequest) (Approval, error) {
	a.mu.Lock()
	a.reqs = append(a.reqs, req)
	a.mu.Unlock()
	return a.answer(ctx, req)
}

// requests returns a copy of the requests seen so far.
func (a *scriptedApprover) requests() []ConfirmRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]ConfirmRequest(nil), a.reqs...)
}

func (a *scriptedApprover) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.reqs)
}

func approveAll() *scriptedApprover {
	return &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: true, Digest: r.Digest}, nil
	}}
}

// hookRecorder is a trusted hook pair that records calls and can deny.
type hookRecorder struct {
	deny   bool
	before atomic.Int32
	after  atomic.Int32
}

func (h *hookRecorder) hooks() Hooks {
	return Hooks{
		BeforeToolCall: func(ctx context.Context, in EffectIntent) error {
			h.before.Add(1)
			if h.deny {
				return errors.New("hook: SECRET-HOOK-DETAIL")
			}
			return nil
		},
		AfterToolCall: func(ctx context.Context, in EffectIntent, r Result) { h.after.Add(1) },
	}
}

func mustHost(t *testing.T, tools ...Tool) *Host {
	t.Helper()
	h := NewHost()
	for _, tl := range tools {
		if err := h.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

var allEffects = []Effect{Unknown, Pure, WorkspaceRead, WorkspaceMutation, HostRead, HostMutation, HostProcess, Network, Delegation, Extension}
var allPolicies = []Policy{Controlled, ControlledBashApproval, UnsafeHost}

// seedVerdict is the contract ("Effect admission boundary"), written out
// independently of Policy.decide: what each policy does with each effect
// for a tool that is not a shell channel.
var seedVerdict = map[Policy]map[Effect]string{
	Controlled: {
		Unknown: "deny", Pure: "admit", WorkspaceRead: "admit", WorkspaceMutation: "confirm",
		HostRead: "deny", HostMutation: "deny", HostProcess: "deny", Network: "deny",
		Delegation: "deny", Extension: "deny",
	},
	ControlledBashApproval: {
		Unknown: "deny", Pure: "admit", WorkspaceRead: "admit", WorkspaceMutation: "confirm",
		HostRead: "deny", HostMutation: "deny", HostProcess: "deny", Network: "deny",
		Delegation: "deny", Extension: "deny",
	},
	UnsafeHost: {
		Unknown: "deny", Pure: "admit", WorkspaceRead: "admit", WorkspaceMutation: "admit",
		HostRead: "admit", HostMutation: "admit", HostProcess: "admit", Network: "admit",
		Delegation: "admit", Extension: "admit",
	},
}

// shellVerdict is the contract for the bash channel (HostProcess):
// [policy][readOnlyCommand].
var shellVerdict = map[Policy]map[bool]string{
	Controlled:             {false: "confirm", true: "admit"},
	ControlledBashApproval: {false: "confirm", true: "confirm"},
	UnsafeHost:             {false: "admit", true: "admit"},
}

func TestBrokerPolicyTable(t *testing.T) {
	type tcase struct {
		name    string
		policy  Policy
		tool    Tool
		probe   *probeTool
		args    string
		verdict string
		effect  Effect
	}
	var cases []tcase
	for _, p := range allPolicies {
		for _, e := range allEffects {
			pt := newProbe("probe", e)
			cases = append(cases, tcase{fmt.Sprintf("%s/%s", p, e), p, pt, pt, `{"x":"y"}`, seedVerdict[p][e], e})
		}
		for _, ro := range []bool{false, true} {
			sp := newShellProbe("bash")
			cmd := `{"command":"rm -rf build"}`
			if ro {
				cmd = `{"command":"grep -rn TODO ."}`
			}
			cases = append(cases, tcase{fmt.Sprintf("%s/shell_readonly=%v", p, ro), p, sp, sp.probeTool, cmd, shellVerdict[p][ro], HostProcess})
		}
	}
	for _, tc := range cases {
		for _, hookDeny := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/hookdeny=%v", tc.name, hookDeny), func(t *testing.T) {
				tc.probe.executed.Store(0)
				hr := &hookRecorder{deny: hookDeny}
				ap := approveAll()
				b := NewBroker(BrokerConfig{Policy: tc.policy, Approver: ap, Hooks: []Hooks{hr.hooks()}})
				host := mustHost(t, tc.tool)
				var decisions []ToolPolicyDecision
				res, d := b.Dispatch(context.Background(), host,
					DispatchRequest{RunID: "run", CallID: "c1", Tool: tc.tool.Name(), Arguments: json.RawMessage(tc.args)},
					DispatchObserver{OnDecision: func(d ToolPolicyDecision) { decisions = append(decisions, d) }})
				if len(decisions) != 1 || decisions[0] != d {
					t.Fatalf("OnDecision calls = %+v, want exactly the returned decision %+v", decisions, d)
				}
				wantConfirm := 0
				if tc.verdict == "confirm" {
					wantConfirm = 1
				}
				if got := ap.count(); got != wantConfirm {
					t.Errorf("approver asked %d times, want %d", got, wantConfirm)
				}
				switch {
				case tc.verdict == "deny":
					wantReason := ReasonPolicyDenied
					if tc.effect == Unknown {
						wantReason = ReasonUnknownEffect
					}
					if d.Decision != DecisionDenied || d.Reason != wantReason {
						t.Errorf("decision = %s/%s, want denied/%s", d.Decision, d.Reason, wantReason)
					}
					if hr.before.Load() != 0 || hr.after.Load() != 0 || tc.probe.executed.Load() != 0 {
						t.Errorf("denied call reached hooks (%d/%d) or tool (%d)", hr.before.Load(), hr.after.Load(), tc.probe.executed.Load())
					}
					if !res.IsError || res.Text != DenialText(wantReason) {
						t.Errorf("result = %+v, want static denial", res)
					}
				case hookDeny:
					if d.Decision != DecisionDenied || d.Reason != ReasonHookDenied {
						t.Errorf("decision = %s/%s, want denied/%s", d.Decision, d.Reason, ReasonHookDenied)
					}
					if hr.before.Load() != 1 || hr.after.Load() != 0 || tc.probe.executed.Load() != 0 {
						t.Errorf("hook-denied: before=%d after=%d executed=%d, want 1/0/0", hr.before.Load(), hr.after.Load(), tc.probe.executed.Load())
					}
					if !res.IsError || strings.Contains(res.Text, "SECRET") {
						t.Errorf("result = %+v, want static denial without hook detail", res)
					}
				default:
					wantReason := ReasonPolicyAdmitted
					if tc.verdict == "confirm" {
						wantReason = ReasonApproved
					} else if tc.policy == Controlled && tc.effect == HostProcess {
						wantReason = ReasonReadOnlyCommand
					}
					if d.Decision != DecisionAllowed || d.Reason != wantReason {
						t.Errorf("decision = %s/%s, want allowed/%s", d.Decision, d.Reason, wantReason)
					}
					if hr.before.Load() != 1 || hr.after.Load() != 1 || tc.probe.executed.Load() != 1 {
						t.Errorf("allowed: before=%d after=%d executed=%d, want 1/1/1", hr.before.Load(), hr.after.Load(), tc.probe.executed.Load())
					}
					if res.IsError || res.Text != "ok" {
						t.Errorf("result = %+v, want the tool's", res)
					}
				}
				if d.Effect != tc.effect {
					t.Errorf("decision effect = %s, want %s", d.Effect, tc.effect)
				}
				if d.EffectiveToolPolicy.EffectPolicy.Value != tc.policy {
					t.Errorf("evidence policy = %s, want %s", d.EffectiveToolPolicy.EffectPolicy.Value, tc.policy)
				}
			})
		}
	}
}

func TestUnknownDeniedEvenWithApproverAndNoHooks(t *testing.T) {
	for _, p := range allPolicies {
		pt := newProbe("probe", Unknown)
		ap := approveAll()
		b := NewBroker(BrokerConfig{Policy: p, Approver: ap})
		_, d := b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "probe"}, DispatchObserver{})
		if d.Decision != DecisionDenied || d.Reason != ReasonUnknownEffect || pt.executed.Load() != 0 || ap.count() != 0 {
			t.Errorf("%s: Unknown got %+v (executed %d, asked %d)", p, d, pt.executed.Load(), ap.count())
		}
	}
}

func TestConfirmPaths(t *testing.T) {
	type outcome struct {
		decision, reason string
		executed         int32
	}
	cases := []struct {
		name   string
		answer func(ctx context.Context, r ConfirmRequest) (Approval, error)
		cancel bool // cancel the run while the approver waits
		want   outcome
	}{
		{"approve", func(_ context.Context, r ConfirmRequest) (Approval, error) {
			return Approval{Approved: true, Digest: r.Digest}, nil
		}, false, outcome{DecisionAllowed, ReasonApproved, 1}},
		{"deny", func(_ context.Context, r ConfirmRequest) (Approval, error) {
			return Approval{Approved: false, Digest: r.Digest}, nil
		}, false, outcome{DecisionDenied, ReasonApprovalDenied, 0}},
		{"wrong digest", func(_ context.Context, r ConfirmRequest) (Approval, error) {
			return Approval{Approved: true, Digest: strings.Repeat("0", 64)}, nil
		}, false, outcome{DecisionDenied, ReasonApprovalDenied, 0}},
		{"empty digest", func(_ context.Context, r ConfirmRequest) (Approval, error) {
			return Approval{Approved: true}, nil
		}, false, outcome{DecisionDenied, ReasonApprovalDenied, 0}},
		{"approver error", func(_ context.Context, r ConfirmRequest) (Approval, error) {
			return Approval{}, errors.New("SECRET-APPROVER-DETAIL")
		}, false, outcome{DecisionDenied, ReasonApprovalDenied, 0}},
		{"approver panics", func(_ context.Context, r ConfirmRequest) (Approval, error) {
			panic("approver bug")
		}, false, outcome{DecisionDenied, ReasonApprovalDenied, 0}},
		{"times out", func(ctx context.Context, r ConfirmRequest) (Approval, error) {
			<-ctx.Done()
			return Approval{}, ctx.Err()
		}, false, outcome{DecisionDenied, ReasonApprovalExpired, 0}},
		{"late approval after expiry", func(ctx context.Context, r ConfirmRequest) (Approval, error) {
			<-ctx.Done()
			return Approval{Approved: true, Digest: r.Digest}, nil
		}, false, outcome{DecisionDenied, ReasonApprovalExpired, 0}},
		{"approver's own deadline", func(_ context.Context, r ConfirmRequest) (Approval, error) {
			return Approval{}, fmt.Errorf("asked at the editor: %w", ErrApprovalExpired)
		}, false, outcome{DecisionDenied, ReasonApprovalExpired, 0}},
		{"run cancelled", func(ctx context.Context, r ConfirmRequest) (Approval, error) {
			<-ctx.Done()
			return Approval{Approved: true, Digest: r.Digest}, nil
		}, true, outcome{DecisionDenied, ReasonCancelled, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pt := newProbe("edit", WorkspaceMutation)
			ap := &scriptedApprover{answer: tc.answer}
			b := NewBroker(BrokerConfig{Policy: Controlled, Approver: ap, ApprovalTimeout: 50 * time.Millisecond})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				ap.answer = func(actx context.Context, r ConfirmRequest) (Approval, error) {
					cancel()
					return tc.answer(actx, r)
				}
			}
			var confirmSeen []ConfirmRequest
			res, d := b.Dispatch(ctx, mustHost(t, pt), DispatchRequest{RunID: "r", CallID: "c", Tool: "edit", Arguments: json.RawMessage(`{"x":"new text"}`)},
				DispatchObserver{OnConfirm: func(r ConfirmRequest) { confirmSeen = append(confirmSeen, r) }})
			got := outcome{d.Decision, d.Reason, pt.executed.Load()}
			if got != tc.want {
				t.Fatalf("outcome = %+v, want %+v", got, tc.want)
			}
			if len(confirmSeen) != 1 || len(ap.requests()) != 1 || confirmSeen[0].Digest != ap.requests()[0].Digest {
				t.Fatalf("confirm observed %d, approver asked %d", len(confirmSeen), len(ap.requests()))
			}
			req := ap.requests()[0]
			if req.Digest != req.Intent.Digest() || req.ExpiresAt.IsZero() || req.Intent.Tool != "edit" || req.Intent.Effect != WorkspaceMutation {
				t.Errorf("confirm request = %+v", req)
			}
			if d.Denied() {
				for _, secret := range []string{"SECRET", "new text", "digest", "approver"} {
					if strings.Contains(res.Text, secret) {
						t.Errorf("denial text %q leaks %q", res.Text, secret)
					}
				}
			}
			if n := b.Grants().Outstanding(); n != 0 {
				t.Errorf("%d grants left outstanding", n)
			}
		})
	}
}

func TestNoApproverDeniesConfirmation(t *testing.T) {
	pt := newProbe("write", WorkspaceMutation)
	b := NewBroker(BrokerConfig{})
	_, d := b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "write"}, DispatchObserver{})
	if d.Reason != ReasonApprovalUnavailable || pt.executed.Load() != 0 {
		t.Fatalf("decision %+v executed %d", d, pt.executed.Load())
	}
}

func TestInvalidArgumentsNeverReachHooksOrTool(t *testing.T) {
	bad := []string{
		`{"invalid":true}`,    // the tool's Classify refuses
		`{"x":1}`,             // schema: x must be a string
		`{"x":"a","x":"b"}`,   // duplicate key
		`[1,2]`,               // not an object
		`{"x":"a"} {"x":"b"}`, // trailing data
		`{"x":"a"`,            // truncated
		"{\"x\":\"\xff\"}",    // invalid UTF-8
		`{"n":1.5}`,           // schema: integer
		strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70), // too deep
	}
	for _, p := range allPolicies {
		for _, args := range bad {
			pt := newProbe("probe", Pure)
			hr := &hookRecorder{}
			ap := approveAll()
			b := NewBroker(BrokerConfig{Policy: p, Approver: ap, Hooks: []Hooks{hr.hooks()}})
			res, d := b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "probe", Arguments: json.RawMessage(args)}, DispatchObserver{})
			if d.Decision != DecisionDenied || d.Reason != ReasonInvalidArguments {
				t.Errorf("%s %q: decision %+v", p, args, d)
			}
			if hr.before.Load()+hr.after.Load() != 0 || pt.executed.Load() != 0 || ap.count() != 0 {
				t.Errorf("%s %q: reached hooks %d/%d, tool %d, approver %d", p, args, hr.before.Load(), hr.after.Load(), pt.executed.Load(), ap.count())
			}
			if res.Text != DenialText(ReasonInvalidArguments) || strings.Contains(res.Text, "SECRET") {
				t.Errorf("%s %q: model text %q", p, args, res.Text)
			}
		}
	}
}

func TestUnknownToolIsPairedError(t *testing.T) {
	b := NewBroker(BrokerConfig{Policy: UnsafeHost})
	res, d := b.Dispatch(context.Background(), mustHost(t, newProbe("read", Pure)), DispatchRequest{CallID: "c", Tool: "rm_rf"}, DispatchObserver{})
	if d.Reason != ReasonUnknownTool || !res.IsError || strings.Contains(res.Text, "rm_rf") {
		t.Fatalf("decision %+v result %+v", d, res)
	}
}

func TestToolReceivesCanonicalArguments(t *testing.T) {
	pt := newProbe("probe", Pure)
	b := NewBroker(BrokerConfig{})
	_, d := b.Dispatch(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "probe", Arguments: json.RawMessage(` { "x" : "<a&b>", "n" : 2 } `)}, DispatchObserver{})
	if d.Decision != DecisionAllowed {
		t.Fatal(d)
	}
	if got, want := string(pt.lastArgs), `{"n":2,"x":"<a&b>"}`; got != want {
		t.Fatalf("tool got %s, want %s", got, want)
	}
}
