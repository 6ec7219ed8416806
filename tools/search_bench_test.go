//go:build unix

package tools

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkSearchIgnoreTree compares search with ripgrep on a generated
// tree under .gitignore files of 2, 130 and 1,018 lines, in the same run.
// The tree has OCTET_BENCH_TREE_FILES files (default 20,000; the figures
// in docs/performance.md use 200,000, about 290 MB). It is generated once
// into $TMPDIR/octet-bench-tree-N and reused by later runs.
// Run: OCTET_BENCH_TREE_FILES=200000 go test ./tools -run '^$' -bench SearchIgnoreTree -benchtime 1x -count 5
func BenchmarkSearchIgnoreTree(b *testing.B) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Skip("ripgrep (rg) not installed; apt-get install -y ripgrep")
	}
	files := 20000
	if v := os.Getenv("OCTET_BENCH_TREE_FILES"); v != "" {
		if files, err = strconv.Atoi(v); err != nil || files < 1 {
			b.Fatalf("OCTET_BENCH_TREE_FILES=%q: want a positive number", v)
		}
	}
	root := benchTree(b, files)
	s, err := NewSearch(Config{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	for _, ig := range []struct {
		name string
		text string
	}{
		{"gitignore-2", "*.tmp\nnode_modules/\n"},
		{"gitignore-130", benchCorpus(b, "Node")},
		{"gitignore-1018", longGitignore(b, 1018)},
	} {
		if n := strings.Count(ig.text, "\n"); ig.name != fmt.Sprintf("gitignore-%d", n) {
			b.Fatalf("%s has %d lines", ig.name, n)
		}
		if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte(ig.text), 0o644); err != nil {
			b.Fatal(err)
		}
		for _, bc := range []struct {
			name, pattern string
			literal       bool
		}{
			{"literal", "EncodeRune", true},
			{"regex", `[A-Z][a-z]+Buffer\b`, false},
		} {
			b.Run(ig.name+"/"+bc.name, func(b *testing.B) {
				benchVsRipgrep(b, rg, s, root, bc.pattern, bc.literal)
			})
		}
	}
}

// benchCorpus returns the testdata/gitignore file name.
func benchCorpus(b *testing.B, name string) string {
	data, err := os.ReadFile(filepath.Join("testdata", "gitignore", name+".gitignore"))
	if err != nil {
		b.Fatal(err)
	}
	return string(data)
}

// longGitignore is the GitHub templates of testdata/gitignore stacked,
// as a repository mixing several toolchains has them, topped up with
// project-specific rules to n lines.
func longGitignore(b *testing.B, n int) string {
	var sb strings.Builder
	for _, name := range []string{"Go", "Java", "Node", "Python", "Unity", "VisualStudio"} {
		sb.WriteString(benchCorpus(b, name))
	}
	for i := 0; strings.Count(sb.String(), "\n") < n; i++ {
		switch i % 5 {
		case 0:
			fmt.Fprintf(&sb, "/generated%d/\n", i)
		case 1:
			fmt.Fprintf(&sb, "*.out%d\n", i)
		case 2:
			fmt.Fprintf(&sb, "cache%d-*\n", i)
		case 3:
			fmt.Fprintf(&sb, "**/tmp%d/*.o\n", i)
		case 4:
			fmt.Fprintf(&sb, "!keep%d.out%d\n", i, i-3)
		}
	}
	return sb.String()
}

// benchTree returns the generated tree of n files, writing it first
// when no complete one is left from an earlier run.
func benchTree(b *testing.B, n int) string {
	root := filepath.Join(os.TempDir(), fmt.Sprintf("octet-bench-tree-%d", n))
	done := root + ".done"
	if _, err := os.Stat(done); err == nil {
		return root
	}
	if err := os.RemoveAll(root); err != nil {
		b.Fatal(err)
	}
	writeBenchTree(b, root, n)
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return root
}

// writeBenchTree writes n source-like files of about 1.5 KB under root:
// packages of nested directories, a few ignorable directories and files
// among them, and "EncodeRune" and "...Buffer" words now and then.
func writeBenchTree(b *testing.B, root string, n int) {
	rnd := rand.New(rand.NewPCG(200000, 294))
	exts := []string{".go", ".js", ".ts", ".py", ".java", ".cs", ".c", ".h", ".md", ".json", ".txt", ".log", ".tmp", ".pyc"}
	dirs := []string{"src", "internal", "pkg", "lib", "cmd", "api", "util", "core", "test", "docs", "build", "node_modules", "bin", "obj", "__pycache__", "vendor"}
	words := []string{"func", "return", "if", "err", "nil", "for", "range", "string", "int", "byte", "buf", "data", "value", "key", "index", "count", "result", "error", "context", "handler", "Reader", "Writer"}
	var line strings.Builder
	for i := range n {
		dir := filepath.Join(fmt.Sprintf("module%d", i/2000), dirs[rnd.IntN(10)], dirs[rnd.IntN(len(dirs))], fmt.Sprintf("p%d", i/50%40))
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(filepath.Join(root, dir, fmt.Sprintf("file%d%s", i, exts[rnd.IntN(len(exts))])))
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriter(f)
		for range 40 {
			line.Reset()
			line.WriteByte('\t')
			for range 5 {
				line.WriteString(words[rnd.IntN(len(words))])
				line.WriteByte(' ')
			}
			switch rnd.IntN(400) {
			case 0:
				line.WriteString("utf8.EncodeRune(p, r)")
			case 1:
				line.WriteString("bytes.NewBuffer(nil)")
			}
			line.WriteByte('\n')
			w.WriteString(line.String())
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
