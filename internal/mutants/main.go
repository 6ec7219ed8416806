// Command mutants runs curated mutation tests of octet's safety core: each
// mutant is a one-line search-and-replace in one file (a guard removed, a
// bound moved, a condition inverted), applied alone, and judged by running
// only its package's tests. A mutant the tests do not fail on survived: a
// gap, unless the data file marks it equivalent (and says why).
//
// The tree is never written: each mutated file is handed to the go command
// through -overlay, so an interrupted run leaves nothing behind.
//
// Usage, from the module root (.ci/mutants is a wrapper):
//
//	go run ./internal/mutants [-ci] [-file SUBSTR] [-name REGEXP] [-min PCT] [DATAFILE]
//
// The data file (internal/mutants/mutants.txt) is described at its top.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// A mutant is one change to one file and the tests that judge it.
type mutant struct {
	name       string
	file       string // module-relative, slash-separated
	pkg        string // go test package pattern
	run        string // -run regexp; empty runs the package's whole suite
	skip       string // -skip regexp
	timeout    string // go test -timeout
	ci         bool
	near       []string // anchors: each is searched after the previous, from after the last
	from, to   string
	equivalent string // why the mutant cannot be detected; empty for a real mutant
	line       int    // where it is declared in the data file
}

// outcome is what running a mutant showed.
type outcome int

const (
	killed outcome = iota
	survived
	broken // did not apply or did not build: the data file is wrong
	skipped
)

func (o outcome) String() string {
	return [...]string{"killed", "SURVIVED", "BROKEN", "equivalent"}[o]
}

