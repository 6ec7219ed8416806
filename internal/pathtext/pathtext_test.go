package pathtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"a/b.go":           "a/b.go",
		"été/ü.txt":        "été/ü.txt",
		"odd\n+fake":       `"odd\n+fake"`,
		"tab\tx":           `"tab\tx"`,
		"esc\x1b[2J":       `"esc\x1b[2J"`,
		"rtl\u202etxt.exe": `"rtl\u202etxt.exe"`,
		"nb\u00a0sp":       `"nb\u00a0sp"`,
		"zw\u200bj":        `"zw\u200bj"`,
		`q"uote`:           `"q\"uote"`,
		`back\slash`:       `"back\\slash"`,
		"bad\xffutf8":      `"bad\xffutf8"`,
		"with space":       "with space",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := Label("b/", "odd\nname"); got != `"b/odd\nname"` {
		t.Errorf("Label = %s", got)
	}
	if got := Label("a/", "x.go"); got != "a/x.go" {
		t.Errorf("Label = %s", got)
	}
}

// FuzzQuote: whatever the path, its quoted form is one line of printable
// characters.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"a", "odd\n+fake", "\u202e", "\xff", `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		q := Quote(p)
		if !utf8.ValidString(q) || strings.ContainsAny(q, "\n\r\t\x1b\u2028\u2029\u202e") {
			t.Fatalf("Quote(%q) = %q", p, q)
		}
	})
}
