package server

import (
	"log/slog"

	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// SessionRules is one session's standing approvals and recorded effect
// policy, kept in its ledger exactly as this server keeps them, for
// another editor dialect over the same core (package acp). It implements
// tools.RuleStore: install it as AgentSpec.Rules.
type SessionRules struct{ *ruleBook }

// NewSessionRules returns the rule book of sess.
func NewSessionRules(sess *session.Session, log *slog.Logger) SessionRules {
	return SessionRules{newRuleBook(sess, log)}
}

// SetPolicy records p and moves broker to it; a policy looser than the
// launch policy is refused (tools.ErrPolicyLooser).
func (r SessionRules) SetPolicy(broker *tools.Broker, p tools.Policy) (tools.EffectiveToolPolicy, error) {
	return r.setPolicy(broker, p)
}

// RestorePolicy applies the session's recorded policy when it is still
// no looser than the launch policy.
func (r SessionRules) RestorePolicy(broker *tools.Broker) { r.restorePolicy(broker) }

// RecordedPolicy is the effect policy the session last recorded (nil:
// none): AgentSpec.Policy of a resumed session.
func (r SessionRules) RecordedPolicy() *tools.Policy { return r.recordedPolicy() }

// Revoke durably revokes the standing approval id.
func (r SessionRules) Revoke(id string) error { return r.revoke(id) }
