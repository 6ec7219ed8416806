package tools

import (
	"regexp"
	"regexp/syntax"
	"testing"
)

// dfaPatterns and dfaLines are the cases TestLineDFAAgreesWithRegexp
// crosses: assertions, classes, case folding, non-ASCII and invalid
// UTF-8, repetition and alternation.
var dfaPatterns = []string{
	`EncodeRune`, `[a-z]+[0-9]\b`, `[a-z]+_[a-z]+\(`, `\d{5,}`, `[A-Z][a-z]+Buffer\b`,
	`func \(\w+ \*Reader\) Read\w*\(`, `^func`, `^$`, `$`, `x*`, `\bgo\b`, `\Bo\B`,
	`\Afoo`, `bar\z`, `(?i)straße`, `(?m)^\s*//`, `(?s)a.b`, `a.b`, `[^a-z]`, `é+`,
	`\pL+\d`, `(a|ab)(c|bcd)(d*)`, `(?:a|b)*abb`, `[[:alpha:]]{3}[[:digit:]]`,
	`\x{FFFD}`, `.`, `^.$`, `(foo|bar)baz$`, `\b`, `\B`, `^\b`, `a{2,3}?b`, `\.go\b`,
}

var dfaLines = []string{
	"", "a", "x", "EncodeRune(r)", "abc1 def2x", "snake_case(x)", "id 12345 and 1234",
	"bytes.Buffer x", "func (r *Reader) ReadByte(", "func main() {", "  // comment", "go go",
	"foo", "foobar", "barbaz", "STRASSE", "Straße", "aéééz", "héllo9", "a\xffb", "\xff",
	"\xe2\x82", "caf\xc3\xa9 1", "abcd", "abbd", "ababb", "abc123", "x.go ", "x.gox",
	"tab\there\r", "\u00e9", "a b", "ab", "aab", "aaab",
}

// TestLineDFAAgreesWithRegexp checks the automaton against Go's regexp
// on every pattern × line pair (and the same again after its states are
// cached, which is where a wrong transition would show).
func TestLineDFAAgreesWithRegexp(t *testing.T) {
	for _, pat := range dfaPatterns {
		re := regexp.MustCompile(pat)
		parsed, err := syntax.Parse(pat, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		d := newLineDFA(parsed)
		if d == nil {
			t.Fatalf("%q: no automaton", pat)
		}
		for pass := range 2 {
			for _, line := range dfaLines {
				got, ok := d.match([]byte(line))
				if !ok {
					t.Fatalf("%q on %q: automaton full", pat, line)
				}
				if want := re.MatchString(line); got != want {
					t.Errorf("pass %d: %q on %q: automaton %v, regexp %v", pass, pat, line, got, want)
				}
			}
		}
	}
}

// TestLineDFAFullFallsBack builds a pattern whose automaton needs more
// states than the bound: match must say so rather than guess, and the
// search's matchLine must still answer as regexp does.
func TestLineDFAFullFallsBack(t *testing.T) {
	const pat = `(a|b)*a(a|b){14}c`
	m, err := newLineMatcher(pat, false)
	if err != nil {
		t.Fatal(err)
	}
	// A pseudo-random a/b line visits a new state at almost every byte.
	line := make([]byte, 20_000)
	x := uint32(1)
	for i := range line {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		line[i] = 'a' + byte(x&1)
	}
	line = append(line, 'c')
	sawFull := false
	for i := 0; i < len(line); i += 997 {
		l := line[i:]
		if _, ok := m.dfa.match(l); !ok {
			sawFull = true
		}
		if got, want := m.matchLine(l), m.re.Match(l); got != want {
			t.Fatalf("matchLine(%q) = %v, regexp %v", l, got, want)
		}
	}
	if !sawFull {
		t.Fatalf("the automaton of %q never filled up (%d states)", pat, len(m.dfa.states))
	}
}

// FuzzLineDFA compares the automaton with Go's regexp on arbitrary
// patterns and lines (the corpus is in testdata/fuzz/FuzzLineDFA).
func FuzzLineDFA(f *testing.F) {
	for i, pat := range dfaPatterns {
		f.Add(pat, dfaLines[i%len(dfaLines)])
	}
	f.Fuzz(func(t *testing.T, pat, line string) {
		if len(pat) > 64 || len(line) > 256 {
			return
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return
		}
		parsed, err := syntax.Parse(pat, syntax.Perl)
		if err != nil {
			return
		}
		d := newLineDFA(parsed)
		if d == nil {
			return
		}
		// Search matches lines without their line break.
		for _, l := range []string{line} {
			got, ok := d.match([]byte(l))
			if !ok {
				continue
			}
			if want := re.MatchString(l); got != want {
				t.Fatalf("%q on %q: automaton %v, regexp %v", pat, l, got, want)
			}
		}
	})
}

// TestFindRun checks the skipping scan against the byte-by-byte
// definition on every window of a mixed input.
func TestFindRun(t *testing.T) {
	var digits [256]bool
	for c := '0'; c <= '9'; c++ {
		digits[c] = true
	}
	naive := func(b []byte, n int) int {
		count := 0
		for i, c := range b {
			if digits[c] {
				count++
				if count >= n {
					return i - n + 1
				}
			} else {
				count = 0
			}
		}
		return -1
	}
	in := []byte("a1b22c333d4444e55555f666666 12345678 9x90 00000000001")
	for n := 1; n <= 12; n++ {
		for i := range in {
			for j := i; j <= len(in); j++ {
				if got, want := findRun(in[i:j], &digits, n), naive(in[i:j], n); got != want {
					t.Fatalf("findRun(%q, %d) = %d, want %d", in[i:j], n, got, want)
				}
			}
		}
	}
}
