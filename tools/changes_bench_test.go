package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/changes"
)

// BenchmarkEditChangeStore measures what keeping the images costs per
// edit: the same edit (a unique one-line change, so every edit stores one
// new image) without a store (the baseline: diff only) and with the store
// in a temporary directory on the same disk, for a small and a large file.
func BenchmarkEditChangeStore(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		for _, store := range []bool{false, true} {
			name := fmt.Sprintf("file=%dKiB/store=%v", size>>10, store)
			b.Run(name, func(b *testing.B) { benchEdit(b, size, store) })
		}
	}
}

func benchEdit(b *testing.B, size int, withStore bool) {
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
	ctx := context.Background()
	n := 0
	for b.Loop() {
		args := argsJSON(b, map[string]any{"path": "f.txt", "old_text": fmt.Sprintf("v=%d\n", n), "new_text": fmt.Sprintf("v=%d\n", n+1)})
		n++
		res, err := ed.Execute(ctx, Invocation{CallID: "c", Arguments: args})
		if err != nil || res.IsError || len(res.Changes) != 1 {
			b.Fatalf("edit %d: %+v, %v", n, res, err)
		}
	}
}
