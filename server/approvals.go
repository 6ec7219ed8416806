package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// This file is the v1.1 approval choices: "approve_for_session" standing
// rules kept in the session ledger (octet/approvals/list, revoke), a
// denial's reason, and per-session effect policy (octet/session/setPolicy,
// session/new effectPolicy). The broker (tools) alone matches rules; the
// server only keeps them durable and shows them.

// Decisions an octet/confirmEffect answer may carry.
const (
	decisionApprove           = "approve"
	decisionApproveForSession = "approve_for_session"
	decisionDeny              = "deny"
)

// Actions of the window/showMessageRequest fallback.
const (
	actionApprove           = "Approve"
	actionApproveForSession = "Approve for session"
	actionDeny              = "Deny"
)

// confirmAnswer decodes the client's octet/confirmEffect answer: only
// "approve" or "approve_for_session" echoing the request's digest
// approves; anything else (an unknown decision, another digest, a result
// that does not decode) denies.
func (s *Server) confirmAnswer(pa *pendingApproval, raw json.RawMessage) approvalAnswer {
	var ans struct {
		Decision string `json:"decision"`
		Digest   string `json:"digest"`
		Reason   string `json:"reason"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		s.log.Warn("undecodable octet/confirmEffect answer; denied", "error", err)
		return approvalAnswer{}
	}
	approve := ans.Decision == decisionApprove || ans.Decision == decisionApproveForSession
	if approve && !sameDigest(ans.Digest, pa.params.Digest) {
		s.log.Warn("approval echoed a different digest; denied", "call", pa.params.CallID)
		return approvalAnswer{}
	}
	if !approve {
		if ans.Decision != decisionDeny {
			s.log.Warn("unknown octet/confirmEffect decision; denied", "call", pa.params.CallID, "decision", truncate(ans.Decision, 40))
		}
		return approvalAnswer{Reason: ans.Reason}
	}
	return approvalAnswer{Approved: true, ForSession: ans.Decision == decisionApproveForSession}
}

// fallbackActions are the buttons of a stock client's approval: "Approve
// for session" only when the call can be covered by a standing rule.
func fallbackActions(p confirmParams) []protocol.MessageActionItem {
	if p.RuleScope == nil {
		return []protocol.MessageActionItem{{Title: actionApprove}, {Title: actionDeny}}
	}
	return []protocol.MessageActionItem{{Title: actionApprove}, {Title: actionApproveForSession}, {Title: actionDeny}}
}

// fallbackAnswer maps the chosen action's title to an answer.
func fallbackAnswer(title string) approvalAnswer {
	switch title {
	case actionApprove:
		return approvalAnswer{Approved: true}
	case actionApproveForSession:
		return approvalAnswer{Approved: true, ForSession: true}
	}
	return approvalAnswer{}
}

// maxRules bounds the standing approvals of one session; beyond it an
// "approve_for_session" approves the call once.
const maxRules = 1000

// ruleBook is one session's standing approvals and recorded policy, kept
// in its ledger's approval records. Nothing is cached: every use folds
// the records again after following appends of other processes
// (Session.Refresh), so a revocation made by any writer of the session
// holds at once. It implements tools.RuleStore.
type ruleBook struct {
	sess *session.Session
	log  *slog.Logger
	mu   sync.Mutex // serializes this process's changes
}

var _ tools.RuleStore = (*ruleBook)(nil)

func newRuleBook(sess *session.Session, log *slog.Logger) *ruleBook {
	return &ruleBook{sess: sess, log: log}
}

// state folds the ledger's approval records: the rules in force and the
// last recorded policy ("" for none). A grant octet cannot read back
// exactly (an unknown effect or policy, a newer writer's) is left out: a
// rule is never widened by guessing. When the ledger cannot be followed
// there are no rules (fail closed).
func (b *ruleBook) state() (rules []tools.StandingRule, policy string) {
	if _, err := b.sess.Refresh(); err != nil {
		b.log.Warn("standing approvals unavailable", "session", b.sess.Header().ID, "error", err)
		return nil, ""
	}
	for _, a := range b.sess.Approvals() {
		switch a.Op {
		case session.ApprovalGrant:
			r, err := ruleOf(a)
			if err != nil {
				b.log.Warn("standing approval left out", "session", b.sess.Header().ID, "rule", a.RuleID, "error", err)
				continue
			}
			rules = append(rules, r)
		case session.ApprovalRevoke:
			rules = slices.DeleteFunc(rules, func(r tools.StandingRule) bool { return r.ID == a.RuleID })
		case session.ApprovalPolicy:
			policy = a.Policy
		}
	}
	return rules, policy
}

// ruleOf converts a grant record to a rule.
func ruleOf(a session.Approval) (tools.StandingRule, error) {
	eff, ok := tools.ParseEffect(a.Effect)
	if !ok || eff == tools.Unknown {
		return tools.StandingRule{}, fmt.Errorf("unknown effect %q", a.Effect)
	}
	pol, err := tools.ParsePolicy(a.Policy)
	if err != nil {
		return tools.StandingRule{}, err
	}
	return tools.StandingRule{
		ID: a.RuleID, Tool: a.Tool, Effect: eff, Policy: pol, Created: a.Time,
		Scope: tools.ApprovalScope{Path: a.Path, Command: a.Command, TimeoutMs: a.TimeoutMs, Dir: a.Dir, Env: a.EnvDigest},
	}, nil
}

// Rules implements tools.RuleStore.
func (b *ruleBook) Rules() []tools.StandingRule {
	rules, _ := b.state()
	return rules
}

// AddRule implements tools.RuleStore: the grant is durable before the
// rule applies.
func (b *ruleBook) AddRule(r tools.StandingRule) (tools.StandingRule, error) {
	r.ID = "rule_" + randomHex(8)
	if r.Created.IsZero() {
		r.Created = time.Now().UTC()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if rules, _ := b.state(); len(rules) >= maxRules {
		return tools.StandingRule{}, fmt.Errorf("session has %d standing approvals, the most it keeps: revoke some with octet/approvals/revoke", len(rules))
	}
	err := b.sess.Append(session.ApprovalRecord(session.Approval{
		Op: session.ApprovalGrant, RuleID: r.ID, Tool: r.Tool, Effect: r.Effect.String(),
		Path: r.Scope.Path, Command: r.Scope.Command, TimeoutMs: r.Scope.TimeoutMs, Dir: r.Scope.Dir, EnvDigest: r.Scope.Env,
		Policy: r.Policy.String(), Time: r.Created,
	}))
	if err != nil {
		return tools.StandingRule{}, fmt.Errorf("record standing approval: %w", err)
	}
	return r, nil
}

// errNoRule: octet/approvals/revoke of a rule the session does not have.
var errNoRule = errors.New("no such standing approval")

// revoke durably revokes rule id.
func (b *ruleBook) revoke(id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	rules, _ := b.state()
	if !slices.ContainsFunc(rules, func(r tools.StandingRule) bool { return r.ID == id }) {
		return errNoRule
	}
	err := b.sess.Append(session.ApprovalRecord(session.Approval{Op: session.ApprovalRevoke, RuleID: id, Time: time.Now().UTC()}))
	if err != nil {
		return fmt.Errorf("record revocation: %w", err)
	}
	return nil
}

// setPolicy moves broker to p, recording it first.
func (b *ruleBook) setPolicy(broker *tools.Broker, p tools.Policy) (tools.EffectiveToolPolicy, error) {
	if !p.NoLooserThan(broker.LaunchPolicy()) {
		return broker.SetPolicy(p) // the broker's refusal says why
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.sess.Append(session.ApprovalRecord(session.Approval{Op: session.ApprovalPolicy, Policy: p.String(), Time: time.Now().UTC()}))
	if err != nil {
		return tools.EffectiveToolPolicy{}, fmt.Errorf("record effect policy: %w", err)
	}
	return broker.SetPolicy(p)
}

// recordedPolicy is the effect policy the session last recorded (nil:
// none, or one this build does not know).
func (b *ruleBook) recordedPolicy() *tools.Policy {
	_, name := b.state()
	if name == "" {
		return nil
	}
	p, err := tools.ParsePolicy(name)
	if err != nil {
		return nil
	}
	return &p
}

// restorePolicy applies the session's recorded policy to broker when it
// is still no looser than the launch policy; a recorded policy looser
// than today's launch policy (the configuration was tightened since) is
// not applied: the launch policy is the stricter one.
func (b *ruleBook) restorePolicy(broker *tools.Broker) {
	_, name := b.state()
	if name == "" {
		return
	}
	p, err := tools.ParsePolicy(name)
	if err == nil {
		_, err = broker.SetPolicy(p)
	}
	if err != nil {
		b.log.Warn("session effect policy not restored; using the launch policy", "session", b.sess.Header().ID, "policy", name, "error", err)
	}
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf) // crypto/rand.Read never fails
	return hex.EncodeToString(buf)
}

// approvalsHandle is what a session handle offers for the v1.1 approval
// methods (runtimeSession does).
type approvalsHandle interface {
	Rules() []tools.StandingRule
	RevokeRule(id string) error
	SetEffectPolicy(p tools.Policy) (tools.EffectiveToolPolicy, error)
}

func (s *runtimeSession) Rules() []tools.StandingRule { return s.rules.Rules() }

func (s *runtimeSession) RevokeRule(id string) error { return s.rules.revoke(id) }

func (s *runtimeSession) SetEffectPolicy(p tools.Policy) (tools.EffectiveToolPolicy, error) {
	return s.rules.setPolicy(s.built.Agent.Broker(), p)
}

// approvalsOf returns the open session id and its approval handle.
func (s *Server) approvalsOf(id string) (*sessionState, approvalsHandle, error) {
	ss, err := s.session(id)
	if err != nil {
		return nil, nil, err
	}
	h, ok := ss.handle.(approvalsHandle)
	if !ok {
		return nil, nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("session %s does not support approval rules", ss.id))
	}
	return ss, h, nil
}

// ruleView is one row of octet/approvals/list.
type ruleView struct {
	RuleID    string              `json:"ruleId"`
	Tool      string              `json:"tool"`
	Effect    string              `json:"effect"`
	Scope     tools.ApprovalScope `json:"scope"`
	Policy    string              `json:"policy"`
	CreatedAt time.Time           `json:"createdAt"`
}

// approvalsList handles octet/approvals/list.
func (s *Server) approvalsList(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	id, err := sessionIDParam(raw)
	if err != nil {
		return nil, err
	}
	ss, h, err := s.approvalsOf(id)
	if err != nil {
		return nil, err
	}
	rules := []ruleView{}
	for _, r := range h.Rules() {
		rules = append(rules, ruleView{RuleID: r.ID, Tool: r.Tool, Effect: r.Effect.String(), Scope: r.Scope, Policy: r.Policy.String(), CreatedAt: r.Created.UTC()})
	}
	return rawResult(map[string]any{"pending": s.pendingViews(ss), "rules": rules})
}

// pendingViews is the octet/confirmEffect params of every approval ss
// is waiting for, oldest first.
func (s *Server) pendingViews(ss *sessionState) []confirmParams {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return viewsOf(ss.pendingSorted())
}

// pendingSorted returns the pending approvals, oldest first. The caller
// holds ss.mu.
func (ss *sessionState) pendingSorted() []*pendingApproval {
	pending := make([]*pendingApproval, 0, len(ss.pending))
	for _, pa := range ss.pending {
		pending = append(pending, pa)
	}
	slices.SortFunc(pending, func(a, b *pendingApproval) int { return a.created.Compare(b.created) })
	return pending
}

// viewsOf returns the octet/confirmEffect params of each approval.
func viewsOf(pending []*pendingApproval) []confirmParams {
	views := make([]confirmParams, 0, len(pending))
	for _, pa := range pending {
		views = append(views, pa.params)
	}
	return views
}

// approvalsRevoke handles octet/approvals/revoke.
func (s *Server) approvalsRevoke(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		RuleID    string `json:"ruleId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.RuleID == "" {
		return nil, invalidParams("ruleId is required")
	}
	ss, h, err := s.approvalsOf(p.SessionID)
	if err != nil {
		return nil, err
	}
	switch err := h.RevokeRule(p.RuleID); {
	case errors.Is(err, errNoRule):
		return nil, invalidParams("session %s has no standing approval %q (octet/approvals/list shows them)", ss.id, truncate(p.RuleID, 80))
	case err != nil:
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("revoke %s in session %s: %v", p.RuleID, ss.id, err))
	}
	s.log.Info("standing approval revoked", "session", ss.id, "rule", p.RuleID)
	return json.RawMessage(`{}`), nil
}

