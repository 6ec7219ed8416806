package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"unicode/utf8"
)

// admissionState is the reservation lifecycle.
type admissionState int

const (
	stateReserved  admissionState = iota // admitted, hooks not yet run
	stateHooks                           // before_tool_call hooks running
	stateCommitted                       // grant consumed; the tool may run
	stateRevoked                         // dropped before commit
)

// Admission is a reserved, not yet committed admission of one exact call.
// Execute runs the hooks, commits (consuming the grant, if any) and runs
// the tool; Revoke drops it. It holds the grant; nothing it exposes does,
// and it formats as a redacted value.
type Admission struct {
	b      *Broker
	ps     *policyState // the policy the call was admitted under
	host   *Host
	tool   Tool
	intent EffectIntent
	digest string
	reason string // allowed reason once committed
	ruleID string // the standing approval that admitted it, or was granted with it
	// sandbox is the OS sandbox a shell call runs under (nil: not a
	// shell call).
	sandbox *CallSandbox
	obs     DispatchObserver
	// unsaved are the files whose editor text differed from the disk
	// when a call that reads the disk was admitted (see BufferGuard).
	unsaved []string

	mu        sync.Mutex
	state     admissionState
	grant     *Grant // nil when admitted without confirmation
	finalized bool
}

var (
	_ fmt.Stringer   = (*Admission)(nil)
	_ fmt.Formatter  = (*Admission)(nil)
	_ json.Marshaler = (*Admission)(nil)
)

// Tool returns the admitted tool.
func (a *Admission) Tool() Tool { return a.tool }

// Effect returns the call's exact classification.
func (a *Admission) Effect() Effect { return a.intent.Effect }

// Intent returns the canonical intent that was admitted.
func (a *Admission) Intent() EffectIntent { return a.intent }

// Digest returns the intent digest.
func (a *Admission) Digest() string { return a.digest }

// CallID returns the provider call id.
func (a *Admission) CallID() string { return a.intent.CallID }

// Parallel reports whether the call may join a parallel wave: the tool is
// statically Parallel and the exact call is Pure, WorkspaceRead or
// HostRead.
func (a *Admission) Parallel() bool {
	if a.tool.Concurrency() != Parallel {
		return false
	}
	switch a.intent.Effect {
	case Pure, WorkspaceRead, HostRead:
		return true
	}
	return false
}

// ReplaySafe reports whether the call may be executed again by crash
// recovery: the tool is statically ReplaySafe and the exact call is Pure or
// WorkspaceRead. Recovery admits the unresolved call, executes it only
// when this holds, and otherwise revokes it and pairs an indeterminate
// error.
func (a *Admission) ReplaySafe() bool {
	if a.tool.ReplaySafety() != ReplaySafe {
		return false
	}
	return a.intent.Effect == Pure || a.intent.Effect == WorkspaceRead
}

// String describes the admission without its grant.
func (a *Admission) String() string {
	return fmt.Sprintf("Admission{call %s, tool %s, effect %s}", strconv.Quote(a.intent.CallID), a.intent.Tool, a.intent.Effect)
}

// Format implements fmt.Formatter so no verb prints the grant.
func (a *Admission) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(a.String())) }

// MarshalJSON encodes the admission without its grant.
func (a *Admission) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		CallID string `json:"callId"`
		Tool   string `json:"tool"`
		Effect Effect `json:"effect"`
		Digest string `json:"digest"`
	}{a.intent.CallID, a.intent.Tool, a.intent.Effect, a.digest})
}

// Revoke drops an uncommitted reservation (the run was cancelled, the
// batch abandoned), revoking its grant. If it was not finalized yet, the
// call gets a final "cancelled" denial, reported to OnDecision and
// returned. A committed admission cannot be revoked; Revoke then returns
// a zero decision. Revoke is idempotent and safe concurrently with Execute.
func (a *Admission) Revoke() ToolPolicyDecision {
	a.mu.Lock()
	switch a.state {
	case stateCommitted, stateRevoked:
		a.mu.Unlock()
		return ToolPolicyDecision{}
	case stateHooks: // Execute is running the hooks; it will finalize.
		a.state = stateRevoked
		a.revokeGrantLocked()
		a.mu.Unlock()
		return ToolPolicyDecision{}
	}
	a.state = stateRevoked
	a.revokeGrantLocked()
	a.mu.Unlock()
	return a.finalize(DecisionDenied, ReasonCancelled)
}

func (a *Admission) revokeGrantLocked() {
	if a.grant != nil {
		a.b.grants.Revoke(*a.grant)
		a.grant = nil
	}
}

// policy is the policy the call was admitted under (the broker's current
// one for an admission built without it).
func (a *Admission) policy() *policyState {
	if a.ps != nil {
		return a.ps
	}
	return a.b.state.Load()
}

