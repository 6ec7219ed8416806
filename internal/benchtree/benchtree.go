// Package benchtree makes the committed workspaces benchmarks measure
// octet in beside `git status`: directories of generated files, committed
// to git so that git compares with a full index, as in a checkout. It is
// imported by tests only.
package benchtree

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Tree describes a workspace: Dirs directories pkgNNN of Files files
// fNNN.txt, each Size bytes (at least its first line, "file D/F"), and a
// .gitignore holding Ignore when it is not empty.
type Tree struct {
	Name              string // Cached's directory name
	Dirs, Files, Size int
	Ignore            string
}

// Make writes t into dir, commits it, waits settle (out of git's and
// octet's racy windows, so neither hashes files again) and runs git
// status once, as a checkout that was looked at. It skips the benchmark
// where git is not installed.
func Make(tb testing.TB, dir string, t Tree, settle time.Duration) {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		tb.Skip("git not installed")
	}
	block := make([]byte, t.Size)
	for d := range t.Dirs {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%03d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			tb.Fatal(err)
		}
		for f := range t.Files {
			for i := range block {
				block[i] = byte('a' + (d*7+f*13+i)%26)
			}
			head := fmt.Sprintf("file %d/%d\n", d, f)
			content := append(block[:0:0], head...)
			if len(block) > len(head) {
				content = append(content, block[len(head):]...)
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.txt", f)), content, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if t.Ignore != "" {
		if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(t.Ignore), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	git(tb, dir, "init", "-q")
	git(tb, dir, "add", "-A")
	git(tb, dir, "commit", "-q", "--allow-empty", "-m", "tree")
	time.Sleep(settle)
	GitStatus(tb, dir)
}

// Cached returns the workspace of t under os.TempDir()
// (octet-bench-trees/NAME), made by Make the first time and kept for
// later runs.
func Cached(tb testing.TB, t Tree, settle time.Duration) string {
	tb.Helper()
	ws := filepath.Join(os.TempDir(), "octet-bench-trees", t.Name)
	stamp := filepath.Join(ws, ".git", "octet-bench-complete")
	if _, err := os.Stat(stamp); err == nil {
		return ws
	}
	os.RemoveAll(ws)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		tb.Fatal(err)
	}
	Make(tb, ws, t, settle)
	if err := os.WriteFile(stamp, nil, 0o644); err != nil {
		tb.Fatal(err)
	}
	return ws
}

// GitStatus runs `git status --porcelain` in dir, the baseline the
// benchmarks measure beside, and returns how long it took.
func GitStatus(tb testing.TB, dir string) time.Duration {
	tb.Helper()
	cmd := exec.Command("git", "status", "--porcelain")
	cmd.Dir = dir
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("git status: %v\n%s", err, out)
	}
	return time.Since(start)
}

// git runs git with args in dir, as a fixed author.
func git(tb testing.TB, dir string, args ...string) {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
