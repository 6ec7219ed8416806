//go:build linux

package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFileToolsSymlinkSwapRace runs the read and write tools while a
// goroutine atomically swaps their parent directory with a link to an
// outside directory at least 10,000 times: nothing outside may be read or
// written.
func TestFileToolsSymlinkSwapRace(t *testing.T) {
	base := t.TempDir()
	ws, out := filepath.Join(base, "ws"), filepath.Join(base, "out")
	if err := os.MkdirAll(filepath.Join(ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(ws, "d", "f"), "inside")
	writeTestFile(t, filepath.Join(out, "f"), "SECRET")
	if err := os.Symlink(out, filepath.Join(ws, "swap")); err != nil {
		t.Fatal(err)
	}
	rd, _, wr := fileTools(t, Config{Root: ws})
	readArgs := argsJSON(t, map[string]any{"path": "d/f"})
	writeArgs := argsJSON(t, map[string]any{"path": "d/w", "content": "written"})

	const swaps = 10_000
	var done atomic.Bool
	var reads, writes, readTries, escapes atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		defer done.Store(true)
		dfd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(dfd)
		for i := 0; i < swaps || readTries.Load() < 2000; i++ {
			if err := unix.Renameat2(dfd, "d", dfd, "swap", unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Go(func() {
		for !done.Load() {
			res, _ := rd.Execute(context.Background(), Invocation{Arguments: readArgs})
			readTries.Add(1)
			if !res.IsError {
				reads.Add(1)
			}
			if strings.Contains(res.Text, "SECRET") {
				escapes.Add(1)
			}
		}
	})
	wg.Go(func() {
		for !done.Load() {
			if res, _ := wr.Execute(context.Background(), Invocation{Arguments: writeArgs}); !res.IsError {
				writes.Add(1)
			}
		}
	})
	wg.Wait()
	if escapes.Load() > 0 {
		t.Fatalf("%d reads returned outside content", escapes.Load())
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Errorf("outside directory has %d entries: a write escaped", len(ents))
	}
	if got := readBack(t, filepath.Join(out, "f")); got != "SECRET" {
		t.Errorf("outside file changed: %q", got)
	}
	if reads.Load() == 0 {
		t.Error("no read succeeded; the race was not exercised")
	}
	t.Logf("reads %d/%d succeeded, writes %d succeeded, 0 escapes", reads.Load(), readTries.Load(), writes.Load())
}
