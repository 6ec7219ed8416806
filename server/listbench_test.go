//go:build unix

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/session"
)

// BenchmarkSessionListPage10k is octet/session/list's first page of 50
// at 10,000 sessions, request to answer over net.Pipe through the real
// server, backend and session Lister. The baseline in the same run,
// FullScan, is what every page cost before the Lister: session.List
// reading every file.
func BenchmarkSessionListPage10k(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "sessions")
	writeSessionCopies(b, dir, 10_000)
	b.Run("FullScan", func(b *testing.B) {
		for b.Loop() {
			infos, err := session.List(dir)
			if err != nil || len(infos) != 10_000 {
				b.Fatal(len(infos), err)
			}
		}
	})
	b.Run("Page", func(b *testing.B) {
		rt := &host.Runtime{SessionsDir: dir}
		cli, srvEnd := net.Pipe()
		go New(Options{Runtime: rt}).Serve(context.Background(), srvEnd)
		defer cli.Close()
		conn := jsonrpc2.NewConn(jsonrpc2.NewHeaderStream(cli))
		conn.Go(context.Background(), jsonrpc2.MethodNotFoundHandler)
		ctx := context.Background()
		if _, err := conn.Call(ctx, "initialize", map[string]any{"capabilities": map[string]any{}}, nil); err != nil {
			b.Fatal(err)
		}
		page := func() {
			var res struct {
				Sessions   []json.RawMessage `json:"sessions"`
				NextCursor string            `json:"nextCursor"`
			}
			if _, err := conn.Call(ctx, "octet/session/list", map[string]any{"limit": 50}, &res); err != nil {
				b.Fatal(err)
			}
			if len(res.Sessions) != 50 || res.NextCursor == "" {
				b.Fatalf("page of %d sessions, next cursor %q", len(res.Sessions), res.NextCursor)
			}
		}
		page() // the one full read
		cpu0 := selfCPU()
		for b.Loop() {
			page()
		}
		b.ReportMetric(float64(selfCPU()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
	})
}

// writeSessionCopies writes n sessions into dir, each a copy of one real
// session (header, entries, usage, a title) under its own id, with
// spread modification times.
func writeSessionCopies(tb testing.TB, dir string, n int) {
	tb.Helper()
	base := time.Now().Add(-time.Duration(n) * time.Minute)
	tmpl, err := session.Create(tb.TempDir(), session.Header{Title: "template", Cwd: "/work/project", Created: base.Add(-time.Hour)})
	if err != nil {
		tb.Fatal(err)
	}
	for range 3 {
		if _, err := tmpl.AppendEntry(session.Entry{Type: session.EntryUser, Text: "please look at the failing test"}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tmpl.SetTitle("fix the failing server test"); err != nil {
		tb.Fatal(err)
	}
	oldID, path := tmpl.Header().ID, tmpl.Path()
	tmpl.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("%s-%012x", base.UTC().Format("20060102-150405"), i)
		p := filepath.Join(dir, id+".jsonl")
		if err := os.WriteFile(p, bytes.Replace(data, []byte(oldID), []byte(id), 1), 0o600); err != nil {
			tb.Fatal(err)
		}
		mt := base.Add(time.Duration(i*7919%n) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			tb.Fatal(err)
		}
	}
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}
