package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// BenchmarkBrokerDispatch measures the admission pipeline (canonical
// arguments, schema validation, classification, intent digest, policy,
// reservation, one hook, commit) against calling the same tool directly.
func BenchmarkBrokerDispatch(b *testing.B) {
	args := json.RawMessage(`{"x":"internal/fsroot/fsroot.go","n":2000}`)
	pt := newProbe("read", WorkspaceRead)
	host := NewHost()
	if err := host.Register(pt); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if _, err := pt.Execute(ctx, Invocation{CallID: "c", Arguments: args}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("broker", func(b *testing.B) {
		br := NewBroker(BrokerConfig{Hooks: []Hooks{{BeforeToolCall: func(context.Context, EffectIntent) error { return nil }}}})
		r := DispatchRequest{RunID: "r", CallID: "c", Tool: "read", Arguments: args}
		for b.Loop() {
			if _, d := br.Dispatch(ctx, host, r, DispatchObserver{}); d.Decision != DecisionAllowed {
				b.Fatal(d)
			}
		}
	})
	b.Run("broker_confirmed", func(b *testing.B) {
		et := newProbe("edit", WorkspaceMutation)
		h := NewHost()
		_ = h.Register(et)
		br := NewBroker(BrokerConfig{Approver: approveAll()})
		r := DispatchRequest{RunID: "r", CallID: "c", Tool: "edit", Arguments: args}
		for b.Loop() {
			if _, d := br.Dispatch(ctx, h, r, DispatchObserver{}); d.Decision != DecisionAllowed {
				b.Fatal(d)
			}
		}
	})
}

// BenchmarkCanonicalArguments measures canonicalizing a 1 MiB write call
// against merely validating the same bytes with json.Valid.
func BenchmarkCanonicalArguments(b *testing.B) {
	content, _ := json.Marshal(strings.Repeat("line of a file being written\n", 1<<20/29))
	raw := json.RawMessage(`{"path":"big.txt","content":` + string(content) + `}`)
	b.Run("json_valid", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if !json.Valid(raw) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("canonical", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := CanonicalArguments(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkIsReadOnlyCommand measures the allowlist parser on typical
// commands.
func BenchmarkIsReadOnlyCommand(b *testing.B) {
	cmds := []string{`git status`, `grep -rn "func main" . | head -n 20`, `find . -name '*.go' -exec rm {} \;`, `ls -la src`}
	for b.Loop() {
		for _, c := range cmds {
			IsReadOnlyCommand(c)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(cmds)), "ns/command")
}
