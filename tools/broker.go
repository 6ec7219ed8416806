package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
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
}

// Approval is an approver's answer. An answer whose Digest differs from
// the request's is a denial.
type Approval struct {
	// Approved is the person's answer.
	Approved bool
	// Digest echoes the request's Digest.
	Digest string
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
}

// Broker is the deterministic admission reference monitor: it classifies,
// decides, confirms, reserves and commits every tool call. It is not an OS
// sandbox. A Broker is immutable after NewBroker and safe for concurrent
// use.
type Broker struct {
	policy          Policy
	approver        Approver
	approvalTimeout time.Duration
	hooks           []Hooks
	effective       EffectiveToolPolicy
	policyVersion   string
	maxResult       int
	principal       string
	grants          *GrantStore
	log             *slog.Logger
	redact          *Redactor
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
		policy:          p,
		approver:        cfg.Approver,
		approvalTimeout: cfg.ApprovalTimeout,
		hooks:           append([]Hooks(nil), cfg.Hooks...),
		effective:       eff,
		policyVersion:   eff.version(),
		maxResult:       cfg.MaxResultBytes,
		principal:       cfg.Principal,
		grants:          cfg.Grants,
		log:             cfg.Logger,
		redact:          cfg.Redactor,
	}
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
func (b *Broker) Policy() Policy { return b.policy }

// EffectiveToolPolicy returns the evidence snapshot (octet/policy).
func (b *Broker) EffectiveToolPolicy() EffectiveToolPolicy { return b.effective }

// PolicyVersion returns the policy version recorded in every intent.
func (b *Broker) PolicyVersion() string { return b.policyVersion }

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
	deny := func(reason string, eff Effect) (*Admission, ToolPolicyDecision) {
		d := b.decision(req.CallID, DecisionDenied, reason, eff)
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
		PolicyVersion:     b.policyVersion,
	})
	if err != nil {
		b.log.Debug("effect intent rejected", "tool", req.Tool, "err", err)
		return deny(ReasonInvalidArguments, eff)
	}
	facts := b.facts(tool, eff, args)
	if reason := b.capabilityGate(facts); reason != "" {
		return deny(reason, eff)
	}
	v, reason := b.policy.decide(facts)
	adm := &Admission{b: b, host: host, tool: tool, intent: intent, digest: intent.Digest(), obs: obs}
	switch v {
	case verdictAdmit:
		adm.reason = reason
	case verdictConfirm:
		g, digest, reason := b.confirm(ctx, tool, intent, adm.digest, obs)
		if reason != ReasonApproved {
			return deny(reason, eff)
		}
		adm.grant, adm.digest = &g, digest
		adm.reason = ReasonApproved
	default:
		return deny(reason, eff)
	}
	return adm, ToolPolicyDecision{CallID: req.CallID, Effect: eff, EffectiveToolPolicy: b.effective}
}

// facts derives the host-owned facts a policy decides on. The read-only
// check only matters, and only runs, under Controlled: it parses the
// command first (cheap, syntactic) and looks at the environment and the
// filesystem only for a command that passes. Why a call is not
// auto-approved goes to the debug log, never to the model.
func (b *Broker) facts(tool Tool, eff Effect, args json.RawMessage) callFacts {
	f := callFacts{effect: eff}
	sc, ok := tool.(ShellCommander)
	if !ok || eff != HostProcess {
		return f
	}
	f.shell = true
	if b.policy != Controlled {
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
func (b *Broker) capabilityGate(f callFacts) string {
	if f.effect != HostProcess {
		return ""
	}
	if !b.effective.AllowProcess.Value || (f.shell && !b.effective.AllowShell.Value) {
		return ReasonCapabilityDisabled
	}
	return ""
}

// confirm asks the approver and mints a grant bound to digest when the
// exact digest is approved in time. When the preview names the state its
// diff was computed against (Preview.Binding), the digest asked for and
// bound is BindDigest(digest, binding). It returns ReasonApproved with the
// grant and the digest it is bound to, or a denial reason.
func (b *Broker) confirm(ctx context.Context, tool Tool, intent EffectIntent, digest string, obs DispatchObserver) (Grant, string, string) {
	g, reason := b.confirmBound(ctx, tool, intent, &digest, obs)
	return g, digest, reason
}

// confirmBound is confirm; *digest is updated when the preview binds it.
func (b *Broker) confirmBound(ctx context.Context, tool Tool, intent EffectIntent, digest *string, obs DispatchObserver) (Grant, string) {
	if b.approver == nil {
		return Grant{}, ReasonApprovalUnavailable
	}
	expires := time.Now().Add(b.approvalTimeout)
	actx, cancel := context.WithDeadline(ctx, expires)
	defer cancel()
	req := ConfirmRequest{Intent: intent, ExpiresAt: expires}
	var whole bool
	var binding string
	req.Title, req.Detail, req.Diff, binding, whole = b.preview(actx, tool, intent)
	if binding != "" {
		*digest = BindDigest(*digest, binding)
	}
	req.Digest = *digest
	if !whole {
		// An approval never shows less than what will run.
		return Grant{}, ReasonPreviewTooLarge
	}
	if obs.OnConfirm != nil {
		obs.OnConfirm(req)
	}
	ans, err := b.ask(actx, req)
	switch {
	case ctx.Err() != nil:
		return Grant{}, ReasonCancelled
	case actx.Err() != nil || !time.Now().Before(expires):
		return Grant{}, ReasonApprovalExpired
	case errors.Is(err, ErrApprovalExpired):
		return Grant{}, ReasonApprovalExpired
	case errors.Is(err, ErrPreviewTooLarge):
		b.log.Debug("approver cannot show the call whole", "tool", intent.Tool, "call_id", intent.CallID, "err", err)
		return Grant{}, ReasonPreviewTooLarge
	case err != nil:
		b.log.Debug("approver failed", "tool", intent.Tool, "call_id", intent.CallID, "err", err)
		return Grant{}, ReasonApprovalDenied
	case !ans.Approved || ans.Digest != *digest:
		return Grant{}, ReasonApprovalDenied
	}
	g, err := b.grants.Mint(*digest)
	if err != nil {
		b.log.Debug("grant not minted", "call_id", intent.CallID, "err", err)
		return Grant{}, ReasonApprovalDenied
	}
	return g, ReasonApproved
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
		p, err := safePreview(withPreviewCall(ctx, intent.CallID), pv, intent.Arguments)
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
	title, detail, diff = approvalText(title), approvalText(detail), approvalText(diff)
	whole := len(title) <= MaxPreviewTitle && len(detail) <= MaxPreviewDetail && len(diff) <= MaxPreviewDiff
	return title, detail, diff, whole
}

// decision builds evidence for a call.
func (b *Broker) decision(callID, decision, reason string, eff Effect) ToolPolicyDecision {
	return ToolPolicyDecision{
		CallID:              callID,
		Decision:            decision,
		Reason:              reason,
		Effect:              eff,
		EffectiveToolPolicy: b.effective,
	}
}
