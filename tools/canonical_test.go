package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// canonicalReference is the straightforward encoding/json token-stream
// canonicalizer that the single-pass canonicalizer must match exactly
// (FuzzCanonicalEquivalence). It is what CanonicalArguments did first.
func canonicalReference(raw []byte) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}"), nil
	}
	if len(raw) > MaxIntentArgumentBytes || !utf8.Valid(raw) {
		return nil, ErrInvalidArguments
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not an object")
	}
	var out bytes.Buffer
	if err := canonObject(dec, &out, 1); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return out.Bytes(), nil
}

// canonValue writes the canonical form of the value starting with tok.
func canonValue(dec *json.Decoder, out *bytes.Buffer, tok json.Token, depth int) error {
	switch v := tok.(type) {
	case json.Delim:
		if depth >= maxArgumentDepth {
			return fmt.Errorf("nesting deeper than %d", maxArgumentDepth)
		}
		switch v {
		case '{':
			return canonObject(dec, out, depth+1)
		case '[':
			return canonArray(dec, out, depth+1)
		}
		return fmt.Errorf("unexpected %q", v)
	case string:
		writeJSONString(out, v)
	case json.Number:
		out.WriteString(v.String())
	case bool:
		out.WriteString(strconv.FormatBool(v))
	case nil:
		out.WriteString("null")
	default:
		return fmt.Errorf("unexpected token %T", tok)
	}
	return nil
}

type canonMember struct {
	key string
	val []byte
}

// canonObject reads the members of an object whose '{' was consumed.
func canonObject(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	var members []canonMember
	seen := make(map[string]struct{})
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key is %T", tok)
		}
		if _, dup := seen[key]; dup {
			return fmt.Errorf("duplicate key %q", truncateForError(key))
		}
		seen[key] = struct{}{}
		vt, err := dec.Token()
		if err != nil {
			return err
		}
		var val bytes.Buffer
		if err := canonValue(dec, &val, vt, depth); err != nil {
			return err
		}
		members = append(members, canonMember{key, val.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return err
	}
	slices.SortFunc(members, func(a, b canonMember) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			out.WriteByte(',')
		}
		writeJSONString(out, m.key)
		out.WriteByte(':')
		out.Write(m.val)
	}
	out.WriteByte('}')
	return nil
}

// canonArray reads the elements of an array whose '[' was consumed.
func canonArray(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	out.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			out.WriteByte(',')
		}
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if err := canonValue(dec, out, tok, depth); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return err
	}
	out.WriteByte(']')
	return nil
}

// FuzzCanonicalEquivalence checks that CanonicalArguments accepts exactly
// what the reference accepts and produces the same bytes.
func FuzzCanonicalEquivalence(f *testing.F) {
	for _, s := range []string{`{}`, ` {"b":1,"a":[true,null,"x"]} `, `{"a":1,"a":2}`, `{"x":"\u003c/x\u003e\u2028"}`, "{\"x\":\"\u2029\"}",
		`{"n":-0.5e+10,"m":0,"k":1E5}`, `{"s":"\"\\\/\b\f\n\r\t\u00e9\ud800"}`, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":tru}`, `{"a" 1}`, `{"a":1,}`, `[]`, `{}x`, `{"\u0061":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := CanonicalArguments(raw)
		want, rerr := canonicalReference(raw)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("%q: accepted differently: fast err %v, reference err %v", raw, err, rerr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("%q: fast %q, reference %q", raw, got, want)
		}
	})
}

func TestCanonicalEquivalenceTable(t *testing.T) {
	cases := []string{`{"a":"x\u2028y"}`, `{"é":1,"e":2}`, `{"a":{"b":[1,{"d":null,"c":"\u0000"}]}}`, `{"a":"\ud83d\ude00"}`, `{"a":1e400}`, `{"a":"` + strings.Repeat("z", 1000) + `"}`}
	for i := 0; i < 70; i++ {
		cases = append(cases, strings.Repeat(`{"a":`, i)+"1"+strings.Repeat("}", i))
	}
	for _, c := range cases {
		got, err := CanonicalArguments([]byte(c))
		want, rerr := canonicalReference([]byte(c))
		if (err == nil) != (rerr == nil) || !bytes.Equal(got, want) {
			t.Errorf("%.60q: fast %q %v, reference %q %v", c, got, err, want, rerr)
		}
	}
}
