//go:build unix

package gitsummary

import (
	"slices"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/benchtree"
)

// BenchmarkRead times a summary of a committed 10,000-file tree (100
// directories of 100 files) beside `git status --porcelain` of the same
// tree in the same iteration; read/git is the median per-iteration ratio.
//
//	go test ./internal/gitsummary -run '^$' -bench Read -benchtime 20x -count 3
func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	benchtree.Make(b, dir, benchtree.Tree{Dirs: 100, Files: 100}, 1100*time.Millisecond) // out of git's racy window
	var reads, gits, ratios []float64
	for b.Loop() {
		start := time.Now()
		s := Read(dir)
		r := time.Since(start)
		if s == nil || !s.Counted || s.Modified != 0 || s.Untracked != 0 {
			b.Fatalf("summary %+v", s)
		}
		g := benchtree.GitStatus(b, dir)
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
