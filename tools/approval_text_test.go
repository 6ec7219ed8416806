package tools

import (
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
