//go:build unix

package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func searchTree(t *testing.T) (ws, out string) {
	t.Helper()
	base := t.TempDir()
	ws, out = filepath.Join(base, "ws"), filepath.Join(base, "out")
	files := map[string]string{
		".gitignore":           "*.log\nbuild/\n# comment\n\n/rootonly.txt\n",
		"main.go":              "package main\n\nfunc main() {\n\tprintln(\"needle\")\n}\n",
		"rootonly.txt":         "needle at root\n",
		"app.log":              "needle in log\n",
		"build/out.txt":        "needle in build\n",
		"sub/.gitignore":       "!keep.log\nsecret.txt\n",
		"sub/keep.log":         "needle kept\n",
		"sub/drop.log.txt":     "needle txt\n",
		"sub/secret.txt":       "needle secret\n",
		"sub/rootonly.txt":     "needle not anchored here\n",
		"sub/deep/a.go":        "// needle one\nx := 1\n// needle two\n",
		".git/config":          "needle in git\n",
		".hidden/h.txt":        "needle hidden\n",
		"bin.dat":              "needle\x00binary\n",
		"long.txt":             strings.Repeat("x", 1000) + "needle" + strings.Repeat("y", 1000) + "\n",
		"ctrl.txt":             "needle \x1b[31mred\x1b[0m\n",
		"../out/outside.txt":   "needle outside\n",
		"crlf.txt":             "needle crlf\r\nother\r\n",
		"noeol.txt":            "first\nneedle last",
		"sub/deep/b.{x}/c.txt": "needle brace\n",
	}
	for p, c := range files {
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, full, c)
	}
	if err := os.Symlink(out, filepath.Join(ws, "outlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(out, "outside.txt"), filepath.Join(ws, "filelink.txt")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(ws, "fifo.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, out
}

func searchLines(res Result) []string {
	var out []string
	for l := range strings.SplitSeq(strings.TrimSuffix(res.Text, "\n"), "\n") {
		if !strings.HasPrefix(l, "[") {
			out = append(out, l)
		}
	}
	return out
}

func TestSearchRespectsIgnoresLinksAndBinary(t *testing.T) {
	ws, _ := searchTree(t)
	s, err := NewSearch(Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Result, 1)
	go func() { done <- run(t, s, map[string]any{"pattern": "needle", "literal": true}) }()
	var res Result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("search hung (FIFO?)")
	}
	got := searchLines(res)
	want := []string{
		".hidden/h.txt:1:needle hidden",
		"crlf.txt:1:needle crlf",
		"ctrl.txt:1:needle red",
		"long.txt:1:" + strings.Repeat("x", MaxSearchLineBytes) + " …",
		"main.go:4:\tprintln(\"needle\")",
		"noeol.txt:2:needle last",
		"sub/deep/a.go:1:// needle one",
		"sub/deep/a.go:3:// needle two",
		"sub/deep/b.{x}/c.txt:1:needle brace",
		"sub/drop.log.txt:1:needle txt",
		"sub/keep.log:1:needle kept",
		"sub/rootonly.txt:1:needle not anchored here",
	}
	if !slices.Equal(got, want) {
		t.Errorf("search results:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.Details["skipped_binary"] != int64(1) || res.Details["truncated"] != false {
		t.Errorf("details: %v", res.Details)
	}
}

func TestSearchRegexGlobAndPath(t *testing.T) {
	ws, _ := searchTree(t)
	s, _ := NewSearch(Config{Root: ws})
	cases := []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{"pattern": `needle (one|two)$`}, []string{"sub/deep/a.go:1:// needle one", "sub/deep/a.go:3:// needle two"}},
		{map[string]any{"pattern": `^func \w+\(`}, []string{"main.go:3:func main() {"}},
		{map[string]any{"pattern": "needle", "glob": "*.go"}, []string{"main.go:4:\tprintln(\"needle\")", "sub/deep/a.go:1:// needle one", "sub/deep/a.go:3:// needle two"}},
		{map[string]any{"pattern": "needle", "glob": "sub/**/*.go"}, []string{"sub/deep/a.go:1:// needle one", "sub/deep/a.go:3:// needle two"}},
		{map[string]any{"pattern": "needle", "glob": "{keep.log,noeol.txt}"}, []string{"noeol.txt:2:needle last", "sub/keep.log:1:needle kept"}},
		{map[string]any{"pattern": "needle", "path": "sub/deep"}, []string{"sub/deep/a.go:1:// needle one", "sub/deep/a.go:3:// needle two", "sub/deep/b.{x}/c.txt:1:needle brace"}},
		{map[string]any{"pattern": "needle", "path": "sub/deep/a.go", "max_results": 1}, []string{"sub/deep/a.go:1:// needle one"}},
		// The nested .gitignore still applies when searching below it.
		{map[string]any{"pattern": "needle", "path": "sub", "glob": "*.txt"}, []string{"sub/deep/b.{x}/c.txt:1:needle brace", "sub/drop.log.txt:1:needle txt", "sub/rootonly.txt:1:needle not anchored here"}},
		{map[string]any{"pattern": "a.b", "literal": true}, nil},
		{map[string]any{"pattern": `(?i)NEEDLE KEPT`}, []string{"sub/keep.log:1:needle kept"}},
		{map[string]any{"pattern": `other\s*$`}, []string{"crlf.txt:2:other"}},
	}
	for _, c := range cases {
		res := run(t, s, c.args)
		if got := searchLines(res); !slices.Equal(got, c.want) && !(len(got) == 1 && c.want == nil && strings.HasPrefix(got[0], "No matches")) {
			t.Errorf("search %v:\n%s\nwant:\n%s", c.args, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
	res := run(t, s, map[string]any{"pattern": "needle", "path": "outlink"})
	if !res.IsError {
		t.Errorf("search through a link: %+v", res)
	}
}

func TestSearchLimits(t *testing.T) {
	ws := t.TempDir()
	for i := range 30 {
		var b strings.Builder
		for j := range 100 {
			fmt.Fprintf(&b, "hit %d %d\n", i, j)
		}
		writeTestFile(t, filepath.Join(ws, fmt.Sprintf("f%02d.txt", i)), b.String())
	}
	s, _ := NewSearch(Config{Root: ws, MaxOutputBytes: 2048})
	res := run(t, s, map[string]any{"pattern": "hit"})
	if len(res.Text) > 2048 || res.Details["truncated"] != true || !strings.Contains(res.Text, "3000 matching lines in total; showing the first 100") {
		t.Errorf("limited search: %d bytes, %v\n%s", len(res.Text), res.Details, res.Text[max(0, len(res.Text)-300):])
	}
	// A limited result is the first max_results lines in path order, the
	// same on every run whatever order the workers visit files in.
	s, _ = NewSearch(Config{Root: ws})
	for range 3 {
		res = run(t, s, map[string]any{"pattern": "hit", "max_results": 150})
		got := searchLines(res)
		if len(got) != 150 || res.Details["total_matches"] != int64(3000) {
			t.Fatalf("max_results 150: %d lines, %v", len(got), res.Details)
		}
		for i, l := range got {
			file, line := 0, i+1
			if i >= 100 {
				file, line = 1, i-99
			}
			if want := fmt.Sprintf("f%02d.txt:%d:hit %d %d", file, line, file, line-1); l != want {
				t.Fatalf("line %d = %q, want %q", i, l, want)
			}
		}
	}
	res = run(t, s, map[string]any{"pattern": "hit", "max_results": 1000})
	if res.Details["matches"] != 1000 {
		t.Errorf("max_results 1000: %v", res.Details)
	}
	for _, bad := range []string{`{"pattern":"x","max_results":1001}`, `{"pattern":"x","max_results":0}`, `{"pattern":""}`, `{"pattern":"("}`, `{"pattern":"a\nb","literal":true}`, `{"pattern":"x","glob":"[abc"}`, `{"pattern":"x","path":"../x"}`, `{"pattern":"x","path":"/etc"}`, `{}`} {
		if _, err := s.Classify(json.RawMessage(bad)); err == nil {
			t.Errorf("Classify(%s) accepted", bad)
		}
	}
}

// TestSearchMatchesNaiveScan compares the search (literal prefilter,
// whole-buffer regexp, parallel walk) with a plain line-by-line scan over
// a real source tree.
func TestSearchMatchesNaiveScan(t *testing.T) {
	root := filepath.Join(runtime.GOROOT(), "src", "strings")
	if _, err := os.Stat(root); err != nil {
		t.Skip("GOROOT source not available")
	}
	s, _ := NewSearch(Config{Root: root})
	for _, p := range []string{`func \(\w+ \*Builder\)`, `^\s*return$`, `\bRune\b.*\)$`, `x*`, `[[:upper:]]{4,}`, `Index(Byte|Rune)?\(`, `^$`, `\t\t\t\t`, `\d{3,}`, `[a-z]+_[a-z]+`, `(?i)unicode`} {
		re := regexp.MustCompile(p)
		var want []string
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			data, _ := os.ReadFile(path)
			if isBinary(data) {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			sc := bufio.NewScanner(bytes.NewReader(data))
			sc.Buffer(nil, 1<<20)
			for n := 1; sc.Scan(); n++ {
				if re.Match(sc.Bytes()) {
					want = append(want, fmt.Sprintf("%s:%d", rel, n))
				}
			}
			return nil
		})
		q, err := s.parse(argsJSON(t, map[string]any{"pattern": p}))
		if err != nil {
			t.Fatal(err)
		}
		q.maxResults = 1 << 30
		hits, _, err := s.search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range hits {
			got = append(got, fmt.Sprintf("%s:%d", h.path, h.line))
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("pattern %q: %d hits, naive scan %d", p, len(got), len(want))
		}
	}
}

func TestPrefilterChoice(t *testing.T) {
	for p, want := range map[string]string{
		`func \(\w+ \*Builder\)`: "lit: *Builder)",
		`foo`:                    "lit:foo",
		`(?i)foo`:                "none",
		`a|b`:                    "none",
		`x(abc)+y`:               "lit:abc",
		`(abcd)?e`:               "none", // "e" alone is too common
		`(abcd)?#`:               "lit:#",
		`\w+Reader`:              "lit:Reader",
		`[a-z]+_[a-z]+\(`:        "lit:_",
		`\d{5,}`:                 "set:5",
		`[^a]{3}`:                "none", // the class holds a line break
		`[a-z]+`:                 "none",
	} {
		m, err := newLineMatcher(p, false)
		if err != nil {
			t.Fatal(err)
		}
		got := "none"
		switch {
		case m.literal != nil:
			got = "lit:" + string(m.literal)
		case m.set != nil:
			got = fmt.Sprintf("set:%d", m.run)
		}
		if got != want {
			t.Errorf("prefilter(%q) = %s, want %s", p, got, want)
		}
	}
}

func TestSearchCancelReleasesEverything(t *testing.T) {
	root := filepath.Join(runtime.GOROOT(), "src")
	if _, err := os.Stat(root); err != nil {
		t.Skip("GOROOT source not available")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	fds := func() int { ents, _ := os.ReadDir("/proc/self/fd"); return len(ents) }
	before := fds()
	s, _ := NewSearch(Config{Root: root})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Execute(ctx, Invocation{Arguments: json.RawMessage(`{"pattern":"zzzz_never_zzzz"}`)}); err == nil {
		t.Error("cancelled search returned no error")
	}
	// Cancel in the middle of a whole-tree walk.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	// (A whole-tree walk of 11,000 files outlasts 30 ms by far.)
	if _, err := s.Execute(ctx, Invocation{Arguments: json.RawMessage(`{"pattern":"zzzz_never_zzzz"}`)}); err == nil {
		t.Error("mid-walk cancellation ignored")
	}
	// A limited search stops early, too; all leave no descriptor open.
	res := run(t, s, map[string]any{"pattern": "func", "max_results": 5})
	if res.Details["matches"] != 5 || res.Details["truncated"] != true {
		t.Errorf("limited: %v", res.Details)
	}
	if after := fds(); after != before {
		t.Errorf("descriptors: %d before, %d after", before, after)
	}
}

// cpuTime returns the user+system CPU time of who (RUSAGE_SELF or
// RUSAGE_CHILDREN). On a shared, oversubscribed machine CPU time compares
// two programs more fairly than wall time.
func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSearchGOROOT compares a whole-tree search of
// $(go env GOROOT)/src with ripgrep on the same pattern in the same run.
// Run: go test ./tools -run '^$' -bench SearchGOROOT -benchtime 10x
func BenchmarkSearchGOROOT(b *testing.B) {
	root := filepath.Join(runtime.GOROOT(), "src")
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Skip("ripgrep (rg) not installed; apt-get install -y ripgrep")
	}
	s, err := NewSearch(Config{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name, pattern string
		literal       bool
	}{
		{"literal", "EncodeRune", true},
		{"regex", `func \(\w+ \*Reader\) Read\w*\(`, false},
		{"regex-inner-literal", `[A-Z][a-z]+Buffer\b`, false},
		{"regex-byte-prefilter", `[a-z]+_[a-z]+\(`, false},
		{"regex-class-run", `\d{5,}`, false},
		{"regex-unselective", `[a-z]+[0-9]\b`, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchVsRipgrep(b, rg, s, root, bc.pattern, bc.literal)
		})
	}
}

// benchVsRipgrep times a whole-tree search of root for pattern, then
// ripgrep's, in each iteration, and reports both with their CPU times.
func benchVsRipgrep(b *testing.B, rg string, s *SearchTool, root, pattern string, literal bool) {
	q, err := s.parse(argsJSON(b, map[string]any{"pattern": pattern, "literal": literal}))
	if err != nil {
		b.Fatal(err)
	}
	q.maxResults = 1 << 30 // scan the whole tree, as rg does
	args := []string{"--no-config", "--no-require-git", "--hidden", "-n", "--no-heading"}
	if literal {
		args = append(args, "-F")
	}
	args = append(args, "-e", pattern, root)
	var ours, theirs, oursCPU, theirsCPU time.Duration
	var nOurs, nRg int
	for b.Loop() {
		start, cpu0 := time.Now(), cpuTime(syscall.RUSAGE_SELF)
		hits, _, err := s.search(context.Background(), q)
		ours += time.Since(start)
		oursCPU += cpuTime(syscall.RUSAGE_SELF) - cpu0
		if err != nil {
			b.Fatal(err)
		}
		nOurs = len(hits)
		start = time.Now()
		cmd := exec.Command(rg, args...)
		outp, err := cmd.Output()
		theirs += time.Since(start)
		if err != nil {
			b.Fatalf("rg: %v", err)
		}
		theirsCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		nRg = bytes.Count(outp, []byte{'\n'})
	}
	if nOurs != nRg {
		b.Logf("match count differs: octet %d, rg %d", nOurs, nRg)
	}
	n := float64(b.N)
	b.ReportMetric(float64(ours.Milliseconds())/n, "octet-ms/op")
	b.ReportMetric(float64(theirs.Milliseconds())/n, "rg-ms/op")
	b.ReportMetric(float64(ours)/float64(theirs), "ratio")
	b.ReportMetric(float64(oursCPU.Milliseconds())/n, "octet-cpu-ms/op")
	b.ReportMetric(float64(theirsCPU.Milliseconds())/n, "rg-cpu-ms/op")
	b.ReportMetric(float64(oursCPU)/float64(theirsCPU), "cpu-ratio")
	b.ReportMetric(float64(nOurs), "matches")
}

// FuzzGlobRegexp checks that any glob either compiles or is rejected with
// an error, never a panic, and that a compiled glob never matches across
// a "/" with a single star.
func FuzzGlobRegexp(f *testing.F) {
	for _, s := range []string{"*.go", "src/**/*.ts", "{a,b}.txt", "[!x]?", "a\\*b", "[abc", "}{", "**"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, glob string) {
		re, err := globRegexp(glob)
		if err != nil {
			return
		}
		if glob == "*" && re.MatchString("a/b") {
			t.Fatal("* matched across /")
		}
	})
}

