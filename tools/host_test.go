package tools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

type schemaTool struct {
	*probeTool
	schema string
}

func (t schemaTool) Schema() json.RawMessage { return json.RawMessage(t.schema) }

func toolNames(ts []Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name())
	}
	return out
}

func TestHostRegisterRefusals(t *testing.T) {
	h := NewHost()
	if err := h.Register(newProbe("read", Pure)); err != nil {
		t.Fatal(err)
	}
	if err := h.Register(newProbe("read", Pure)); !errors.Is(err, ErrDuplicateTool) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := h.Register(nil); err == nil {
		t.Fatal("nil tool accepted")
	}
	for _, name := range []string{"", "has space", "semi;colon", strings.Repeat("a", 65), "ünïcode"} {
		if err := h.Register(newProbe(name, Pure)); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	for _, sch := range []string{``, `[]`, `{"type":"string"}`, `{"properties":{}}`, `{"type":"object","properties":{"a":{"$ref":"https://example.com/x.json"}}}`, `{"type":"object","minProperties":"x"}`, `not json`} {
		if err := h.Register(schemaTool{newProbe("s", Pure), sch}); err == nil {
			t.Errorf("schema %q accepted", sch)
		}
	}
	if got := toolNames(h.Tools()); !slices.Equal(got, []string{"read"}) {
		t.Fatalf("tools after refusals = %v", got)
	}
}

func TestHostFilter(t *testing.T) {
	h := mustHost(t, newProbe("read", WorkspaceRead), newProbe("search", WorkspaceRead), newProbe("edit", WorkspaceMutation), newProbe("bash", HostProcess))
	g0 := h.Generation()
	f, err := h.Filter([]string{"search", "read", "read"})
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(f.Tools()); !slices.Equal(got, []string{"read", "search"}) {
		t.Fatalf("filtered tools = %v (registration order expected)", got)
	}
	if _, ok := f.Lookup("bash"); ok {
		t.Fatal("disabled tool still resolvable")
	}
	if f.Generation() == g0 {
		t.Fatal("filtered host shares the catalog generation")
	}
	if h.Generation() != g0 || len(h.Tools()) != 4 {
		t.Fatal("Filter changed its receiver")
	}
	// A disabled tool is not executable even under UnsafeHost.
	b := NewBroker(BrokerConfig{Policy: UnsafeHost})
	bash, _ := h.Lookup("bash")
	_, d := b.Dispatch(context.Background(), f, DispatchRequest{CallID: "c", Tool: "bash"}, DispatchObserver{})
	if d.Reason != ReasonUnknownTool || bash.(*probeTool).executed.Load() != 0 {
		t.Fatalf("disabled tool: %+v", d)
	}
	_, d = b.Dispatch(context.Background(), f, DispatchRequest{CallID: "c", Tool: "read"}, DispatchObserver{})
	if d.Decision != DecisionAllowed {
		t.Fatalf("enabled tool: %+v", d)
	}

	_, err = h.Filter([]string{"read", "grep", "wget"})
	if !errors.Is(err, ErrUnknownTool) || !strings.Contains(err.Error(), `"grep"`) || !strings.Contains(err.Error(), `"wget"`) {
		t.Fatalf("unknown names: %v", err)
	}
	empty, err := h.Filter(nil)
	if err != nil || len(empty.Tools()) != 0 {
		t.Fatalf("empty allowlist: %v %v", empty.Tools(), err)
	}
}

func TestHostGenerationChangesOnRegister(t *testing.T) {
	h := NewHost()
	g := h.Generation()
	_ = h.Register(newProbe("a", Pure))
	if h.Generation() == g {
		t.Fatal("generation unchanged by Register")
	}
	if NewHost().Generation() == NewHost().Generation() {
		t.Fatal("two hosts share a generation")
	}
}

func TestHostReplaceGroup(t *testing.T) {
	h := NewHost()
	for _, n := range []string{"read", "mcp__a__x", "mcp__b__y"} {
		if err := h.Register(newProbe(n, Pure)); err != nil {
			t.Fatal(err)
		}
	}
	gen := h.Generation()
	err := h.ReplaceGroup("mcp__a__", []Tool{
		newProbe("mcp__a__z", Pure),
		newProbe("read", Pure), // outside the group
		schemaTool{newProbe("mcp__a__bad", Pure), `{"type":"string"}`},
		newProbe("mcp__a__z", Pure), // duplicate
	})
	if err == nil || !strings.Contains(err.Error(), "outside group") || !strings.Contains(err.Error(), "mcp__a__bad") || !errors.Is(err, ErrDuplicateTool) {
		t.Errorf("err = %v", err)
	}
	if got := toolNames(h.Tools()); !slices.Equal(got, []string{"read", "mcp__b__y", "mcp__a__z"}) {
		t.Errorf("tools = %v", got)
	}
	if h.Generation() == gen {
		t.Error("generation unchanged")
	}
	if err := h.ReplaceGroup("mcp__a__", nil); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(h.Tools()); !slices.Equal(got, []string{"read", "mcp__b__y"}) {
		t.Errorf("after removal: %v", got)
	}
	if _, ok := h.Lookup("mcp__a__z"); ok {
		t.Error("removed tool still found")
	}
}
