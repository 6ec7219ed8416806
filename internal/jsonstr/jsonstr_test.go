package jsonstr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var cases = []string{
	"", "plain words", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "héllo wörld ✓ 𝄞", "\u2028\u2029", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate",
	"ends in \xe2\x82", "emoji 👩‍💻 done",
}

// marshal is encoding/json's encoding of s, HTML-escaped or not.
func marshal(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(s)
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// check compares Append with encoding/json for s, and AppendStable with
// encoding/json without HTML escaping (an invalid byte's \ufffd written
// as the character) and with itself after a decode.
func check(t *testing.T, s string) {
	t.Helper()
	if got, want := string(Append([]byte("x"), s)[1:]), marshal(s, true); got != want {
		t.Errorf("Append(%q) = %s, json.Marshal = %s", s, got, want)
	}
	got := AppendStable([]byte("x"), s)[1:]
	if want := strings.ReplaceAll(marshal(s, false), `\ufffd`, "\uFFFD"); string(got) != want {
		t.Errorf("AppendStable(%q) = %s, json.Encoder without HTML escaping = %s", s, got, want)
	}
	var back string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("AppendStable(%q) = %s: %v", s, got, err)
	}
	if again := AppendStable(nil, back); string(again) != string(got) {
		t.Errorf("AppendStable is not stable: %q encodes to %s, decoded and encoded again to %s", s, got, again)
	}
}

// TestAppendMatchesMarshal checks every case byte for byte against
// encoding/json, with and without HTML escaping.
func TestAppendMatchesMarshal(t *testing.T) {
	for _, s := range cases {
		check(t, s)
	}
}

// FuzzAppend checks arbitrary strings against encoding/json (corpus in
// testdata/fuzz/FuzzAppend).
func FuzzAppend(f *testing.F) {
	for _, s := range cases {
		f.Add(s)
	}
	f.Fuzz(check)
}

func TestAppendDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 256)
	for name, append := range map[string]func([]byte, string) []byte{"Append": Append, "AppendStable": AppendStable} {
		if n := testing.AllocsPerRun(100, func() { buf = append(buf[:0], "some <text> with \"escapes\"\n") }); n != 0 {
			t.Errorf("%s allocates %v times", name, n)
		}
	}
}