// FuzzLiteralScan compares the literal line scan with a naive split.
func FuzzLiteralScan(f *testing.F) {
	f.Add("ab", []byte("xxab\nab\n\nzab"))
	f.Add("a", []byte("a"))
	f.Add("\t", []byte("\t\n\t\t\n"))
	f.Fuzz(func(t *testing.T, pattern string, data []byte) {
		m, err := newLineMatcher(pattern, true)
		if err != nil || len(data) == 0 {
			return
		}
		var got []int
		m.scan(data, func(n int, line []byte) bool {
			got = append(got, n)
			return true
		})
		var want []int
		lines := strings.Split(string(data), "\n")
		if strings.HasSuffix(string(data), "\n") {
			lines = lines[:len(lines)-1]
		}
		for i, l := range lines {
			if strings.Contains(l, pattern) {
				want = append(want, i+1)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("scan(%q, %q) = %v, want %v", pattern, data, got, want)
		}
	})
}

// FuzzRegexScan compares the regexp line scan (prefilter or whole-buffer)
// with a naive per-line match.
func FuzzRegexScan(f *testing.F) {
	f.Add(`a+b`, []byte("aab\nb\nab"))
	f.Add(`^$`, []byte("\n\nx\n"))
	f.Add(`x*`, []byte("a\nxx\n"))
	f.Add(`\s+\n`, []byte("a \nb\n"))
	f.Add(`foo\w*bar`, []byte("foo_bar foobar\nfoo\nbar"))
	f.Fuzz(func(t *testing.T, pattern string, data []byte) {
		m, err := newLineMatcher(pattern, false)
		if err != nil || len(data) == 0 || len(pattern) > 64 {
			return
		}
		var got []int
		m.scan(data, func(n int, line []byte) bool {
			got = append(got, n)
			return true
		})
		var want []int
		lines := bytes.Split(data, []byte("\n"))
		if data[len(data)-1] == '\n' {
			lines = lines[:len(lines)-1]
		}
		for i, l := range lines {
			if m.re.Match(l) {
				want = append(want, i+1)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("scan(%q, %q) = %v, want %v", pattern, data, got, want)
		}
	})
}

func TestHitSetKeepsFirstN(t *testing.T) {
	var all []searchHit
	for p := range 20 {
		for l := range 25 {
			all = append(all, searchHit{path: fmt.Sprintf("p%02d", p), line: l + 1})
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, max := range []int{1, 2, 7, 100, 499, 500, 1000} {
		for range 20 {
			rnd.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
			s := &hitSet{max: max}
			for _, h := range all {
				if s.wants(h.path, h.line) {
					s.add(h)
				}
			}
			got := slices.Clone(s.hits)
			slices.SortFunc(got, func(a, b searchHit) int { return hitOrder(a.path, a.line, b) })
			want := slices.Clone(all)
			slices.SortFunc(want, func(a, b searchHit) int { return hitOrder(a.path, a.line, b) })
			want = want[:min(max, len(want))]
			if !slices.Equal(got, want) {
				t.Fatalf("max %d: kept %d hits, not the first ones", max, len(got))
			}
		}
	}
}
