package host

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// maxRules bounds the standing approvals of one session; beyond it an
// "approve for session" approves the call once.
const maxRules = 1000

// RuleBook is one session's standing approvals and recorded effect
// policy, kept in its ledger's approval records, for every dialect over
// the host. Nothing is cached: every use folds the records again after
// following appends of other processes (Session.Refresh), so a
// revocation made by any writer of the session holds at once. It
// implements tools.RuleStore: install it as AgentSpec.Rules. The broker
// (tools) alone matches rules; the rule book only keeps them durable.
type RuleBook struct {
	sess *session.Session
	log  *slog.Logger
	mu   sync.Mutex // serializes this process's changes
}

var _ tools.RuleStore = (*RuleBook)(nil)

// NewRuleBook returns the rule book of sess.
func NewRuleBook(sess *session.Session, log *slog.Logger) *RuleBook {
	return &RuleBook{sess: sess, log: log}
}

// state folds the ledger's approval records: the rules in force and the
// last recorded policy ("" for none). A grant octet cannot read back
// exactly (an unknown effect or policy, a newer writer's) is left out: a
// rule is never widened by guessing. When the ledger cannot be followed
// there are no rules (fail closed).
func (b *RuleBook) state() (rules []tools.StandingRule, policy string) {
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
func (b *RuleBook) Rules() []tools.StandingRule {
	rules, _ := b.state()
	return rules
}

// AddRule implements tools.RuleStore: the grant is durable before the
// rule applies.
func (b *RuleBook) AddRule(r tools.StandingRule) (tools.StandingRule, error) {
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

// ErrNoRule: a revocation of a standing approval the session does not
// have.
var ErrNoRule = errors.New("no such standing approval")

// Revoke durably revokes the standing approval id ([ErrNoRule] when the
// session has none by that id).
func (b *RuleBook) Revoke(id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	rules, _ := b.state()
	if !slices.ContainsFunc(rules, func(r tools.StandingRule) bool { return r.ID == id }) {
		return ErrNoRule
	}
	err := b.sess.Append(session.ApprovalRecord(session.Approval{Op: session.ApprovalRevoke, RuleID: id, Time: time.Now().UTC()}))
	if err != nil {
		return fmt.Errorf("record revocation: %w", err)
	}
	return nil
}

// SetPolicy records p and moves broker to it; a policy looser than the
// launch policy is refused (tools.ErrPolicyLooser) and not recorded.
func (b *RuleBook) SetPolicy(broker *tools.Broker, p tools.Policy) (tools.EffectiveToolPolicy, error) {
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

// RecordedPolicy is the effect policy the session last recorded (nil:
// none, or one this build does not know): AgentSpec.Policy of a resumed
// session.
func (b *RuleBook) RecordedPolicy() *tools.Policy {
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

// RestorePolicy applies the session's recorded policy to broker when it
// is still no looser than the launch policy; a recorded policy looser
// than today's launch policy (the configuration was tightened since) is
// not applied: the launch policy is the stricter one.
func (b *RuleBook) RestorePolicy(broker *tools.Broker) {
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
