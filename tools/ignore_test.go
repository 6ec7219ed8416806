//go:build unix

package tools

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// ignoreSource is one .gitignore file and the directory it sits in.
type ignoreSource struct {
	domain []string
	data   string
}

// goGitIgnore is the oracle: go-git's matcher over the same lines.
type goGitIgnore struct{ m gitignore.Matcher }

func newGoGitIgnore(files []ignoreSource) goGitIgnore {
	var ps []gitignore.Pattern
	for _, f := range files {
		ignoreLines([]byte(f.data), func(line string) {
			ps = append(ps, gitignore.ParsePattern(line, f.domain))
		})
	}
	return goGitIgnore{gitignore.NewMatcher(ps)}
}

func newIgnore(files []ignoreSource) *ignoreMatcher {
	var m *ignoreMatcher
	for _, f := range files {
		m = m.with([]byte(f.data), f.domain)
	}
	return m
}

func readCorpus(t testing.TB) map[string]string {
	paths, err := filepath.Glob("testdata/gitignore/*.gitignore")
	if err != nil || len(paths) == 0 {
		t.Fatalf("corpus: %v (%d files)", err, len(paths))
	}
	corpus := map[string]string{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		corpus[strings.TrimSuffix(filepath.Base(p), ".gitignore")] = string(data)
	}
	return corpus
}

