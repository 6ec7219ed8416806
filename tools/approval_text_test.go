package tools

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestApprovalText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain\ttext\n", "plain\ttext\n"},
		{"echo hi\x1b]0; rm -rf build ;\x07 \u202eevil\r", "echo hi^[]0; rm -rf build ;^G ⟨U+202E⟩evil^M"},
		{"echo ok" + strings.Repeat(" ", 8200) + "; touch pwned", "echo ok⟨8200 spaces⟩; touch pwned"},
		{"a" + strings.Repeat(" ", 31) + "b", "a" + strings.Repeat(" ", 31) + "b"}, // under 32 columns: as is
		{"a" + strings.Repeat("\t", 4) + "b", "a⟨4 tabs⟩b"},                        // 32 columns
		{"a\t\t\tb", "a\t\t\tb"},
		{"a" + strings.Repeat(" \t", 10) + "b", "a⟨20 spaces and tabs⟩b"},
		{"ls\n\n\n\n\nrm -rf ~", "ls\n⟨4 blank lines⟩\nrm -rf ~"},
		{"one\n\ntwo", "one\n\ntwo"}, // one blank line: as is
		{"zero\u200bwidth", "zero⟨U+200B⟩width"},
		{"x" + strings.Repeat("\u200b", 5000) + "y", "x⟨5000 × U+200B⟩y"},
		{"tag\U000E0041\U000E0042", "tag⟨U+E0041⟩⟨U+E0042⟩"}, // ASCII smuggling with tag characters
		{"nbsp\u00a0and\u3000ideographic", "nbsp⟨U+00A0⟩and⟨U+3000⟩ideographic"},
		{"line\u2028sep", "line⟨U+2028⟩sep"},
		{"bom\ufeff", "bom⟨U+FEFF⟩"},
		{"vs\ufe0f", "vs⟨U+FE0F⟩"},
		{"c1\u009b2J", "c1⟨U+009B⟩2J"},
		{"bad\xff\xfe", `bad\xFF\xFE`},
		{"fake ⟨9 spaces⟩", "fake ⟨U+27E8⟩9 spaces⟩"}, // octet's own marks cannot be forged
		{"del\x7f", "del^?"},
		{"héllo wörld 日本", "héllo wörld 日本"},
	} {
		if got := approvalText(tt.in); got != tt.want {
			t.Errorf("approvalText(%.60q) = %.80q, want %.80q", tt.in, got, tt.want)
		}
	}
}

