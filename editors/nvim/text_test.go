package nvim

import (
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"unicode"
)

// hiddenByGo is whether Go's Unicode tables put r among the characters
// octet's approval previews escape (tools/approval_text.go): C1 controls,
// format characters, separators other than the ASCII space, variation
// selectors and the invisible fillers.
func hiddenByGo(r rune) bool {
	switch {
	case r == '⟨', r >= 0x80 && r <= 0x9f:
		return true
	case unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Zs), unicode.Is(unicode.Variation_Selector, r):
		return true
	}
	return slices.Contains([]rune{0x034f, 0x115f, 0x1160, 0x3164, 0xffa0, 0x2800, 0x17b4, 0x17b5, 0x180e}, r)
}

// TestTextShowsWhatADisplayHides: octet.text (lua/octet/text.lua), the
// one helper every string from the model, the server or the repository
// goes through before a statusline, a buffer line, a picker or a message.
// Controls become caret notation (a newline too: one line stays one
// line), invalid UTF-8 \xNN, a statusline format doubles "%"; and every
// code point Go's Unicode tables class as hidden (format, separator,
// variation selector, C1, fillers) is shown as ⟨U+XXXX⟩, while the
// others it escapes are ones no display draws (unassigned).
func TestTextShowsWhatADisplayHides(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		cases := []struct {
			fn, in string
			max    int
			want   string
		}{
			{"line", "plain text", 0, "plain text"},
			{"line", "a\nb\r\x1b[1m\x7fc\td\x00", 0, "a^Jb^M^[[1m^?c d^@"},
			{"line", "\xff\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80x", 0, `\xFF\xC0\xAF\xED\xA0\x80\xF4\x90\x80\x80x`},
			{"line", "e\u0301 日本語 😀", 0, "e\u0301 日本語 😀"},
			{"line", "\u202eevil\u2066 ⟨U+202E⟩", 0, "⟨U+202E⟩evil⟨U+2066⟩ ⟨U+27E8⟩U+202E⟩"},
			{"line", "日本語", 2, "日…"},
			{"line", "日本", 2, "日本"},
			{"line", "abcdef", 4, "abc…"},
			{"first_line", "  one\r\ntwo\n", 0, "one …"},
			{"first_line", "only\n", 0, "only"},
			{"statusline", "100% %{system('x')}%=", 0, "100%% %%{system('x')}%%="},
			{"lines", "a\n\x1bb\u200b", 0, "a\n^[b⟨U+200B⟩"},
		}
		type input struct {
			Fn  string `json:"fn"`
			Hex string `json:"hex"`
			Max int    `json:"max"`
		}
		var in []input
		for _, c := range cases {
			in = append(in, input{c.fn, hex.EncodeToString([]byte(c.in)), c.max})
		}
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(w.tmp, "cases.json")
		writeFile(t, path, string(raw))
		r := w.run(t, "text_test.lua", "OCTET_TEST_INPUT="+path)
		out := strs(r["out"])
		for i, c := range cases {
			if i >= len(out) || out[i] != c.want {
				got := "(none)"
				if i < len(out) {
					got = out[i]
				}
				t.Errorf("text.%s(%q, %d) = %q, want %q", c.fn, c.in, c.max, got, c.want)
			}
		}
		escaped := map[rune]bool{}
		for _, v := range r["escaped"].([]any) {
			escaped[rune(v.(float64))] = true
		}
		for cp := rune(0x80); cp <= unicode.MaxRune; cp++ {
			if cp >= 0xd800 && cp <= 0xdfff {
				continue
			}
			switch {
			case hiddenByGo(cp) && !escaped[cp]:
				t.Errorf("U+%04X is hidden by a display but shown as it is", cp)
			case escaped[cp] && !hiddenByGo(cp) && unicode.IsGraphic(cp):
				t.Errorf("U+%04X (%c) is visible but shown as ⟨U+%04X⟩", cp, cp, cp)
			}
		}
	})
}
