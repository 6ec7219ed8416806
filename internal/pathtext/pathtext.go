// Package pathtext names a file path in text a person reads (an approval
// prompt, a diff header, a change list) so that the name cannot end a
// line, fake another one or hide part of itself.
package pathtext

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Quote returns p as it is when every character of it prints as itself,
// and otherwise p quoted with Go's escapes, as git quotes such paths in
// diff headers: a control (a newline, an escape), a character that does
// not print (a format or bidirectional control, a zero-width or
// non-ASCII space), invalid UTF-8, a quote or a backslash make it
// "odd\n+fake".
func Quote(p string) string {
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		if r == '"' || r == '\\' || (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) {
			return strconv.Quote(p)
		}
		i += size
	}
	return p
}

// Label is a diff header's label for p under prefix ("a/", "b/"): the
// prefix joined to p, the whole quoted when p needs it ("b/odd\n+fake"
// quoted, so no header spans lines).
func Label(prefix, p string) string {
	if q := Quote(p); q != p {
		return `"` + prefix + q[1:]
	}
	return prefix + p
}
