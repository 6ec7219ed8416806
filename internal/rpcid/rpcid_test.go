package rpcid

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// scan feeds msg to a new Scanner in chunks of size n (the whole at once
// when n <= 0) and returns the id it found, canonical (canon).
func scan(msg []byte, n int) (string, bool) {
	var sc Scanner
	if n <= 0 {
		n = len(msg) + 1
	}
	for len(msg) > 0 {
		k := min(n, len(msg))
		sc.Feed(msg[:k])
		msg = msg[k:]
	}
	raw, ok := sc.ID()
	if !ok {
		return "", false
	}
	return canon(raw)
}

// canon is an id's value: "s:" and the string, or "n:" and the integer;
// false for anything else.
func canon(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return "s:" + s, true
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err == nil {
		return "n:" + strconv.FormatInt(n, 10), true
	}
	return "", false
}

// decoded is the id a JSON decoder finds in msg: the top-level "id"
// member (the last, when there are several), when it is a string or an
// integer.
func decoded(msg []byte) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return "", false
	}
	raw, ok := m["id"]
	if !ok {
		return "", false
	}
	return canon(raw)
}

func TestScanner(t *testing.T) {
	big := strings.Repeat("x", 1<<16)
	for _, tc := range []struct {
		msg, id string // id "": none
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"octet/prompt","params":{"text":"` + big + `"}}`, "n:7"},
		// Neovim's encoder orders keys as its table does: the id may
		// come after a huge params.
		{`{"params":{"text":"` + big + `","nested":[{"id":1},"}\"{"]},"method":"octet/prompt","id":"req-3","jsonrpc":"2.0"}`, "s:req-3"},
		{` {"id" : 42 , "method":"x"}`, "n:42"},
		{`{"id":-1}`, "n:-1"},
		{`{"method":"x","params":{"id":5}}`, ""},
		{`{"id":null,"method":"x"}`, ""},
		{`{"id":{"a":1},"method":"x"}`, ""},
		{`{"id":[1],"method":"x"}`, ""},
		{`{"id":1.5,"method":"x"}`, ""},
		{`{"id":"` + strings.Repeat("y", 300) + `"}`, ""}, // over maxIDBytes
		{`{"idx":1,"i":2,"method":"x"}`, ""},
		{`{"id":1,"id":2}`, "n:2"},
		{`{"id":"a\"b\\c","method":"x"}`, `s:a"b\c`},
		{`{"i\u0064":1}`, ""}, // an escaped key is not looked into
		{`[{"id":1}]`, ""},
		{`"id"`, ""},
		{``, ""},
	} {
		for _, n := range []int{0, 1, 2, 7} {
			id, ok := scan([]byte(tc.msg), n)
			if ok != (tc.id != "") || id != tc.id {
				t.Errorf("%.80q in chunks of %d: id %q %v, want %q", tc.msg, n, id, ok, tc.id)
			}
		}
	}
}

// FuzzScanner: on any input a Scanner does not panic and whatever the
// chunking gives the same answer; an id it reports in valid JSON is the
// one a JSON decoder finds; and in a message encoding/json wrote, it
// finds the id.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"params":{"a":"}"},"id":"x"}`,
		`{"id":"a\"b"}`,
		`{"id":-3,"id":"z"}`,
		`{"a":[{"b":"\\"}],"id":9}`,
		`{`,
		`{"id":1`,
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, msg []byte, chunk uint8) {
		id, ok := scan(msg, 0)
		if id2, ok2 := scan(msg, int(chunk)); id2 != id || ok2 != ok {
			t.Fatalf("chunks of %d: %q %v; whole: %q %v", chunk, id2, ok2, id, ok)
		}
		want, wantOK := decoded(msg)
		if json.Valid(msg) && ok && (!wantOK || id != want) {
			t.Fatalf("scanner found %q, a decoder %q %v in %q", id, want, wantOK, msg)
		}
		// Re-encoded by encoding/json (keys unescaped), a message with
		// a short enough id has it found.
		var m map[string]json.RawMessage
		if json.Unmarshal(msg, &m) == nil && wantOK && len(m["id"]) < maxIDBytes/6 {
			enc, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := scan(enc, int(chunk)); !ok || got != want {
				t.Fatalf("scanner found %q %v, want %q in %q", got, ok, want, enc)
			}
		}
	})
}

// BenchmarkScanner scans an 8 MiB request whose id comes after its
// params (a long text and a nested array of strings), beside json.Valid
// over the same bytes (encoding/json's own scanner, the cheapest pass a
// decoder makes):
//
//	go test ./internal/rpcid -run '^$' -bench Scanner -count 6
func BenchmarkScanner(b *testing.B) {
	var parts []string
	for range 1 << 15 {
		parts = append(parts, `"`+strings.Repeat("a", 100)+`"`)
	}
	msg := []byte(`{"params":{"text":"` + strings.Repeat("x\\n", 1<<21) + `","lines":[` + strings.Join(parts, ",") + `]},"method":"octet/prompt","id":42}`)
	b.Run("scanner", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if id, ok := scan(msg, 64<<10); !ok || id != "n:42" {
				b.Fatal(id, ok)
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if !json.Valid(msg) {
				b.Fatal("invalid")
			}
		}
	})
}
