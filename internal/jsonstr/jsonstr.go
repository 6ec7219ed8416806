// Package jsonstr appends JSON string literals without allocating: as
// encoding/json encodes a Go string (HTML-safe escaping, invalid UTF-8
// as U+FFFD, U+2028 and U+2029 escaped), or in the stable form the
// session ledger writes. Hot paths that build JSON by hand use it.
package jsonstr

import "unicode/utf8"

const hex = "0123456789abcdef"

// plainSafe are the ASCII bytes encoding/json writes as they are without
// HTML escaping: printable, except '"' and '\\'; htmlSafe are those with
// it, also without '<', '>' and '&'.
var plainSafe, htmlSafe = safeSet(`"\`), safeSet(`"\<>&`)

func safeSet(escaped string) (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	for _, b := range escaped {
		t[b] = false
	}
	return t
}

// Append appends s as a JSON string literal, byte for byte what
// json.Marshal(s) returns.
func Append(dst []byte, s string) []byte { return appendString(dst, s, &htmlSafe, `\ufffd`) }

// AppendStable appends s as a JSON string literal that encodes again to
// the same bytes once decoded: what a json.Encoder with
// SetEscapeHTML(false) writes ('<', '>' and '&' as they are), except
// that invalid UTF-8 becomes the replacement character itself, not its
// \ufffd escape. It is for JSON no HTML page embeds (the session
// ledger).
func AppendStable(dst []byte, s string) []byte { return appendString(dst, s, &plainSafe, "\uFFFD") }

// appendString appends s as a JSON string literal: the ASCII bytes safe
// as they are, the others escaped, and invalid UTF-8 as replacement.
func appendString(dst []byte, s string, safe *[utf8.RuneSelf]bool, replacement string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if safe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, replacement...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