// sessionSetPolicy handles octet/session/setPolicy. The new policy
// applies from the next tool call's admission: a call already admitted
// (or whose approval is on screen) keeps the decision it was admitted
// under, and a run in progress continues under the new policy from its
// next call.
func (s *Server) sessionSetPolicy(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID    string `json:"sessionId"`
		EffectPolicy string `json:"effectPolicy"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.EffectPolicy == "" {
		return nil, invalidParams("effectPolicy is required (controlled_bash_approval, controlled or unsafe_host)")
	}
	pol, err := tools.ParsePolicy(p.EffectPolicy)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	ss, h, err := s.approvalsOf(p.SessionID)
	if err != nil {
		return nil, err
	}
	eff, err := h.SetEffectPolicy(pol)
	switch {
	case errors.Is(err, tools.ErrPolicyLooser):
		return nil, invalidParams("session %s: %v", ss.id, err)
	case err != nil:
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("set effect policy of %s: %v", ss.id, err))
	}
	s.log.Info("session effect policy set", "session", ss.id, "policy", pol.String())
	return rawResult(eff)
}

// applyEffectPolicy applies octet/session/new's effectPolicy (recorded in
// the ledger like setPolicy).
func (s *runtimeSession) applyEffectPolicy(name string) error {
	p, err := tools.ParsePolicy(name)
	if err != nil {
		return err
	}
	_, err = s.SetEffectPolicy(p)
	return err
}
