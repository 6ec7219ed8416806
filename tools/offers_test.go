package tools

import (
	"slices"
	"testing"
)

// statingProbe is a probeTool that states its effects.
type statingProbe struct {
	*probeTool
	effects []Effect
}

func (t statingProbe) Effects() []Effect { return t.effects }

// statingShell is a shell channel that states HostProcess.
type statingShell struct{ shellProbe }

func (statingShell) Effects() []Effect { return []Effect{HostProcess} }

// TestBrokerOffersFollowTheSessionPolicy: a tool that states its effects
// is offered only under a policy that could admit or confirm one of
// them, read from the broker's current (session) policy, not its launch
// policy; a tool that states nothing is always offered.
func TestBrokerOffersFollowTheSessionPolicy(t *testing.T) {
	delegation := statingProbe{newProbe("agents_spawn", Delegation), []Effect{Delegation}}
	extension := statingProbe{newProbe("mcp__t__x", Extension), []Effect{Extension}}
	mixed := statingProbe{newProbe("mixed", Extension), []Effect{Extension, WorkspaceRead}}
	silent := statingProbe{newProbe("silent", Delegation), nil}
	shell := statingShell{newShellProbe("bash")}
	plain := newProbe("plain", Delegation)
	b := NewBroker(BrokerConfig{Policy: UnsafeHost})
	for _, tc := range []struct {
		policy Policy
		want   []string
	}{
		{UnsafeHost, []string{"agents_spawn", "mcp__t__x", "mixed", "silent", "bash", "plain"}},
		{Controlled, []string{"mixed", "silent", "bash", "plain"}},
		{ControlledBashApproval, []string{"mixed", "silent", "bash", "plain"}},
		{UnsafeHost, []string{"agents_spawn", "mcp__t__x", "mixed", "silent", "bash", "plain"}},
	} {
		if _, err := b.SetPolicy(tc.policy); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tl := range []Tool{delegation, extension, mixed, silent, shell, plain} {
			if b.Offers(tl) {
				got = append(got, tl.Name())
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s (launched unsafe_host): offered %v, want %v", tc.policy, got, tc.want)
		}
	}
}

// TestOnPolicyChangeSeesEveryChangeInOrder: a watcher hears every
// SetPolicy of the broker and of a clone, in order, until stopped.
func TestOnPolicyChangeSeesEveryChangeInOrder(t *testing.T) {
	b := NewBroker(BrokerConfig{Policy: UnsafeHost})
	child := b.Clone("child", nil)
	var seen []Policy
	stop := b.OnPolicyChange(func(p Policy) {
		if b.Policy() != p {
			t.Errorf("watcher called with %s before the broker's policy (%s) changed", p, b.Policy())
		}
		seen = append(seen, p)
	})
	b.SetPolicy(Controlled)
	child.SetPolicy(ControlledBashApproval)
	b.SetPolicy(UnsafeHost)
	if _, err := NewBroker(BrokerConfig{Policy: Controlled}).SetPolicy(UnsafeHost); err == nil {
		t.Fatal("a looser policy was accepted")
	}
	stop()
	b.SetPolicy(Controlled)
	want := []Policy{Controlled, ControlledBashApproval, UnsafeHost}
	if !slices.Equal(seen, want) {
		t.Errorf("watcher saw %v, want %v", seen, want)
	}
}
