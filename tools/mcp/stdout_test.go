package mcp

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestStdoutCheck: only a line whose first non-blank byte cannot start
// a JSON-RPC message is quoted, the first one, bounded, whatever the
// read sizes.
func TestStdoutCheck(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{\"a\":1}\n  [1]\n\n", ""},
		{"{\"a\":\"x\nnot\"}\n", `"not\"}"`},
		{"{}\nStarting v1\n{}\nother\n", `"Starting v1"`},
		{"  \t\x1b[31mred\n", `"red"`},
		{strings.Repeat("z", 200) + "\n", `"` + strings.Repeat("z", maxStrayLine) + `"`},
	} {
		c := newStdoutCheck(io.NopCloser(iotest.OneByteReader(strings.NewReader(tc.in))))
		io.Copy(io.Discard, c)
		h := c.hint()
		if tc.want == "" && h != "" || tc.want != "" && !strings.Contains(h, "("+tc.want+")") {
			t.Errorf("%q: hint %q, want it to quote %s", tc.in, h, tc.want)
		}
	}
}
