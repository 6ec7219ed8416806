package jsonstr

import (
	"encoding/json"
	"testing"
)

var cases = []string{
	"", "plain words", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "héllo wörld ✓ 𝄞", "\u2028\u2029", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate",
	"ends in \xe2\x82", "emoji 👩‍💻 done",
}

// TestAppendMatchesMarshal checks every case byte for byte against
// encoding/json.
func TestAppendMatchesMarshal(t *testing.T) {
	for _, s := range cases {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); string(got) != string(want) {
			t.Errorf("Append(%q) = %s, json.Marshal = %s", s, got, want)
		}
	}
}

// FuzzAppend checks arbitrary strings against encoding/json.
func FuzzAppend(f *testing.F) {
	for _, s := range cases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := Append([]byte("x"), s); string(got[1:]) != string(want) {
			t.Fatalf("Append(%q) = %s, json.Marshal = %s", s, got[1:], want)
		}
	})
}

func TestAppendDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = Append(buf[:0], "some <text> with \"escapes\"\n") }); n != 0 {
		t.Errorf("Append allocates %v times", n)
	}
}
