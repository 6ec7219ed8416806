package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/octet-agent/octet/changes"
)

// Approver asks a person (or a host policy) to confirm one exact intent.
// The server, the CLI and tests implement it. Confirm should return when
// ctx ends (its deadline is the request's ExpiresAt); an error is a denial.
type Approver interface {
	Confirm(ctx context.Context, req ConfirmRequest) (Approval, error)
}

// ConfirmRequest is what an approval prompt shows (octet/confirmEffect).
// It carries the digest the answer must echo, never a grant.
type ConfirmRequest struct {
	// Intent is the exact call (tool, effect, canonical arguments...).
	Intent EffectIntent
	// Digest is Intent.Digest(): what an approval must echo.
	Digest string
	// Title, Detail and Diff are the bounded preview to show.
	Title  string
	Detail string
	Diff   string
	// ExpiresAt is when an unanswered request becomes approval_expired.
	ExpiresAt time.Time
	// Scope, when set, is what a standing approval (Approval.ForSession)
	// of this call would cover: calls of the same tool and effect with
	// exactly this scope. Nil: the call can only be approved once.
	Scope *ApprovalScope
	// Sandbox, for a shell call, is the OS sandbox it will run under
	// (CallSandbox.Label); the Title says it too, and Digest is bound to
	// it.
	Sandbox string
}

// Approval is an approver's answer. An answer whose Digest differs from
// the request's is a denial.
type Approval struct {
	// Approved is the person's answer.
	Approved bool
	// Digest echoes the request's Digest.
	Digest string
	// ForSession asks for a standing approval of the same tool and scope
	// (ConfirmRequest.Scope); it is ignored when the request has none.
	ForSession bool
	// Reason is the person's reason for a denial, passed to the model
	// bounded and made visible (it is client text); ignored on approval.
	Reason string
}

// Hooks are trusted host callbacks around execution. BeforeToolCall runs
// after admission is reserved and before commit; a non-nil error vetoes the
// call (secondary_hook_denied) and its text never reaches the model.
// AfterToolCall runs only for committed effects, with the tool's result.
// Either may be nil.
type Hooks struct {
	// BeforeToolCall may veto a reserved call; it must honour ctx.
	BeforeToolCall func(ctx context.Context, in EffectIntent) error
	// AfterToolCall observes a committed call's result.
	AfterToolCall func(ctx context.Context, in EffectIntent, r Result)
}

// ShellCommander is implemented by tools that pass one complete command
// line to a shell: the Controlled process channel. Under Controlled a
// HostProcess call is confirmable only from such a tool (other processes
// are native processes and are denied), and it is auto-approved when
// CheckReadOnly accepts the ShellCall that ShellCommand reports: the exact
// command, the directory it runs in, the environment it gets and the
// shell that runs it. ShellCommand must not run anything.
type ShellCommander interface {
	ShellCommand(args json.RawMessage) (ShellCall, error)
}

// Default broker limits.
const (
	// DefaultApprovalTimeout bounds how long an approval prompt waits.
	DefaultApprovalTimeout = 10 * time.Minute
	// DefaultMaxResultBytes bounds the model-visible text of one result.
	DefaultMaxResultBytes = 50 << 10
	// MaxPreviewTitle, MaxPreviewDetail and MaxPreviewDiff bound the
	// rendered fields of an approval prompt; a call whose rendering does
	// not fit whole is refused before approval (preview_too_large).
	MaxPreviewTitle  = 256
	MaxPreviewDetail = 8 << 10
	MaxPreviewDiff   = 256 << 10
	maxToolErrorText = 1 << 10
)

