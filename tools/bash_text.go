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
// and invalid UTF-8 become U+FFFD. Newlines and tabs are kept.
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
			if r == utf8.RuneError || (r >= 0x80 && r <= 0x9f) {
				out.WriteRune(utf8.RuneError)
			} else {
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

// visibleControls renders text for a person who must approve it: nothing
// is removed, so no part of a command can be hidden from the prompt, and
// nothing can drive a terminal or reorder the display. ESC and the other
// C0 controls but newline and tab (CR included) become caret notation
// (^[, ^M), DEL ^?, C1 controls and the Unicode bidirectional controls
// (Trojan Source) <U+XXXX>, invalid UTF-8 bytes \xNN.
func visibleControls(s string) string {
	var out strings.Builder
	out.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
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
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				fmt.Fprintf(&out, `\x%02X`, c)
			case (r >= 0x80 && r <= 0x9f) || isBidiControl(r):
				fmt.Fprintf(&out, "<U+%04X>", r)
			default:
				out.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		i++
	}
	return out.String()
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