// finalize reports the final decision once.
func (a *Admission) finalize(decision, reason string) ToolPolicyDecision {
	d := a.policy().decision(a.intent.CallID, decision, reason, a.intent.Effect)
	if decision == DecisionAllowed {
		d.RuleID = a.ruleID
		if a.sandbox != nil {
			d.Sandbox = a.sandbox.Label()
		}
	}
	a.mu.Lock()
	first := !a.finalized
	a.finalized = true
	a.mu.Unlock()
	if first && a.obs.OnDecision != nil {
		a.obs.OnDecision(d)
	}
	return d
}

// Execute runs the before_tool_call hooks, commits the reservation
// (consuming the grant atomically), finalizes the "allowed" decision, runs
// the tool with the canonical arguments, bounds its text, and runs the
// after_tool_call hooks. Hook denial or cancellation before the commit
// revokes the reservation and returns a static denial; cancellation after
// the commit is the tool's to observe. Execute runs at most once; a second
// call is denied with effect_reservation_commit_denied.
func (a *Admission) Execute(ctx context.Context) (Result, ToolPolicyDecision) {
	a.mu.Lock()
	if a.state != stateReserved {
		a.mu.Unlock()
		d := a.policy().decision(a.intent.CallID, DecisionDenied, ReasonCommitDenied, a.intent.Effect)
		return d.DenialResult(), d
	}
	a.state = stateHooks
	a.mu.Unlock()

	if reason := a.runBeforeHooks(ctx); reason != "" {
		a.mu.Lock()
		a.state = stateRevoked
		a.revokeGrantLocked()
		a.mu.Unlock()
		d := a.finalize(DecisionDenied, reason)
		return d.DenialResult(), d
	}
	if reason := a.commit(ctx); reason != "" {
		d := a.finalize(DecisionDenied, reason)
		return d.DenialResult(), d
	}
	d := a.finalize(DecisionAllowed, a.reason)
	res := a.run(ctx)
	for _, h := range a.b.hooks {
		if h.AfterToolCall != nil {
			a.safeAfter(ctx, h.AfterToolCall, res)
		}
	}
	return res, d
}

// runBeforeHooks runs every before_tool_call hook in order and returns a
// denial reason, or "" when all passed and the run is still live.
func (a *Admission) runBeforeHooks(ctx context.Context) string {
	for i, h := range a.b.hooks {
		if ctx.Err() != nil {
			return ReasonCancelled
		}
		if h.BeforeToolCall == nil {
			continue
		}
		if err := safeBefore(ctx, h.BeforeToolCall, a.intent); err != nil {
			a.b.log.Debug("before_tool_call hook denied", "hook", i, "tool", a.intent.Tool, "call_id", a.intent.CallID, "err", err)
			if ctx.Err() != nil {
				return ReasonCancelled
			}
			return ReasonHookDenied
		}
	}
	if ctx.Err() != nil {
		return ReasonCancelled
	}
	return ""
}

// commit moves the reservation to committed and consumes its grant, under
// the admission lock so a concurrent Revoke cannot interleave. It returns
// a denial reason or "".
func (a *Admission) commit(ctx context.Context) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state != stateHooks { // revoked while the hooks ran
		a.revokeGrantLocked()
		return ReasonCancelled
	}
	if ctx.Err() != nil {
		a.state = stateRevoked
		a.revokeGrantLocked()
		return ReasonCancelled
	}
	if a.host.Generation() != a.intent.CatalogGeneration {
		// The catalog changed since admission: the intent no longer
		// names what would run.
		a.state = stateRevoked
		a.revokeGrantLocked()
		return ReasonCommitDenied
	}
	if a.reason == ReasonSessionRule && !a.b.ruleStands(a.ruleID) {
		// The standing approval was revoked after admission.
		a.state = stateRevoked
		return ReasonCommitDenied
	}
	if a.grant != nil {
		g := *a.grant
		a.grant = nil
		if err := a.b.grants.Consume(g, a.digest); err != nil {
			a.state = stateRevoked
			a.b.log.Debug("reservation commit denied", "call_id", a.intent.CallID, "err", err)
			return ReasonCommitDenied
		}
	}
	a.state = stateCommitted
	return ""
}