// BrokerConfig configures a Broker. The zero value is a Controlled broker
// with no approver (every confirmation is denied) and default limits.
type BrokerConfig struct {
	// Policy is the admission profile.
	Policy Policy
	// Approver confirms WorkspaceMutation and shell calls; nil denies them.
	Approver Approver
	// GrantTTL is how long an approval stays consumable (DefaultGrantTTL).
	GrantTTL time.Duration
	// ApprovalTimeout bounds one prompt (DefaultApprovalTimeout).
	ApprovalTimeout time.Duration
	// Hooks run in order around each execution.
	Hooks []Hooks
	// EffectivePolicy is the snapshot carried as evidence. When it is the
	// zero value, DefaultToolPolicy(Policy, selection of ResolveShell(""))
	// is used. Its effect_policy value is forced to Policy.
	EffectivePolicy EffectiveToolPolicy
	// MaxResultBytes bounds model-visible result text (DefaultMaxResultBytes).
	MaxResultBytes int
	// Principal is used for intents whose request leaves it empty.
	Principal string
	// Grants is a store shared with other brokers (a delegation clone);
	// nil creates a private one.
	Grants *GrantStore
	// Logger receives debug diagnostics (hook errors, tool panics); nil is
	// slog.Default(). Nothing secret is logged.
	Logger *slog.Logger
	// Redactor replaces the host's known secret values (the provider API
	// key) in every tool result and progress chunk before anything else
	// sees them; nil redacts nothing.
	Redactor *Redactor
	// Rules keeps the session's standing approvals; nil offers none.
	Rules RuleStore
	// Confine is the file tools' confinement switch (their
	// Config.Confine), turned on by SetPolicy below unsafe_host.
	Confine *Confinement
	// Buffers, when set, keeps commands and the editor's buffers in
	// agreement: before a call that reads the disk (a process, an
	// extension) is confirmed or run, the editor is asked to save the
	// agent's edits, and the files that still differ are named in its
	// approval and its result.
	Buffers *BufferGuard
}

// Broker is the deterministic admission reference monitor: it classifies,
// decides, confirms, reserves and commits every tool call. It is not an OS
// sandbox. A Broker is safe for concurrent use; only its policy may change
// after NewBroker, and only to one no looser than the launch policy
// (SetPolicy), taking effect at the next call's admission.
type Broker struct {
	launch          *policyState
	state           *atomic.Pointer[policyState] // shared with delegation clones
	approver        Approver
	approvalTimeout time.Duration
	hooks           []Hooks
	maxResult       int
	principal       string
	grants          *GrantStore
	log             *slog.Logger
	redact          *Redactor
	rules           RuleStore
	confine         *Confinement
	buffers         *BufferGuard
	setMu           *sync.Mutex // serializes SetPolicy (shared with clones)
	watch           *policyWatchers
}

// policyWatchers are the OnPolicyChange callbacks of a broker and its
// clones, called in SetPolicy's order (under setMu).
type policyWatchers struct {
	mu   sync.Mutex
	next int
	fs   map[int]func(Policy)
}

// policyState is the policy a call is admitted under, with its evidence
// snapshot and the version recorded in intents.
type policyState struct {
	policy    Policy
	effective EffectiveToolPolicy
	version   string
}

func newPolicyState(eff EffectiveToolPolicy) *policyState {
	return &policyState{policy: eff.EffectPolicy.Value, effective: eff, version: eff.version()}
}