func main() {
	ci := flag.Bool("ci", false, "run only the mutants tagged ci, and fail if any survives")
	fileSub := flag.String("file", "", "run only mutants of files whose path contains this")
	nameRE := flag.String("name", "", "run only mutants whose name matches this regexp")
	minPct := flag.Float64("min", 0, "fail when a file's score is below this percentage")
	list := flag.Bool("list", false, "list the selected mutants without running them")
	check := flag.Bool("check", false, "only check that each selected mutant applies and builds")
	runRE := flag.String("run", "", "override the go test -run of every selected mutant (to try new tests quickly)")
	skipRE := flag.String("skip", "", "also skip these tests (to measure the suite without some)")
	verbose := flag.Bool("v", false, "print the test output of survivors and broken mutants")
	flag.Parse()
	data := filepath.Join("internal", "mutants", "mutants.txt")
	if flag.NArg() > 0 {
		data = flag.Arg(0)
	}
	ms, err := parseFile(data)
	if err != nil {
		fatal(err)
	}
	var re *regexp.Regexp
	if *nameRE != "" {
		if re, err = regexp.Compile(*nameRE); err != nil {
			fatal(fmt.Errorf("-name: %w", err))
		}
	}
	var sel []mutant
	for _, m := range ms {
		if (*ci && !m.ci) || !strings.Contains(m.file, *fileSub) || (re != nil && !re.MatchString(m.name)) {
			continue
		}
		if *runRE != "" {
			m.run, m.skip = *runRE, ""
		}
		if *skipRE != "" {
			m.skip = strings.Trim(m.skip+"|"+*skipRE, "|")
		}
		sel = append(sel, m)
	}
	if *list {
		for _, m := range sel {
			fmt.Printf("%s\t%s\t%s\n", m.file, m.name, m.equivalent)
		}
		return
	}
	tmp, err := os.MkdirTemp("", "octet-mutants-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(tmp)
	res := make([]outcome, len(sel))
	start := time.Now()
	for i, m := range sel {
		if m.equivalent != "" {
			res[i] = skipped
			continue
		}
		t0 := time.Now()
		var out string
		res[i], out = runMutant(tmp, m, *check)
		fmt.Printf("%-9s %-30s %-40s %5.1fs", res[i], m.file, m.name, time.Since(t0).Seconds())
		if res[i] == killed {
			fmt.Printf("  %s", killers(out))
		}
		fmt.Println()
		if *verbose && res[i] != killed {
			fmt.Println(indent(out))
		}
	}
	ok := report(os.Stdout, sel, res, *minPct)
	fmt.Printf("\n%d mutants in %s\n", len(sel), time.Since(start).Round(time.Second))
	if *ci {
		for _, o := range res {
			if o == survived {
				ok = false
			}
		}
	}
	if !ok {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutants:", err)
	os.Exit(2)
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if len(s) > 4000 {
		s = "..." + s[len(s)-4000:]
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// failRE matches a top-level test failure in go test output.
var failRE = regexp.MustCompile(`(?m)^--- FAIL: (\w+)`)

// killers names the top-level tests that failed in out (a panic or a
// timeout names none), at most three.
func killers(out string) string {
	var names []string
	for _, m := range failRE.FindAllStringSubmatch(out, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	switch {
	case len(names) == 0 && strings.Contains(out, "panic: test timed out"):
		return "(timeout)"
	case len(names) == 0:
		return "(panic or build of the test binary)"
	case len(names) > 3:
		return strings.Join(names[:3], ",") + ",..."
	}
	return strings.Join(names, ",")
}

// apply returns src with m applied, or an error when its text is not
// found exactly once: in the whole file, or (with anchors) as the first
// occurrence after the last anchor, the first of which must be unique.
func apply(src string, m mutant) (string, error) {
	base := 0
	for k, a := range m.near {
		i := strings.Index(src[base:], a)
		if i < 0 {
			return "", fmt.Errorf("anchor %q not found", a)
		}
		if k == 0 && strings.Count(src, a) > 1 {
			return "", fmt.Errorf("anchor %q is not unique", a)
		}
		base += i + len(a)
	}
	i := strings.Index(src[base:], m.from)
	if i < 0 {
		return "", fmt.Errorf("%q not found", m.from)
	}
	if len(m.near) == 0 && strings.Count(src, m.from) > 1 {
		return "", fmt.Errorf("%q is not unique; add an anchor (@)", m.from)
	}
	i += base
	return src[:i] + m.to + src[i+len(m.from):], nil
}

// runMutant writes the mutated file under tmp and runs the package's tests
// with it overlaid.
func runMutant(tmp string, m mutant, buildOnly bool) (outcome, string) {
	src, err := os.ReadFile(filepath.FromSlash(m.file))
	if err != nil {
		return broken, err.Error()
	}
	mut, err := apply(string(src), m)
	if err != nil {
		return broken, err.Error()
	}
	abs, err := filepath.Abs(filepath.FromSlash(m.file))
	if err != nil {
		return broken, err.Error()
	}
	mf := filepath.Join(tmp, "mutant.go")
	if err := os.WriteFile(mf, []byte(mut), 0o644); err != nil {
		return broken, err.Error()
	}
	ov, err := json.Marshal(map[string]any{"Replace": map[string]string{abs: mf}})
	if err != nil {
		return broken, err.Error()
	}
	of := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(of, ov, 0o644); err != nil {
		return broken, err.Error()
	}
	if buildOnly {
		out, err := exec.Command("go", "build", "-overlay="+of, "-o", os.DevNull, m.pkg).CombinedOutput()
		if err != nil {
			return broken, string(out)
		}
		return killed, ""
	}
	args := []string{"test", "-count=1", "-overlay=" + of, "-timeout=" + m.timeout}
	if m.run != "" {
		args = append(args, "-run", m.run)
	}
	if m.skip != "" {
		args = append(args, "-skip", m.skip)
	}
	args = append(args, m.pkg)
	// A hung test binary is ended by -timeout; this bounds the build too.
	d, _ := time.ParseDuration(m.timeout)
	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "OCTET_MUTANT="+m.name)
	b, err := cmd.CombinedOutput()
	out := string(b)
	switch {
	case err == nil:
		return survived, out
	case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]"):
		return broken, out
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) && ctx.Err() == nil {
		return broken, out + err.Error()
	}
	return killed, out
}

// report prints the score per file and the survivors, and reports whether
// every file reached minPct and no mutant was broken.
func report(w io.Writer, ms []mutant, res []outcome, minPct float64) bool {
	type tally struct{ killed, real, equiv int }
	per := map[string]*tally{}
	var files []string
	ok := true
	for i, m := range ms {
		t := per[m.file]
		if t == nil {
			t = &tally{}
			per[m.file] = t
			files = append(files, m.file)
		}
		switch res[i] {
		case skipped:
			t.equiv++
		case killed:
			t.killed++
			t.real++
		case survived:
			t.real++
		case broken:
			ok = false
		}
	}
	sort.Strings(files)
	fmt.Fprintf(w, "\n%-32s %7s %6s %10s\n", "file", "killed", "score", "equivalent")
	for _, f := range files {
		t := per[f]
		pct := 100.0
		if t.real > 0 {
			pct = 100 * float64(t.killed) / float64(t.real)
		}
		if pct < minPct {
			ok = false
		}
		fmt.Fprintf(w, "%-32s %3d/%-3d %5.0f%% %10d\n", f, t.killed, t.real, pct, t.equiv)
	}
	for i, m := range ms {
		switch res[i] {
		case survived:
			fmt.Fprintf(w, "survived: %s %s (mutants.txt:%d)\n", m.file, m.name, m.line)
		case broken:
			fmt.Fprintf(w, "broken:   %s %s (mutants.txt:%d): fix its text in the data file\n", m.file, m.name, m.line)
		}
	}
	return ok
}

// parseFile reads a data file; see parse.
func parseFile(name string) ([]mutant, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", name, err)
	}
	return ms, nil
}

// parse reads the data format. "file PATH PKG" starts a group; "run
// REGEXP", "skip REGEXP" and "timeout D" set the group's go test flags
// (timeout carries over to later groups). Each "mutant NAME [ci]" is
// followed by indented lines "@ ANCHOR", "- FROM", "+ TO" (a bare "+"
// deletes FROM), "run REGEXP", "skip REGEXP" and "equivalent REASON".
// Text after the marker and one space is taken verbatim.
func parse(r io.Reader) ([]mutant, error) {
	var (
		ms   []mutant
		grp  mutant
		cur  *mutant
		seen = map[string]bool{}
	)
	grp.timeout = "5m"
	sc := bufio.NewScanner(r)
	n := 0
	flush := func() error {
		if cur == nil {
			return nil
		}
		if cur.from == "" {
			return fmt.Errorf("%d: mutant %s has no \"- \" line", cur.line, cur.name)
		}
		if cur.from == cur.to {
			return fmt.Errorf("%d: mutant %s changes nothing", cur.line, cur.name)
		}
		ms = append(ms, *cur)
		cur = nil
		return nil
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		trim := strings.TrimLeft(line, " \t")
		if trim == "" || strings.HasPrefix(trim, "#") {
			continue
		}
		if line == trim { // a top-level directive
			if err := flush(); err != nil {
				return nil, err
			}
			f := strings.Fields(line)
			switch {
			case f[0] == "file" && len(f) == 3:
				grp = mutant{file: f[1], pkg: f[2], timeout: grp.timeout}
			case (f[0] == "run" || f[0] == "skip") && len(f) == 2:
				if _, err := regexp.Compile(f[1]); err != nil {
					return nil, fmt.Errorf("%d: %w", n, err)
				}
				if f[0] == "run" {
					grp.run = f[1]
				} else {
					grp.skip = f[1]
				}
			case f[0] == "timeout" && len(f) == 2:
				if _, err := time.ParseDuration(f[1]); err != nil {
					return nil, fmt.Errorf("%d: %w", n, err)
				}
				grp.timeout = f[1]
			case f[0] == "mutant" && (len(f) == 2 || len(f) == 3 && f[2] == "ci"):
				if grp.file == "" {
					return nil, fmt.Errorf("%d: mutant before any file line", n)
				}
				if seen[grp.file+" "+f[1]] {
					return nil, fmt.Errorf("%d: mutant %s declared twice for %s", n, f[1], grp.file)
				}
				seen[grp.file+" "+f[1]] = true
				m := grp
				m.name, m.ci, m.line = f[1], len(f) == 3, n
				cur = &m
			default:
				return nil, fmt.Errorf("%d: cannot parse %q", n, line)
			}
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("%d: indented line outside a mutant", n)
		}
		key, val, _ := strings.Cut(trim, " ")
		switch key {
		case "@":
			cur.near = append(cur.near, val)
		case "-":
			if cur.from != "" {
				return nil, fmt.Errorf("%d: a mutant changes one line: a second \"- \"", n)
			}
			cur.from = val
		case "+":
			cur.to = val
		case "run":
			cur.run = val
		case "skip":
			cur.skip = val
		case "equivalent":
			cur.equivalent = val
		default:
			return nil, fmt.Errorf("%d: unknown key %q", n, key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return ms, nil
}