// run calls the tool, redacts known secret values from its progress and
// result, and bounds the result.
func (a *Admission) run(ctx context.Context) Result {
	inv := Invocation{CallID: a.intent.CallID, Arguments: a.intent.Arguments, ReadOnly: a.reason == ReasonReadOnlyCommand, Intent: a.obs.OnIntent, Principal: a.intent.Principal}
	if a.sandbox != nil {
		inv.Sandbox = *a.sandbox
	}
	var progress *RedactStream
	if a.obs.OnProgress != nil {
		emit := a.obs.OnProgress
		progress = a.b.redact.Stream(func(b []byte) { emit(string(b)) })
		inv.Progress = func(text string) { progress.Write([]byte(text)) }
	}
	var unsaved []string
	if readsDisk(a.intent.Effect) {
		unsaved = a.b.buffers.unsaved() // as the call starts
	}
	res, err := safeExecute(ctx, a.tool, inv)
	if progress != nil {
		progress.Flush()
	}
	if err != nil {
		a.b.log.Debug("tool failed", "tool", a.intent.Tool, "call_id", a.intent.CallID, "err", err)
		res = Result{Text: "Tool failed: " + boundText(err.Error(), maxToolErrorText), IsError: true}
	}
	res = withUnsaved(res, unsaved)
	return boundResult(a.b.redact.Result(res), a.b.maxResult)
}

func (a *Admission) safeAfter(ctx context.Context, f func(context.Context, EffectIntent, Result), r Result) {
	defer func() {
		if p := recover(); p != nil {
			a.b.log.Error("after_tool_call hook panicked", "tool", a.intent.Tool, "call_id", a.intent.CallID, "panic", fmt.Sprint(p))
		}
	}()
	f(ctx, a.intent, r)
}

// boundResult truncates r.Text on a rune boundary so that it, with the
// truncation marker, fits in limit bytes, and records the truncation in
// Details.
func boundResult(r Result, limit int) Result {
	if len(r.Text) <= limit {
		return r
	}
	if r.Commit != nil {
		// A cut result is not the one the tool produced: what it handed
		// out is restored.
		r.Commit(false)
		r.Commit = nil
	}
	// The marker's digits depend on how much is cut; size it for the
	// worst case (everything omitted), then cut.
	// A limit too small for the marker keeps just the text.
	marker := func(n int) string { return fmt.Sprintf("\n[output truncated: %d bytes omitted]", n) }
	if keep := limit - len(marker(len(r.Text))); keep > 0 {
		kept := boundText(r.Text, keep)
		r.Text = kept + marker(len(r.Text)-len(kept))
	} else {
		r.Text = boundText(r.Text, limit)
	}
	details := make(map[string]any, len(r.Details)+1)
	maps.Copy(details, r.Details)
	details["result_truncated"] = true
	r.Details = details
	return r
}

// boundText returns at most n bytes of s, cut on a rune boundary.
func boundText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// The safe* wrappers turn a panic in tool, approver or hook code into an
// error, so a broken extension fails closed instead of crashing the run.

func safeClassify(t Tool, args json.RawMessage) (eff Effect, err error) {
	defer func() {
		if p := recover(); p != nil {
			eff, err = Unknown, fmt.Errorf("%w: classify panicked: %v", ErrInvalidArguments, p)
		}
	}()
	eff, err = t.Classify(args)
	if err != nil {
		return Unknown, fmt.Errorf("%w: classify: %w", ErrInvalidArguments, err)
	}
	if eff < 0 || int(eff) >= len(effectNames) {
		eff = Unknown
	}
	return eff, nil
}

func safeEscalation(se SandboxEscalator, args json.RawMessage) (esc *Escalation, err error) {
	defer func() {
		if p := recover(); p != nil {
			esc, err = nil, fmt.Errorf("sandbox escalation panicked: %v", p)
		}
	}()
	return se.SandboxEscalation(args)
}

func safeShellCommand(sc ShellCommander, args json.RawMessage) (call ShellCall, err error) {
	defer func() {
		if p := recover(); p != nil {
			call, err = ShellCall{}, fmt.Errorf("shell command panicked: %v", p)
		}
	}()
	return sc.ShellCommand(args)
}

func safePreview(ctx context.Context, pv Previewer, args json.RawMessage) (p Preview, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = Preview{}, fmt.Errorf("preview panicked: %v", r)
		}
	}()
	return pv.Preview(ctx, args)
}

func safeConfirm(ap Approver, ctx context.Context, req ConfirmRequest) (a Approval, err error) {
	defer func() {
		if p := recover(); p != nil {
			a, err = Approval{}, fmt.Errorf("approver panicked: %v", p)
		}
	}()
	return ap.Confirm(ctx, req)
}

func safeBefore(ctx context.Context, f func(context.Context, EffectIntent) error, in EffectIntent) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("before_tool_call hook panicked: %v", p)
		}
	}()
	return f(ctx, in)
}

func safeExecute(ctx context.Context, t Tool, inv Invocation) (r Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = Result{}, fmt.Errorf("tool panicked")
		}
	}()
	return t.Execute(ctx, inv)
}
