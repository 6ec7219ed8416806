//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// interleaved runs base and subject back to back batch by batch, so a
// noisy shared machine slows both alike, and reports each one's ns per
// call and their ratio.
func interleaved(b *testing.B, batch int, base, subject func()) {
	b.Helper()
	var tb, ts time.Duration
	calls := 0
	for b.Loop() {
		t0 := time.Now()
		for range batch {
			base()
		}
		t1 := time.Now()
		for range batch {
			subject()
		}
		ts += time.Since(t1)
		tb += t1.Sub(t0)
		calls += batch
	}
	b.ReportMetric(float64(tb.Nanoseconds())/float64(calls), "base-ns/call")
	b.ReportMetric(float64(ts.Nanoseconds())/float64(calls), "broker-ns/call")
	b.ReportMetric(float64(ts)/float64(tb), "ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkBrokerDispatch measures the admission pipeline (canonical
// arguments, schema validation, classification, intent digest, policy,
// reservation, one hook, commit, result bound) around the real read tool
// reading a 4 KiB file, against calling the read tool directly.
func BenchmarkBrokerDispatch(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte(strings.Repeat("package a // line\n", 230)), 0o600); err != nil {
		b.Fatal(err)
	}
	read, err := NewRead(Config{Root: dir})
	if err != nil {
		b.Fatal(err)
	}
	host := NewHost()
	if err := host.Register(read); err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"path":"a.go","limit":300}`)
	ctx := context.Background()
	br := NewBroker(BrokerConfig{Hooks: []Hooks{{BeforeToolCall: func(context.Context, EffectIntent) error { return nil }}}})
	r := DispatchRequest{RunID: "r", CallID: "c", Tool: "read", Arguments: args}
	interleaved(b, 20, func() {
		if res, err := read.Execute(ctx, Invocation{CallID: "c", Arguments: args}); err != nil || res.IsError {
			b.Fatal(err, res.Text)
		}
	}, func() {
		if res, d := br.Dispatch(ctx, host, r, DispatchObserver{}); d.Decision != DecisionAllowed || res.IsError {
			b.Fatal(d, res.Text)
		}
	})
}

// BenchmarkBrokerConfirmed measures a confirmed call (approver answers at
// once, grant minted and consumed) of a no-op mutation tool against an
// admitted call of the same no-op tool: the cost of the grant path.
func BenchmarkBrokerConfirmed(b *testing.B) {
	args := json.RawMessage(`{"x":"a.go"}`)
	ctx := context.Background()
	pure, mut := newProbe("p", Pure), newProbe("m", WorkspaceMutation)
	host := NewHost()
	_ = host.Register(pure)
	_ = host.Register(mut)
	br := NewBroker(BrokerConfig{Approver: approveAll()})
	interleaved(b, 20, func() {
		br.Dispatch(ctx, host, DispatchRequest{CallID: "c", Tool: "p", Arguments: args}, DispatchObserver{})
	}, func() {
		if _, d := br.Dispatch(ctx, host, DispatchRequest{CallID: "c", Tool: "m", Arguments: args}, DispatchObserver{}); d.Decision != DecisionAllowed {
			b.Fatal(d)
		}
	})
}

// BenchmarkCanonicalArguments measures canonicalizing a 1 MiB write call
// against merely validating the same bytes with json.Valid.
func BenchmarkCanonicalArguments(b *testing.B) {
	content, _ := json.Marshal(strings.Repeat("line of a file being written\n", 1<<20/29))
	raw := json.RawMessage(`{"path":"big.txt","content":` + string(content) + `}`)
	interleaved(b, 1, func() {
		if !json.Valid(raw) {
			b.Fatal("invalid")
		}
	}, func() {
		if _, err := CanonicalArguments(raw); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkIsReadOnlyCommand measures the allowlist parser on typical
// commands against parsing them alone with the same parser.
func BenchmarkIsReadOnlyCommand(b *testing.B) {
	cmds := []string{`git status`, `grep -rn "func main" . | head -n 20`, `find . -name '*.go' -exec rm {} \;`, `ls -la src`}
	i := 0
	interleaved(b, 4, func() {
		i++
		parseOnly(cmds[i%len(cmds)])
	}, func() {
		IsReadOnlyCommand(cmds[i%len(cmds)])
	})
}
