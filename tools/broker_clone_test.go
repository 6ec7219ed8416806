package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestBrokerCloneSharesPolicyAndGrants: a delegation clone has its
// parent's current policy (a tightened one included) and grant store, its
// own principal, and asks its own approver.
func TestBrokerCloneSharesPolicyAndGrants(t *testing.T) {
	parentApprover, childApprover := approveAll(), approveAll()
	b := NewBroker(BrokerConfig{Policy: UnsafeHost, Approver: parentApprover, Principal: "root"})
	if _, err := b.SetPolicy(Controlled); err != nil {
		t.Fatal(err)
	}
	c := b.Clone("root/worker", childApprover)
	if c.Policy() != Controlled || c.LaunchPolicy() != UnsafeHost {
		t.Fatalf("clone policy %s launch %s, want controlled under unsafe_host", c.Policy(), c.LaunchPolicy())
	}
	if c.Grants() != b.Grants() {
		t.Fatal("clone does not share the grant store")
	}
	if c.PolicyVersion() != b.PolicyVersion() {
		t.Fatal("clone's policy version differs")
	}
	host := mustHost(t, newProbe("mutate", WorkspaceMutation), newProbe("spawn", Delegation))
	res, d := c.Dispatch(context.Background(), host, DispatchRequest{CallID: "c1", Tool: "mutate", Arguments: json.RawMessage(`{}`)}, DispatchObserver{})
	if d.Decision != DecisionAllowed || res.IsError {
		t.Fatalf("confirmed mutation through the clone: %+v %+v", d, res)
	}
	if childApprover.count() != 1 || parentApprover.count() != 0 {
		t.Fatalf("approvals: child %d parent %d, want 1 and 0", childApprover.count(), parentApprover.count())
	}
	if got := childApprover.requests()[0].Intent.Principal; got != "root/worker" {
		t.Fatalf("clone intent principal %q", got)
	}
	// Controlled denies Delegation through a clone too.
	if _, d := c.Dispatch(context.Background(), host, DispatchRequest{CallID: "c2", Tool: "spawn", Arguments: json.RawMessage(`{}`)}, DispatchObserver{}); d.Decision != DecisionDenied {
		t.Fatalf("delegation under controlled: %+v", d)
	}
	// The policy is shared live: tightening the parent tightens the
	// child from its next admission, and the launch bound holds for both.
	if _, err := b.SetPolicy(ControlledBashApproval); err != nil {
		t.Fatal(err)
	}
	if c.Policy() != ControlledBashApproval {
		t.Fatalf("clone policy %s after the parent tightened", c.Policy())
	}
	if _, err := c.SetPolicy(UnsafeHost); err != nil || b.Policy() != UnsafeHost {
		t.Fatalf("restore the launch policy through the clone: %v, parent %s", err, b.Policy())
	}
}

// TestBoundResultRestoresCommit: a result the limit cuts tells its tool
// the result was not kept whole, and carries no Commit further.
func TestBoundResultRestoresCommit(t *testing.T) {
	var got []bool
	r := boundResult(Result{Text: strings.Repeat("x", 100), Commit: func(d bool) { got = append(got, d) }}, 50)
	if len(got) != 1 || got[0] || r.Commit != nil {
		t.Fatalf("commit calls %v, Commit left %v", got, r.Commit != nil)
	}
	r = boundResult(Result{Text: "short", Commit: func(d bool) { got = append(got, d) }}, 50)
	if len(got) != 1 || r.Commit == nil {
		t.Fatal("an uncut result lost its Commit or was resolved")
	}
}
