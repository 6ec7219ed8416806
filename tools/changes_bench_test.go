//go:build unix

package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/changes"
)

// BenchmarkEditChangeStore measures what keeping the images costs per
// edit. Each iteration makes the same edit (a unique one-line change, so
// every edit stores one new image) to two copies of a file, back to back:
// one without a change store (the baseline: the diff is still computed),
// one with the store in a temporary directory on the same disk. It
// reports both times per edit and the store's extra time.
func BenchmarkEditChangeStore(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("file=%dKiB", size>>10), func(b *testing.B) {
			base, stored := newBenchEdit(b, size, false), newBenchEdit(b, size, true)
			var baseT, storeT time.Duration
			n := 0
			for b.Loop() {
				baseT += base.edit(b, n)
				storeT += stored.edit(b, n)
				n++
			}
			b.ReportMetric(float64(baseT.Microseconds())/float64(n), "base-µs/edit")
			b.ReportMetric(float64(storeT.Microseconds())/float64(n), "store-µs/edit")
			b.ReportMetric(float64((storeT-baseT).Microseconds())/float64(n), "extra-µs/edit")
		})
	}
}

type benchEdit struct {
	ed  *EditTool
	ctx context.Context
}

func newBenchEdit(b *testing.B, size int, withStore bool) *benchEdit {
	ws := b.TempDir()
	line := "the quick brown fox jumps over the lazy dog, again and again\n"
	body := "v=0\n" + strings.Repeat(line, size/len(line))
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg := Config{Root: ws}
	if withStore {
		st, err := changes.OpenWorkspace(b.TempDir(), ws, 0)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Changes = &changes.Recorder{Store: st}
	}
	ed, err := NewEdit(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return &benchEdit{ed: ed, ctx: context.Background()}
}

// edit makes edit number n and returns how long it took.
func (e *benchEdit) edit(b *testing.B, n int) time.Duration {
	args := argsJSON(b, map[string]any{"path": "f.txt", "old_text": fmt.Sprintf("v=%d\n", n), "new_text": fmt.Sprintf("v=%d\n", n+1)})
	start := time.Now()
	res, err := e.ed.Execute(e.ctx, Invocation{CallID: "c", Arguments: args})
	d := time.Since(start)
	if err != nil || res.IsError || len(res.Changes) != 1 {
		b.Fatalf("edit %d: %+v, %v", n, res, err)
	}
	return d
}