// pathVocabulary returns names that the rules in data are likely to
// match, and near misses: each pattern component with its glob syntax
// filled in several ways, plus common names.
func pathVocabulary(data string) []string {
	words := []string{"src", "main.go", "a", "b", "x", "y", "z", "keep", "keep.txt", "README.md", "node_modules", "build", "Debug", "bin", "lib", "x.cache", "sub", ".vscode", "settings.json", "packages", "rooted", "deep", "mid", "dir", "foo.txt", "a.c", "q.go"}
	fill := strings.NewReplacer("**", "", "*", "", "?", "q", "[", "", "]", "", `\`, "", "!", "")
	fill2 := strings.NewReplacer("**", "x", "*", "abc", "?", "Z", `\ `, " ", `\`, "")
	class := regexp.MustCompile(`\[!?([^\]])[^\]]*\]`)
	ignoreLines([]byte(data), func(line string) {
		line = strings.TrimPrefix(line, "!")
		for c := range strings.SplitSeq(strings.TrimSpace(line), "/") {
			if c == "" {
				continue
			}
			words = append(words, fill.Replace(c), fill2.Replace(class.ReplaceAllString(c, "$1")), c, c+".bak", "pre"+fill.Replace(c))
		}
	})
	slices.Sort(words)
	return slices.Compact(words)
}

// randomPaths returns n paths of up to 6 components drawn from words.
func randomPaths(rnd *rand.Rand, words []string, n int) [][]string {
	paths := make([][]string, n)
	for i := range paths {
		p := make([]string, 1+rnd.IntN(6))
		for j := range p {
			p[j] = words[rnd.IntN(len(words))]
		}
		paths[i] = p
	}
	return paths
}

func checkIgnoreAgainstGoGit(t *testing.T, files []ignoreSource, paths [][]string) {
	t.Helper()
	oracle, m := newGoGitIgnore(files), newIgnore(files)
	bad := 0
	for _, p := range paths {
		for _, isDir := range []bool{false, true} {
			if got, want := m.Match(p, isDir), oracle.m.Match(p, isDir); got != want {
				t.Errorf("Match(%q, dir=%v) = %v, go-git says %v", strings.Join(p, "/"), isDir, got, want)
				if bad++; bad > 20 {
					t.Fatal("too many differences")
				}
			}
		}
	}
}

// TestIgnoreMatchesGoGit compares the compiled matcher with go-git's on
// each real-world .gitignore in testdata/gitignore, on generated paths.
func TestIgnoreMatchesGoGit(t *testing.T) {
	corpus := readCorpus(t)
	rnd := rand.New(rand.NewPCG(19, 1))
	for name, data := range corpus {
		t.Run(name, func(t *testing.T) {
			paths := randomPaths(rnd, pathVocabulary(data), 4000)
			checkIgnoreAgainstGoGit(t, []ignoreSource{{data: data}}, paths)
		})
	}
}

// TestIgnoreNestedMatchesGoGit stacks corpus files at several directory
// levels, each with its own base, as search does for nested .gitignore
// files, and compares with go-git.
func TestIgnoreNestedMatchesGoGit(t *testing.T) {
	corpus := readCorpus(t)
	all := ""
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range corpus {
			if !yield(k) {
				return
			}
		}
	}) {
		all += corpus[name] + "\n"
	}
	files := []ignoreSource{
		{data: corpus["Node"]},
		{domain: []string{"src"}, data: corpus["VisualStudio"]},
		{domain: []string{"src", "sub"}, data: corpus["Edge"]},
		{domain: []string{"lib"}, data: "!*.log\n/build\n"},
		{domain: []string{"src", "sub", "deep"}, data: corpus["Python"]},
	}
	rnd := rand.New(rand.NewPCG(19, 2))
	paths := randomPaths(rnd, pathVocabulary(all), 10000)
	for i, p := range paths {
		switch i % 3 { // put a third under each nested domain
		case 0:
			paths[i] = append([]string{"src", "sub"}, p...)
		case 1:
			paths[i] = append([]string{"src"}, p...)
		}
	}
	checkIgnoreAgainstGoGit(t, files, paths)
}

// FuzzIgnoreMatcher compares the compiled matcher with go-git's on
// arbitrary rules and paths. A rule file's lines are split on "\n"; the
// path on "/", with a nested file at "d" of the second rule text.
func FuzzIgnoreMatcher(f *testing.F) {
	f.Add("*.log\n!keep.log\n", "", "a/keep.log", false)
	f.Add("/build/\n**/tmp\n", "x", "d/build/tmp", true)
	f.Add("a/**/b\n", "!b", "d/a/x/b/c", false)
	f.Add("foo/**\n[abc]\\*\n", "", "foo", false)
	f.Add("\\!x\ny\\ \n", "**/", "d/!x", true)
	f.Add("*.[Cc]ache\n!?*.[Cc]ache/\n", "[", "d/x.cache", true)
	f.Fuzz(func(t *testing.T, rules, nested, path string, isDir bool) {
		if len(rules)+len(nested) > 2000 || len(path) > 200 {
			return
		}
		files := []ignoreSource{{data: rules}, {domain: []string{"d"}, data: nested}}
		p := strings.Split(path, "/")
		oracle, m := newGoGitIgnore(files), newIgnore(files)
		if got, want := m.Match(p, isDir), oracle.m.Match(p, isDir); got != want {
			t.Fatalf("rules %q, nested %q: Match(%q, dir=%v) = %v, go-git says %v", rules, nested, path, isDir, got, want)
		}
	})
}

// TestSearchIgnoreCostIndependentOfRules checks that a long .gitignore of
// rules that match nothing costs search little: the matcher must not try
// every rule on every path (go-git's did: a 1,000-line file made this
// search 30-100× slower than a 2-line one).
func TestSearchIgnoreCostIndependentOfRules(t *testing.T) {
	root := t.TempDir()
	for d := range 20 {
		dir := filepath.Join(root, fmt.Sprintf("pkg%d", d), "internal", "sub")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", i)), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var long strings.Builder
	for i := range 1000 {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&long, "name%d\n", i)
		case 1:
			fmt.Fprintf(&long, "*.ext%d\n", i)
		case 2:
			fmt.Fprintf(&long, "/dir%d/\n", i)
		case 3:
			fmt.Fprintf(&long, "**/gen%d/*.out\n", i)
		}
	}
	s, err := NewSearch(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	timeSearch := func(gitignore string) time.Duration {
		if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte(gitignore), 0o644); err != nil {
			t.Fatal(err)
		}
		best := time.Duration(1 << 62)
		for range 5 {
			start := time.Now()
			res, err := s.Execute(t.Context(), Invocation{Arguments: argsJSON(t, map[string]any{"pattern": "nothing-matches", "literal": true})})
			if err != nil || res.Details["files_searched"] != int64(2001) {
				t.Fatalf("search: %v %v", err, res.Details)
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	short, long1000 := timeSearch("*.tmp\nvendor/\n"), timeSearch(long.String())
	if ratio := float64(long1000) / float64(short); ratio > 5 {
		t.Errorf("1,000-line .gitignore: %v, 2-line: %v (%.1f×); want ≤ 5×", long1000, short, ratio)
	}
}
