//go:build unix

package gitsummary

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkRead times a summary of a committed 10,000-file tree (100
// directories of 100 files) beside `git status --porcelain` of the same
// tree in the same iteration; read/git is the median per-iteration ratio.
//
//	go test ./internal/gitsummary -run '^$' -bench Read -benchtime 20x -count 3
func BenchmarkRead(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git is not installed")
	}
	dir := b.TempDir()
	gitB := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(cmd.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitB("init", "-q", "-b", "main")
	for d := range 100 {
		for f := range 100 {
			p := filepath.Join(dir, fmt.Sprintf("pkg%03d", d), fmt.Sprintf("f%03d.txt", f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, fmt.Appendf(nil, "file %d/%d\n", d, f), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	gitB("add", "-A")
	gitB("commit", "-qm", "tree")
	time.Sleep(1100 * time.Millisecond) // out of git's racy window
	gitB("status", "--porcelain")
	var reads, gits, ratios []float64
	for b.Loop() {
		start := time.Now()
		s := Read(dir)
		r := time.Since(start)
		if s == nil || !s.Counted || s.Modified != 0 || s.Untracked != 0 {
			b.Fatalf("summary %+v", s)
		}
		start = time.Now()
		gitB("status", "--porcelain")
		g := time.Since(start)
		reads, gits = append(reads, ms(r)), append(gits, ms(g))
		ratios = append(ratios, float64(r)/float64(g))
	}
	b.ReportMetric(median(reads), "read-ms")
	b.ReportMetric(median(gits), "git-ms")
	b.ReportMetric(median(ratios), "read/git")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
