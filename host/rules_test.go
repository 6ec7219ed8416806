package host_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

func newLedger(t *testing.T) *session.Session {
	t.Helper()
	sess, err := session.Create(t.TempDir(), session.Header{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// TestRuleBookKeepsRulesInTheLedger: a standing approval is durable (a
// second rule book over the same file sees it), a revocation removes it,
// and a revocation of an unknown rule is host.ErrNoRule.
func TestRuleBookKeepsRulesInTheLedger(t *testing.T) {
	sess := newLedger(t)
	rb := host.NewRuleBook(sess, slog.Default())
	r, err := rb.AddRule(tools.StandingRule{Tool: "edit", Effect: tools.WorkspaceMutation, Policy: tools.Controlled, Scope: tools.ApprovalScope{Path: "a.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	again := host.NewRuleBook(sess, slog.Default())
	if got := again.Rules(); len(got) != 1 || got[0].ID != r.ID || got[0].Scope.Path != "a.txt" {
		t.Fatalf("rules read back: %+v, want the one added (%s)", got, r.ID)
	}
	if err := again.Revoke("rule_nope"); !errors.Is(err, host.ErrNoRule) {
		t.Errorf("revoke of an unknown rule: %v, want host.ErrNoRule", err)
	}
	if err := again.Revoke(r.ID); err != nil {
		t.Fatal(err)
	}
	if got := rb.Rules(); len(got) != 0 {
		t.Errorf("rules after revocation: %+v", got)
	}
}

// TestRuleBookPolicy: a policy no looser than the launch policy is
// recorded and applied; a looser one is refused and not recorded; the
// recorded policy is restored on a new broker.
func TestRuleBookPolicy(t *testing.T) {
	sess := newLedger(t)
	rb := host.NewRuleBook(sess, slog.Default())
	if p := rb.RecordedPolicy(); p != nil {
		t.Fatalf("recorded policy of a new session: %v", *p)
	}
	broker := tools.NewBroker(tools.BrokerConfig{Policy: tools.Controlled})
	if _, err := rb.SetPolicy(broker, tools.UnsafeHost); !errors.Is(err, tools.ErrPolicyLooser) {
		t.Errorf("looser policy: %v, want ErrPolicyLooser", err)
	}
	if p := rb.RecordedPolicy(); p != nil {
		t.Errorf("a refused policy was recorded: %v", *p)
	}
	if _, err := rb.SetPolicy(broker, tools.ControlledBashApproval); err != nil {
		t.Fatal(err)
	}
	if p := rb.RecordedPolicy(); p == nil || *p != tools.ControlledBashApproval {
		t.Errorf("recorded policy: %v, want controlled_bash_approval", p)
	}
	fresh := tools.NewBroker(tools.BrokerConfig{Policy: tools.Controlled})
	rb.RestorePolicy(fresh)
	if got := fresh.Policy(); got != tools.ControlledBashApproval {
		t.Errorf("restored policy: %v, want controlled_bash_approval", got)
	}
}
