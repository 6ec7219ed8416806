package tools

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/octet-agent/octet/internal/pathtext"
)

// Rendering text for a person who must approve it. The rule is that an
// approval never shows less than what will run, so approvalText removes
// nothing: it rewrites every character that a display would hide, move or
// reinterpret into a visible notation, and the broker refuses a call whose
// rendering does not fit its prompt whole (preview_too_large).
//
// Notation (everything octet adds is inside ⟨ ⟩, and a literal ⟨ in the
// text is itself escaped, so the reader can tell octet's marks from the
// text's own):
//
//   - C0 controls but newline and tab, CR included: caret notation (^[, ^M);
//     DEL: ^?; invalid UTF-8: \xNN.
//   - C1 controls, Unicode format characters (bidirectional controls,
//     zero-width spaces and joiners, the byte-order mark, tag characters),
//     separators other than the ASCII space (no-break and other-width
//     spaces, line and paragraph separators), variation selectors and
//     other invisible fillers: ⟨U+XXXX⟩.
//   - Four or more of the same escaped character in a row: ⟨N × U+XXXX⟩.
//   - A run of spaces and tabs at least 32 columns wide (a tab counts 8):
//     ⟨N spaces⟩, ⟨N tabs⟩ or ⟨N spaces and tabs⟩, so nothing can be
//     pushed out of sight to the right.
//   - Three or more newlines in a row (two or more blank lines):
//     ⟨N blank lines⟩ on a line of its own, so nothing can be pushed out of
//     sight below.
const (
	wideBlankColumns = 32
	minEscapedRun    = 4
	minBlankLines    = 2
)

// ApprovalText renders s as octet renders the text of an approval prompt
// (see above), for another surface that shows a person what a call does.
func ApprovalText(s string) string { return approvalText(s) }

// ApprovalHeadline returns the first line of r, a rendering by
// ApprovalText, that is not blank (see blankLine), in at most n bytes (never cutting a
// character or one of octet's ⟨…⟩ marks), followed by a mark saying what
// was left out when anything but blank lines was: " ⟨cut: 1 more line⟩",
// " ⟨cut: 12 more bytes⟩" or " ⟨cut: 12 more bytes and 3 more lines⟩".
// It is for a title whose whole text is shown elsewhere.
func ApprovalHeadline(r string, n int) string {
	var first string
	found, more := false, 0
	for line := range strings.SplitSeq(r, "\n") {
		switch {
		case blankLine(line):
		case !found:
			first, found = line, true
		default:
			more++
		}
	}
	var cut []string
	if len(first) > n {
		i := max(n, 0)
		for i > 0 && !utf8.RuneStart(first[i]) {
			i--
		}
		if open := strings.LastIndex(first[:i], "⟨"); open > strings.LastIndex(first[:i], "⟩") {
			i = open // inside one of octet's marks: cut before it
		}
		cut = append(cut, plural(len(first)-i, "more byte"))
		first = first[:i]
	}
	if more > 0 {
		cut = append(cut, plural(more, "more line"))
	}
	if len(cut) == 0 {
		return first
	}
	return first + " ⟨cut: " + strings.Join(cut, " and ") + "⟩"
}

// blankLine reports whether a line of a rendering by ApprovalText shows
// only blanks: spaces and tabs, or one of octet's marks for them.
func blankLine(line string) bool {
	t := strings.TrimSpace(line)
	if t == "" {
		return true
	}
	mark, ok := strings.CutPrefix(t, "⟨")
	if mark, ok = strings.CutSuffix(mark, "⟩"); !ok {
		return false
	}
	count, what, _ := strings.Cut(mark, " ")
	switch what {
	case "blank lines", "spaces", "tabs", "spaces and tabs":
		return count != "" && strings.Trim(count, "0123456789") == ""
	}
	return false
}

// plural is "n noun", with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// approvalText renders s for an approval prompt (see above).
func approvalText(s string) string { return renderText(s, modePrompt) }

// approvalLine renders s for a one-line field of an approval prompt (its
// title): as approvalText, and newlines and tabs are caret notation too
// (^J, ^I), so the field cannot seem to end, or another begin, inside it.
func approvalLine(s string) string { return renderText(s, modeLine) }

// ShownPath is shownPath for the dialects: a path named in an approval
// surface they write themselves.
func ShownPath(p string) string { return shownPath(p) }

// shownPath is a path as an approval prompt names it: as it is, or
// quoted when a display would not show it as itself on one line
// (pathtext.Quote: "odd\n+fake").
func shownPath(p string) string { return pathtext.Quote(p) }

