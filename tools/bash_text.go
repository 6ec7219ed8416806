package tools

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// neutralizeControls makes command output safe to show to a model or a
// terminal: escape sequences (CSI, OSC, DCS/SOS/PM/APC strings and
// two-byte ESC sequences) are removed, CR LF becomes LF and a lone CR a
// LF, other C0 controls and DEL become caret notation (^G), C1 controls
// and invalid UTF-8 become U+FFFD. Unicode bidirectional controls (which
// reorder what an editor displays, "Trojan Source") and tag characters
// (invisible text a model still reads) become a visible ⟨U+XXXX⟩.
// Newlines and tabs are kept.
func neutralizeControls(b []byte) string {
	var out strings.Builder
	out.Grow(len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == 0x1b:
			i = skipEscape(b, i)
			continue
		case c == '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				i++
				continue
			}
			out.WriteByte('\n')
		case c == '\n' || c == '\t':
			out.WriteByte(c)
		case c < 0x20:
			out.WriteByte('^')
			out.WriteByte(c + '@')
		case c == 0x7f:
			out.WriteString("^?")
		case c < utf8.RuneSelf:
			out.WriteByte(c)
		default:
			r, size := utf8.DecodeRune(b[i:])
			switch {
			case r == utf8.RuneError || (r >= 0x80 && r <= 0x9f):
				out.WriteRune(utf8.RuneError)
			case isBidiControl(r) || isTagChar(r):
				fmt.Fprintf(&out, "⟨U+%04X⟩", r)
			default:
				out.Write(b[i : i+size])
			}
			i += size
			continue
		}
		i++
	}
	return out.String()
}

// skipEscape returns the index just past the escape sequence starting at
// b[i] == ESC (or len(b) when it is unterminated).
func skipEscape(b []byte, i int) int {
	if i+1 >= len(b) {
		return len(b)
	}
	switch b[i+1] {
	case '[': // CSI: parameters and intermediates, then a final byte
		for j := i + 2; j < len(b); j++ {
			if b[j] >= 0x40 && b[j] <= 0x7e {
				return j + 1
			}
		}
		return len(b)
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: until BEL or ST
		for j := i + 2; j < len(b); j++ {
			if b[j] == 0x07 {
				return j + 1
			}
			if b[j] == 0x1b && j+1 < len(b) && b[j+1] == '\\' {
				return j + 2
			}
		}
		return len(b)
	}
	// Two-byte sequence (ESC c, ESC 7, charset selection ESC ( B ...).
	if b[i+1] >= 0x20 && b[i+1] <= 0x2f && i+2 < len(b) {
		return i + 3
	}
	return i + 2
}

// isTagChar reports whether r is a Unicode tag character (U+E0000 to
// U+E007F): invisible in every display, yet read by a model as text.
func isTagChar(r rune) bool { return r >= 0xe0000 && r <= 0xe007f }

// NeutralizeText is the neutralization every command's output gets
// (escape sequences removed, controls in caret notation, invalid UTF-8,
// bidirectional controls and tag characters made visible), for tools
// outside this package whose output is foreign text: an MCP server's
// results and descriptions.
func NeutralizeText(s string) string { return neutralizeControls([]byte(s)) }