// NewBroker returns a broker for cfg (see BrokerConfig for defaults).
// An invalid cfg.Policy is treated as Controlled.
func NewBroker(cfg BrokerConfig) *Broker {
	p := cfg.Policy
	if !p.Valid() {
		p = Controlled
	}
	eff := cfg.EffectivePolicy
	if eff == (EffectiveToolPolicy{}) {
		_, sel := ResolveShell("")
		eff = DefaultToolPolicy(p, sel)
	}
	eff.EffectPolicy.Value = p
	b := &Broker{
		state:           new(atomic.Pointer[policyState]),
		setMu:           new(sync.Mutex),
		watch:           &policyWatchers{fs: map[int]func(Policy){}},
		launch:          newPolicyState(eff),
		approver:        cfg.Approver,
		approvalTimeout: cfg.ApprovalTimeout,
		hooks:           append([]Hooks(nil), cfg.Hooks...),
		maxResult:       cfg.MaxResultBytes,
		principal:       cfg.Principal,
		grants:          cfg.Grants,
		log:             cfg.Logger,
		redact:          cfg.Redactor,
		rules:           cfg.Rules,
		confine:         cfg.Confine,
		buffers:         cfg.Buffers,
	}
	b.state.Store(b.launch)
	if b.approvalTimeout <= 0 {
		b.approvalTimeout = DefaultApprovalTimeout
	}
	if b.maxResult <= 0 {
		b.maxResult = DefaultMaxResultBytes
	}
	if b.grants == nil {
		b.grants = NewGrantStore(cfg.GrantTTL)
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	return b
}

// Policy returns the admission profile.
func (b *Broker) Policy() Policy { return b.state.Load().policy }

// LaunchPolicy returns the admission profile the broker was built with:
// the loosest SetPolicy accepts.
func (b *Broker) LaunchPolicy() Policy { return b.launch.policy }

// EffectiveToolPolicy returns the evidence snapshot (octet/policy).
func (b *Broker) EffectiveToolPolicy() EffectiveToolPolicy { return b.state.Load().effective }

// LaunchEffectiveToolPolicy returns the launch policy's evidence
// snapshot (what SetPolicy restores).
func (b *Broker) LaunchEffectiveToolPolicy() EffectiveToolPolicy { return b.launch.effective }

// PolicyVersion returns the policy version recorded in every intent.
func (b *Broker) PolicyVersion() string { return b.state.Load().version }

// ErrPolicyLooser is wrapped by SetPolicy's refusal of a policy looser
// than the launch policy.
var ErrPolicyLooser = errors.New("effect policy is looser than the launch policy")

// SetPolicy moves the broker to policy p, which must be no looser than the
// launch policy (Policy.NoLooserThan); p equal to the launch policy
// restores the launch snapshot. Below unsafe_host the file tools are
// confined to the workspace (the Confine switch), as the controlled
// policies always are. Calls admitted before SetPolicy keep the decision
// they got; every later admission uses p. It returns the new snapshot.
func (b *Broker) SetPolicy(p Policy) (EffectiveToolPolicy, error) {
	if !p.Valid() {
		return EffectiveToolPolicy{}, fmt.Errorf("set effect policy: invalid value %d", int(p))
	}
	b.setMu.Lock()
	defer b.setMu.Unlock()
	if !p.NoLooserThan(b.launch.policy) {
		return EffectiveToolPolicy{}, fmt.Errorf("set effect policy %s: %w %s; a session may only tighten it (start octet with a looser --effect-policy to allow more)", p, ErrPolicyLooser, b.launch.policy)
	}
	if p == b.launch.policy {
		b.confine.Set(false)
		b.state.Store(b.launch)
		b.watch.notify(p)
		return b.launch.effective, nil
	}
	eff := b.launch.effective
	eff.EffectPolicy = Setting[Policy]{Value: p, Source: SourceSession}
	eff.Sandbox = SandboxForPolicy(eff.Sandbox, p)
	if p != UnsafeHost && !eff.WorkspaceConfinement.Value {
		eff.WorkspaceConfinement = Setting[bool]{Value: true, Source: SourceSession}
		b.confine.Set(true)
	}
	b.state.Store(newPolicyState(eff))
	b.watch.notify(p)
	return eff, nil
}

// OnPolicyChange calls f with the new policy after every SetPolicy of
// this broker or of any broker sharing its policy (a clone), in the
// order the changes were made, until the returned stop is called. f runs
// on the caller of SetPolicy, which it holds: what depends on the
// session's authority (an executable extension, say) is stopped by a
// tightening before SetPolicy returns. f must not call SetPolicy.
func (b *Broker) OnPolicyChange(f func(Policy)) (stop func()) {
	w := b.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.next
	w.next++
	w.fs[id] = f
	return func() {
		w.mu.Lock()
		delete(w.fs, id)
		w.mu.Unlock()
	}
}

func (w *policyWatchers) notify(p Policy) {
	w.mu.Lock()
	fs := make([]func(Policy), 0, len(w.fs))
	for id := range w.next {
		if f, ok := w.fs[id]; ok {
			fs = append(fs, f)
		}
	}
	w.mu.Unlock()
	for _, f := range fs {
		f(p)
	}
}

// Offers reports whether the model should be offered t under the
// current policy: a tool that states its effects (EffectStater) is
// offered only when the policy could admit or confirm one of them, so a
// session is never shown tools whose every call it would deny. The
// decision at each call is still the broker's.
func (b *Broker) Offers(t Tool) bool { return b.Policy().offers(t) }

// Clone returns the broker of a delegated child agent. It shares this
// broker's policy and grant store: the launch policy, the live current
// policy (a SetPolicy on either applies to both from their next
// admission), the standing-approval rules and the grant store, and it has
// the same hooks, limits, redactor and confinement switch. A child has
// exactly its parent's authority, not an attenuated one. principal, when
// non-empty, names the child in its intents; approver, when non-nil, asks
// for the child's confirmations (so a prompt can name the child).
func (b *Broker) Clone(principal string, approver Approver) *Broker {
	c := &Broker{
		launch: b.launch, state: b.state, setMu: b.setMu, watch: b.watch, approver: b.approver, approvalTimeout: b.approvalTimeout,
		hooks: b.hooks, maxResult: b.maxResult, principal: b.principal,
		grants: b.grants, log: b.log, redact: b.redact, rules: b.rules, confine: b.confine, buffers: b.buffers,
	}
	if principal != "" {
		c.principal = principal
	}
	if approver != nil {
		c.approver = approver
	}
	return c
}

// Grants returns the grant store, to share it with a clone.
func (b *Broker) Grants() *GrantStore { return b.grants }

// DispatchRequest is one model-emitted call to admit.
type DispatchRequest struct {
	// Principal overrides BrokerConfig.Principal when non-empty.
	Principal string
	// RunID identifies the driven run.
	RunID string
	// CallID is the provider call id.
	CallID string
	// Tool is the called tool's name.
	Tool string
	// Arguments are the raw JSON arguments the model emitted.
	Arguments json.RawMessage
}

// DispatchObserver receives a call's evidence as it happens. Every field
// may be nil.
type DispatchObserver struct {
	// OnConfirm is called just before the Approver with the request.
	OnConfirm func(ConfirmRequest)
	// OnDecision is called exactly once per call with the final decision,
	// by whichever step finalizes it: Admit for a denial, Execute (after
	// hooks and commit, before the tool runs) or Revoke otherwise. The
	// caller emits tool_policy_decision from it.
	OnDecision func(ToolPolicyDecision)
	// OnProgress receives the tool's bounded incremental output.
	OnProgress func(text string)
	// OnIntent, when set, keeps what a file-changing tool is about to
	// change (an edit's records, their images already in the store; bash's
	// prior snapshot) durably, before it changes it; an error stops the
	// tool (nothing is changed).
	OnIntent func(in changes.Intent) error
}

// Dispatch runs the whole pipeline for one call: Admit, then Execute. The
// result of a denial is the static paired error (IsError set).
func (b *Broker) Dispatch(ctx context.Context, host *Host, req DispatchRequest, obs DispatchObserver) (Result, ToolPolicyDecision) {
	adm, d := b.Admit(ctx, host, req, obs)
	if adm == nil {
		return d.DenialResult(), d
	}
	return adm.Execute(ctx)
}

// Admit resolves, validates, classifies and decides one call, asking the
// Approver when the policy requires confirmation, and reserves admission.
// On denial it returns a nil Admission and the final denied decision
// (already passed to obs.OnDecision); nothing else saw the call. On
// success the returned decision is not final (its Decision is empty): the
// caller runs Admission.Execute or Admission.Revoke.
func (b *Broker) Admit(ctx context.Context, host *Host, req DispatchRequest, obs DispatchObserver) (*Admission, ToolPolicyDecision) {
	ps := b.state.Load() // the whole call is decided under one policy
	deny := func(reason string, eff Effect) (*Admission, ToolPolicyDecision) {
		d := ps.decision(req.CallID, DecisionDenied, reason, eff)
		if obs.OnDecision != nil {
			obs.OnDecision(d)
		}
		return nil, d
	}
	if ctx.Err() != nil {
		return deny(ReasonCancelled, Unknown)
	}
	if host == nil {
		return deny(ReasonUnknownTool, Unknown)
	}
	entry, ok := host.entry(req.Tool)
	if !ok {
		return deny(ReasonUnknownTool, Unknown)
	}
	tool := entry.tool
	args, err := CanonicalArguments(req.Arguments)
	if err == nil {
		err = entry.validate(args)
	}
	var eff Effect
	if err == nil {
		eff, err = safeClassify(tool, args)
	}
	if err != nil {
		b.log.Debug("tool call arguments rejected", "tool", req.Tool, "call_id", req.CallID, "err", err)
		return deny(ReasonInvalidArguments, Unknown)
	}
	principal := req.Principal
	if principal == "" {
		principal = b.principal
	}
	intent, err := newCanonicalIntent(EffectIntent{
		Principal:         principal,
		RunID:             req.RunID,
		CatalogGeneration: host.Generation(),
		CallID:            req.CallID,
		Tool:              tool.Name(),
		Effect:            eff,
		Arguments:         args,
		PolicyVersion:     ps.version,
	})
	if err != nil {
		b.log.Debug("effect intent rejected", "tool", req.Tool, "err", err)
		return deny(ReasonInvalidArguments, eff)
	}
	facts := b.facts(ps, tool, eff, args)
	if reason := ps.capabilityGate(facts); reason != "" {
		return deny(reason, eff)
	}
	v, reason := ps.policy.decide(facts)
	adm := &Admission{b: b, ps: ps, host: host, tool: tool, intent: intent, digest: intent.Digest(), obs: obs}
	if facts.shell && eff == HostProcess {
		sb, _ := ps.callSandbox(v == verdictAdmit && reason == ReasonReadOnlyCommand, facts.esc)
		adm.sandbox = &sb
	}
	if v != verdictDeny && readsDisk(eff) {
		// Before anyone is asked and before it runs: the editor saves
		// the agent's edits, and the approval names what still differs.
		adm.unsaved = b.buffers.before(ctx, tool.Name())
	}
	switch v {
	case verdictAdmit:
		adm.reason = reason
	case verdictConfirm:
		if d, denied := b.admitConfirmed(ctx, ps, adm, facts, args); denied {
			if obs.OnDecision != nil {
				obs.OnDecision(d)
			}
			return nil, d
		}
	default:
		return deny(reason, eff)
	}
	return adm, ToolPolicyDecision{CallID: req.CallID, Effect: eff, EffectiveToolPolicy: ps.effective}
}

// admitConfirmed settles a call the policy confirms: a standing approval
// of exactly its tool, effect and scope admits it (checked again at
// commit); otherwise the person is asked, and an approval mints the grant
// and, when asked for, grants a standing approval. It returns the final
// denial when the call is not approved.
func (b *Broker) admitConfirmed(ctx context.Context, ps *policyState, adm *Admission, f callFacts, args json.RawMessage) (ToolPolicyDecision, bool) {
	scope, scoped := b.ruleScope(ps, adm.tool, f, args)
	var sp *ApprovalScope
	if scoped {
		if r, ok := b.matchRule(ps, adm.intent.Tool, f.effect, scope); ok {
			adm.reason, adm.ruleID = ReasonSessionRule, r.ID
			return ToolPolicyDecision{}, false
		}
		sp = &scope
	}
	c := b.confirm(ctx, adm, sp)
	if c.reason != ReasonApproved {
		d := ps.decision(adm.intent.CallID, DecisionDenied, c.reason, f.effect)
		d.Note = c.note
		return d, true
	}
	adm.grant, adm.reason, adm.digest = &c.grant, ReasonApproved, c.digest
	if c.forSession { // only offered with a scope
		adm.reason, adm.ruleID = b.grantRule(ps, adm.intent, scope)
	}
	return ToolPolicyDecision{}, false
}

// grantRule records the standing approval the person asked for with this
// call's approval. The call itself is approved either way; when the rule
// cannot be recorded it is approved once (logged).
func (b *Broker) grantRule(ps *policyState, intent EffectIntent, scope ApprovalScope) (reason, ruleID string) {
	r, err := b.rules.AddRule(StandingRule{Tool: intent.Tool, Effect: intent.Effect, Scope: scope, Policy: ps.policy, Created: time.Now().UTC()})
	if err != nil {
		b.log.Warn("standing approval not recorded; the call is approved once", "tool", intent.Tool, "call_id", intent.CallID, "err", err)
		return ReasonApproved, ""
	}
	return ReasonApprovedForSession, r.ID
}

// facts derives the host-owned facts a policy decides on. A shell call
// that asks for more than its sandbox (SandboxEscalator) is escalated: a
// person approves it under every policy, and it is never auto-approved
// as a read. The read-only check only matters, and only runs, under
// Controlled: it parses the
// command first (cheap, syntactic) and looks at the environment and the
// filesystem only for a command that passes. Why a call is not
// auto-approved goes to the debug log, never to the model.
func (b *Broker) facts(ps *policyState, tool Tool, eff Effect, args json.RawMessage) callFacts {
	f := callFacts{effect: eff}
	sc, ok := tool.(ShellCommander)
	if !ok || eff != HostProcess {
		return f
	}
	f.shell = true
	if se, ok := tool.(SandboxEscalator); ok {
		esc, err := safeEscalation(se, args)
		if err != nil {
			// Unreadable: ask, as for an escalation, rather than guess.
			b.log.Debug("sandbox escalation unreadable", "tool", tool.Name(), "err", err)
			f.escalated = true
			return f
		}
		f.esc = esc
		_, f.escalated = ps.callSandbox(false, esc)
	}
	if ps.policy != Controlled || f.escalated {
		return f
	}
	call, err := safeShellCommand(sc, args)
	if err == nil {
		err = CheckReadOnly(call)
	}
	if err != nil {
		b.log.Debug("shell call needs confirmation", "tool", tool.Name(), "reason", err)
	}
	f.readOnly = err == nil
	return f
}

// capabilityGate applies the effective allow_process / allow_shell gates,
// which no policy bypasses. It returns a denial reason or "".
func (ps *policyState) capabilityGate(f callFacts) string {
	if f.effect != HostProcess {
		return ""
	}
	if !ps.effective.AllowProcess.Value || (f.shell && !ps.effective.AllowShell.Value) {
		return ReasonCapabilityDisabled
	}
	return ""
}

// confirmed is the outcome of asking: ReasonApproved with a grant (and
// whether a standing approval was asked for), or a denial reason with
// the person's note, if any.
type confirmed struct {
	grant      Grant
	digest     string // what grant is bound to
	reason     string
	forSession bool
	note       string
}

// confirm asks the approver and mints a grant bound to digest when the
// exact digest is approved in time. scope is what a standing approval
// would cover (nil: none can be granted). When the preview names the
// state its diff was computed against (Preview.Binding), the digest asked
// for and bound is BindDigest(digest, binding).
//
// sb, when set, is the sandbox the call will run under: the title says it
// (an escalation plainly: "runs WITHOUT the sandbox: full disk and
// network access") and the digest is bound to it, so an approval of the
// call in its sandbox never grants it without.
func (b *Broker) confirm(ctx context.Context, adm *Admission, scope *ApprovalScope) confirmed {
	tool, intent, digest, sb, obs := adm.tool, adm.intent, adm.digest, adm.sandbox, adm.obs
	deny := func(reason string) confirmed { return confirmed{reason: reason} }
	if b.approver == nil {
		return deny(ReasonApprovalUnavailable)
	}
	expires := time.Now().Add(b.approvalTimeout)
	actx, cancel := context.WithDeadline(ctx, expires)
	defer cancel()
	req := ConfirmRequest{Intent: intent, ExpiresAt: expires, Scope: scope}
	var whole bool
	var binding string
	req.Title, req.Detail, req.Diff, binding, whole = b.preview(actx, tool, intent)
	if note := unsavedNote(adm.unsaved); note != "" {
		if req.Detail != "" {
			req.Detail += "\n\n"
		}
		req.Detail += approvalText(note)
		whole = whole && len(req.Detail) <= MaxPreviewDetail
	}
	if binding != "" {
		digest = BindDigest(digest, binding)
	}
	if sb != nil {
		req.Sandbox = sb.Label()
		req.Title = approvalLine(req.Title + " — " + sb.approvalLabel())
		whole = whole && len(req.Title) <= MaxPreviewTitle
		digest = BindDigest(digest, "sandbox:"+sb.Label())
	}
	req.Digest = digest
	if !whole {
		// An approval never shows less than what will run.
		return deny(ReasonPreviewTooLarge)
	}
	if obs.OnConfirm != nil {
		obs.OnConfirm(req)
	}
	ans, err := b.ask(actx, req)
	switch {
	case ctx.Err() != nil:
		return deny(ReasonCancelled)
	case actx.Err() != nil || !time.Now().Before(expires):
		return deny(ReasonApprovalExpired)
	case errors.Is(err, ErrApprovalExpired):
		return deny(ReasonApprovalExpired)
	case errors.Is(err, ErrPreviewTooLarge):
		b.log.Debug("approver cannot show the call whole", "tool", intent.Tool, "call_id", intent.CallID, "err", err)
		return deny(ReasonPreviewTooLarge)
	case err != nil:
		b.log.Debug("approver failed", "tool", intent.Tool, "call_id", intent.CallID, "err", err)
		return deny(ReasonApprovalDenied)
	case !ans.Approved:
		return confirmed{reason: ReasonApprovalDenied, note: denialNote(ans.Reason)}
	case ans.Digest != digest:
		return deny(ReasonApprovalDenied)
	}
	g, err := b.grants.Mint(digest)
	if err != nil {
		b.log.Debug("grant not minted", "call_id", intent.CallID, "err", err)
		return deny(ReasonApprovalDenied)
	}
	return confirmed{grant: g, digest: digest, reason: ReasonApproved, forSession: ans.ForSession && scope != nil}
}

// ask runs the approver in its own goroutine so that one which ignores
// its context cannot hold the run past the request's deadline or a
// cancellation; its late answer is discarded.
func (b *Broker) ask(ctx context.Context, req ConfirmRequest) (Approval, error) {
	type answer struct {
		a   Approval
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		a, err := safeConfirm(b.approver, ctx, req)
		ch <- answer{a, err}
	}()
	select {
	case ans := <-ch:
		return ans.a, ans.err
	case <-ctx.Done():
		return Approval{}, ctx.Err()
	}
}

// preview builds the prompt text from the tool's Previewer, falling back
// to the tool name and the canonical arguments, rendered with
// approvalText: controls, invisible characters and long blank runs are
// made visible, nothing is removed. whole is false when a field's
// rendering exceeds its bound (or the Previewer says the call is too
// large to show): the call must then not be put to a person at all.
func (b *Broker) preview(ctx context.Context, tool Tool, intent EffectIntent) (title, detail, diff, binding string, whole bool) {
	if pv, ok := tool.(Previewer); ok {
		// The call id lets a file tool bind what it shows to the call
		// that executes (see shownPriors).
		p, err := safePreview(withPreviewCall(ctx, intent.CallID, intent.Principal), pv, intent.Arguments)
		if errors.Is(err, ErrPreviewTooLarge) {
			return "", "", "", "", false
		}
		if err == nil {
			title, detail, diff, whole = renderPreview(p.Title, p.Detail, p.Diff)
			return title, detail, diff, p.Binding, whole
		}
		b.log.Debug("preview failed", "tool", intent.Tool, "call_id", intent.CallID, "err", err)
	}
	title, detail, diff, whole = renderPreview(fmt.Sprintf("%s (%s)", intent.Tool, intent.Effect), string(intent.Arguments), "")
	return title, detail, diff, "", whole
}

// renderPreview renders the three fields for a prompt and reports whether
// each fits its bound whole.
func renderPreview(title, detail, diff string) (string, string, string, bool) {
	title, detail, diff = approvalLine(title), approvalText(detail), approvalText(diff)
	whole := len(title) <= MaxPreviewTitle && len(detail) <= MaxPreviewDetail && len(diff) <= MaxPreviewDiff
	return title, detail, diff, whole
}

// decision builds evidence for a call decided under ps.
func (ps *policyState) decision(callID, decision, reason string, eff Effect) ToolPolicyDecision {
	return ToolPolicyDecision{
		CallID:              callID,
		Decision:            decision,
		Reason:              reason,
		Effect:              eff,
		EffectiveToolPolicy: ps.effective,
	}
}