// VisibleText renders s for a terminal, in the notation above, so that
// it can neither drive the terminal nor reorder what it shows: C0
// controls but newline and tab (ESC and CR included) and DEL in caret
// notation, invalid UTF-8 as \xNN, and C1 controls, bidirectional
// controls, tag characters and line and paragraph separators as
// ⟨U+XXXX⟩. Nothing is removed. Unlike a prompt it keeps blank runs and
// the characters that only shape text (zero-width joiners, variation
// selectors, other spaces: emoji and scripts need them) as they are,
// and leaves ⟨ alone (nothing is approved from it), so a prompt's
// rendering passes through unchanged. It is for text a model or a
// repository controls that the CLI prints: titles, tool names and
// arguments, answers and output.
func VisibleText(s string) string { return renderText(s, modeTerminal) }

// textMode is what renderText renders for.
type textMode int

const (
	modePrompt   textMode = iota // approvalText
	modeLine                     // approvalLine
	modeTerminal                 // VisibleText
)

func renderText(s string, mode textMode) string {
	var out strings.Builder
	out.Grow(len(s) + len(s)/8)
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case mode == modePrompt && (c == ' ' || c == '\t'), mode == modeLine && c == ' ':
			i = writeBlankRun(&out, s, i)
			continue
		case mode == modePrompt && c == '\n':
			i = writeNewlineRun(&out, s, i)
			continue
		case mode == modeTerminal && (c == '\n' || c == '\t'):
			out.WriteByte(c)
		case c < 0x20:
			out.WriteByte('^')
			out.WriteByte(c + '@')
		case c == 0x7f:
			out.WriteString("^?")
		case c < utf8.RuneSelf:
			out.WriteByte(c)
		case mode != modeTerminal:
			i = writeRune(&out, s, i, hiddenRune)
			continue
		default:
			i = writeRune(&out, s, i, terminalRune)
			continue
		}
		i++
	}
	return out.String()
}

// writeBlankRun writes the run of spaces and tabs starting at s[i] and
// returns the index after it.
func writeBlankRun(out *strings.Builder, s string, i int) int {
	j, spaces, tabs := i, 0, 0
	for ; j < len(s) && (s[j] == ' ' || s[j] == '\t'); j++ {
		if s[j] == ' ' {
			spaces++
		} else {
			tabs++
		}
	}
	if spaces+8*tabs < wideBlankColumns {
		out.WriteString(s[i:j])
		return j
	}
	switch {
	case tabs == 0:
		fmt.Fprintf(out, "⟨%d spaces⟩", spaces)
	case spaces == 0:
		fmt.Fprintf(out, "⟨%d tabs⟩", tabs)
	default:
		fmt.Fprintf(out, "⟨%d spaces and tabs⟩", spaces+tabs)
	}
	return j
}

// writeNewlineRun writes the run of newlines starting at s[i] and returns
// the index after it.
func writeNewlineRun(out *strings.Builder, s string, i int) int {
	j := i
	for j < len(s) && s[j] == '\n' {
		j++
	}
	if blank := j - i - 1; blank >= minBlankLines {
		fmt.Fprintf(out, "\n⟨%d blank lines⟩\n", blank)
	} else {
		out.WriteString(s[i:j])
	}
	return j
}

// writeRune writes the non-ASCII character at s[i], escaped when escape
// says so, collapsing a run of the same escaped character; it returns the
// index after what it wrote.
func writeRune(out *strings.Builder, s string, i int, escape func(rune) bool) int {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size == 1 {
		fmt.Fprintf(out, `\x%02X`, s[i])
		return i + 1
	}
	if !escape(r) {
		out.WriteString(s[i : i+size])
		return i + size
	}
	j, n := i+size, 1
	for j < len(s) {
		r2, size2 := utf8.DecodeRuneInString(s[j:])
		if r2 != r || size2 != size {
			break
		}
		j += size2
		n++
	}
	if n >= minEscapedRun {
		fmt.Fprintf(out, "⟨%d × U+%04X⟩", n, r)
		return j
	}
	fmt.Fprintf(out, "⟨U+%04X⟩", r)
	return i + size
}

// hiddenRune reports whether a display could hide r, show it as something
// else, or let it reorder or re-space the text around it.
func hiddenRune(r rune) bool {
	switch {
	case r == '⟨': // octet's own notation starts with it
		return true
	case r >= 0x80 && r <= 0x9f: // C1 controls
		return true
	case r == ' ':
		return false
	case unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Zs): // format characters, separators, other spaces
		return true
	case unicode.Is(unicode.Variation_Selector, r):
		return true
	}
	switch r {
	case 0x034f, // combining grapheme joiner
		0x115f, 0x1160, 0x3164, 0xffa0, // Hangul fillers
		0x2800,         // braille pattern blank
		0x17b4, 0x17b5, // Khmer inherent vowels
		0x180e: // Mongolian vowel separator
		return true
	}
	return false
}

// terminalRune reports whether a terminal would act on r rather than
// show it, show nothing, or reorder the text around it.
func terminalRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || isBidiControl(r) || isTagChar(r) || r == 0x2028 || r == 0x2029
}

// isBidiControl reports whether r is a Unicode bidirectional formatting
// character, which can make displayed text differ from what runs.
func isBidiControl(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
