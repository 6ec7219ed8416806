//go:build unix

package session

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/octet-agent/octet/internal/heaptest"
)

// TestOpenMemory opens a generated 40 MB session (typed speculatively):
// the live heap with it open must stay under 1.5× its size, and be the
// same after repeated opens. The typer used to reserve room for the most
// entries the file could hold (one per 26 bytes: 1,000,000 entries, five
// times the file) and the branch kept that store alive.
func TestOpenMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a 40 MB session")
	}
	path := filepath.Join(t.TempDir(), "big.jsonl")
	branchLen := genLarge(t, path, 150_000, 40<<20)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	heap := heaptest.Live
	base := heap()
	var live []int64
	for range 3 {
		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(s.Branch()); got != branchLen {
			t.Fatalf("branch %d entries, want %d", got, branchLen)
		}
		live = append(live, heap()-base)
		runtime.KeepAlive(s.Branch())
		s.Close()
	}
	msg := fmt.Sprintf("%d-byte session: live heap with it open %v bytes", fi.Size(), live)
	t.Log(msg)
	for _, h := range live {
		if float64(h) > 1.5*float64(fi.Size()) {
			t.Fatalf("%s: over 1.5× the file", msg)
		}
	}
	if live[2] > live[0]+live[0]/10 {
		t.Fatalf("%s: grows across opens", msg)
	}
}