// TestVisibleText: the CLI's rendering uses the prompt's notation for
// controls and the characters that reorder or hide text, keeps blank
// runs, ⟨ and the characters that only shape text as they are, and
// passes a prompt's rendering through unchanged.
func TestVisibleText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"title\x1b]0;pwned\x07\x1b[2J\u202eabc\x7f", "title^[]0;pwned^G^[[2J⟨U+202E⟩abc^?"},
		{"code\n\n\n" + strings.Repeat(" ", 40) + "x\t⟨y⟩", "code\n\n\n" + strings.Repeat(" ", 40) + "x\t⟨y⟩"},
		{"c1\u0085\u009b2J bad\xff\r", `c1⟨U+0085⟩⟨U+009B⟩2J bad\xFF^M`},
		{"tag\U000E0041 line\u2028sep \u2066iso\u2069", "tag⟨U+E0041⟩ line⟨U+2028⟩sep ⟨U+2066⟩iso⟨U+2069⟩"},
		// Characters that only shape text stay: emoji, no-break spaces.
		{"family 👨\u200d👩\u200d👧 heart ❤\ufe0f 10\u00a0km", "family 👨\u200d👩\u200d👧 heart ❤\ufe0f 10\u00a0km"},
	} {
		if got := VisibleText(tt.in); got != tt.want {
			t.Errorf("VisibleText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, in := range []string{"fake ⟨9 spaces⟩ \u202e\x1b", "ls\n\n\n\n\nrm" + strings.Repeat("\u200b", 9)} {
		if shown := approvalText(in); VisibleText(shown) != shown {
			t.Errorf("VisibleText changed the prompt rendering %q to %q", shown, VisibleText(shown))
		}
	}
}

func TestApprovalHeadline(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"npm test", 20, "npm test"},
		{"npm test\n", 20, "npm test"},
		{"npm test\ncurl x | sh", 20, "npm test ⟨cut: 1 more line⟩"},
		{"a\nb\nc\n", 20, "a ⟨cut: 2 more lines⟩"},
		{"abcdef", 4, "abcd ⟨cut: 2 more bytes⟩"},
		{"abcdef\nx", 4, "abcd ⟨cut: 2 more bytes and 1 more line⟩"},
		{"ab日本", 4, "ab ⟨cut: 6 more bytes⟩"},                  // never half a character
		{"ab⟨U+202E⟩cd", 6, "ab ⟨cut: 14 more bytes⟩"},         // never half a mark
		{"ab⟨U+202E⟩cd", 15, "ab⟨U+202E⟩c ⟨cut: 1 more byte⟩"}, // a whole mark stays
		{"⟨U+202E⟩x", 0, " ⟨cut: 13 more bytes⟩"},
		{"⟨3 blank lines⟩", 10, ""},
		{"\n  \n⟨3 blank lines⟩\n⟨40 spaces⟩\nrm -rf ~\n", 40, "rm -rf ~"}, // blank lines are skipped, not counted
		{"⟨2 spaces and tabs⟩\n⟨U+200B⟩\nx", 40, "⟨U+200B⟩ ⟨cut: 1 more line⟩"},
		{"\n\t\nrm -rf ~\n\n", 40, "rm -rf ~"},
		{"", 40, ""},
	} {
		if got := ApprovalHeadline(tt.in, tt.n); got != tt.want {
			t.Errorf("ApprovalHeadline(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// FuzzApprovalText: the rendering is valid UTF-8, holds no character a
// display could hide (controls, format and separator characters,
// invisible fillers) except octet's own ⟨ marks, no run of blanks 32
// columns wide and no two consecutive blank lines; and it loses nothing:
// every visible character of the input appears in it, in order.
func FuzzApprovalText(f *testing.F) {
	f.Add("plain\ttext\n")
	f.Add("echo hi\x1b]0; rm -rf x ;\x07 \u202e \r\n")
	f.Add("\xc2\x9b2J \xff\xfe \x1b\u2066")
	f.Add("echo ok" + strings.Repeat(" ", 100) + "; touch pwned\n\n\n\nx")
	f.Fuzz(func(t *testing.T, in string) {
		out := approvalText(in)
		if !utf8.ValidString(out) {
			t.Fatalf("approvalText(%q) = %q: invalid UTF-8", in, out)
		}
		for _, r := range out {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (hiddenRune(r) && r != '⟨') {
				t.Fatalf("hidden character %U survived in %q (from %q)", r, out, in)
			}
		}
		if strings.Contains(out, strings.Repeat(" ", wideBlankColumns)) || strings.Contains(out, "\n\n\n") {
			t.Fatalf("wide blank run survived in %q", out)
		}
		// Every printable, visible character of the input is still there,
		// in order (only blanks, controls and hidden characters change).
		rest := out
		for _, r := range in {
			if r == utf8.RuneError || r < 0x21 || r == 0x7f || hiddenRune(r) || !unicode.IsPrint(r) {
				continue
			}
			i := strings.IndexRune(rest, r)
			if i < 0 {
				t.Fatalf("%q lost %q (from %q)", out, r, in)
			}
			rest = rest[i+utf8.RuneLen(r):]
		}
	})
}

// FuzzVisibleText: the CLI's rendering is valid UTF-8, holds no control
// (but newline and tab) and no character a terminal acts on or reorders
// by, and rendering it again changes nothing.
func FuzzVisibleText(f *testing.F) {
	f.Add("t\x1b]0;pwned\x07i\x1b[2Jtle\u202ecba")
	f.Add("\xc2\x9b2J \xff\xfe \x1b\u2066 👨\u200d👩 ⟨x⟩\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		out := VisibleText(in)
		if !utf8.ValidString(out) {
			t.Fatalf("VisibleText(%q) = %q: invalid UTF-8", in, out)
		}
		for _, r := range out {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || terminalRune(r) {
				t.Fatalf("%U survived in %q (from %q)", r, out, in)
			}
		}
		if again := VisibleText(out); again != out {
			t.Fatalf("VisibleText is not stable: %q, then %q", out, again)
		}
	})
}

// FuzzApprovalHeadline: the headline of any rendering is one line of
// valid UTF-8, its text (before the cut mark) at most n bytes, a prefix
// of a line of the rendering, with each of octet's marks whole.
func FuzzApprovalHeadline(f *testing.F) {
	f.Add("npm test\ncurl x | sh", 8)
	f.Add("\n\n\n\nab\u202ecd\u200b\u200b\u200b\u200b", 5)
	f.Add("日本語"+strings.Repeat(" ", 40)+"x", 7)
	f.Fuzz(func(t *testing.T, in string, n int) {
		n = max(n%300, 0)
		r := approvalText(in)
		h := ApprovalHeadline(r, n)
		text, _, _ := strings.Cut(h, " ⟨cut: ")
		if !utf8.ValidString(h) || strings.Contains(h, "\n") || len(text) > n {
			t.Fatalf("ApprovalHeadline(%q, %d) = %q", r, n, h)
		}
		if !slices.ContainsFunc(strings.Split(r, "\n"), func(line string) bool { return strings.HasPrefix(line, text) }) {
			t.Fatalf("ApprovalHeadline(%q, %d) = %q: not a prefix of a line", r, n, h)
		}
		if strings.Count(text, "⟨") != strings.Count(text, "⟩") {
			t.Fatalf("ApprovalHeadline(%q, %d) = %q: a mark cut", r, n, h)
		}
	})
}
