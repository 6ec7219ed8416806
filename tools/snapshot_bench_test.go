package tools

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/octet-agent/octet/changes"
)

// snapshotBenchTree writes a workspace of 10,000 files of 20 KiB (200 MB) in 100
// directories, committed to a git repository (so git status compares
// with a full index, as in a real checkout), with a .gitignore.
func snapshotBenchTree(b *testing.B) string {
	b.Helper()
	ws := b.TempDir()
	block := make([]byte, 20<<10)
	for d := range 100 {
		dir := filepath.Join(ws, fmt.Sprintf("pkg%02d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			for i := range block {
				block[i] = byte('a' + (d*7+f*13+i)%26)
			}
			copy(block, fmt.Sprintf("file %d/%d\n", d, f))
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.txt", f)), block, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("*.o\nbuild/\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "tree")
	// Out of the racy window, for git's index and the snapshots alike.
	time.Sleep(racyWindow + 100*time.Millisecond)
	return ws
}

// BenchmarkSnapshot10k measures the checkpoint a bash call takes of a
// 10,000-file, 200 MB workspace when nothing changed since the previous
// one (the common case: the walk and an lstat per entry, no file read),
// against `git status` of the same tree in the same run. The first,
// full snapshot (every file read, hashed and kept, synced) is logged.
//
//	go test ./tools -run '^$' -bench BenchmarkSnapshot10k -benchtime 20x
func BenchmarkSnapshot10k(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git not installed")
	}
	ws := snapshotBenchTree(b)
	store, err := changes.Open(b.TempDir(), 0)
	if err != nil {
		b.Fatal(err)
	}
	s := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: store}})
	if s == nil {
		b.Skip("no snapshots on this platform")
	}
	start := time.Now()
	first, err := s.take()
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("first snapshot: %d entries, %d files read and kept, %v", len(first.entries), first.hashed, time.Since(start))
	if len(first.entries) != 10_101 {
		b.Fatalf("snapshot has %d entries, want 10,101", len(first.entries))
	}

	// Each iteration takes a snapshot and runs git status, alternately,
	// so both see the same load on a shared machine.
	b.Run("unchanged-vs-git-status", func(b *testing.B) {
		var snaps, gits []time.Duration
		for b.Loop() {
			t := time.Now()
			snap, err := s.take()
			if err != nil {
				b.Fatal(err)
			}
			snaps = append(snaps, time.Since(t))
			if snap.hashed != 0 {
				b.Fatalf("an unchanged tree had %d files read", snap.hashed)
			}
			t = time.Now()
			cmd := exec.Command("git", "status", "--porcelain")
			cmd.Dir = ws
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("git status: %v\n%s", err, out)
			}
			gits = append(gits, time.Since(t))
		}
		b.ReportMetric(medianMS(snaps), "snapshot-median-ms")
		b.ReportMetric(medianMS(gits), "git-status-median-ms")
	})
	b.Run("snapshot-one-changed", func(b *testing.B) {
		p := filepath.Join(ws, "pkg42", "f042.txt")
		i := 0
		timed(b, func() {
			i++
			if err := os.WriteFile(p, fmt.Appendf(nil, "change %d\n", i), 0o644); err != nil {
				b.Fatal(err)
			}
			if _, err := s.take(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// timed runs f b.N times and reports, besides the mean, the median
// iteration (median-ms): on a shared machine the mean is at the mercy of
// whatever else runs.
func timed(b *testing.B, f func()) {
	var ds []time.Duration
	for b.Loop() {
		t := time.Now()
		f()
		ds = append(ds, time.Since(t))
	}
	b.ReportMetric(medianMS(ds), "median-ms")
}

// medianMS returns the median of ds in milliseconds.
func medianMS(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Microseconds()) / 1000
}
