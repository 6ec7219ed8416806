package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func baseIntent() EffectIntent {
	return EffectIntent{
		Principal: "user", RunID: "run-1", CatalogGeneration: 7, CallID: "call-1",
		Tool: "edit", Effect: WorkspaceMutation,
		Arguments:     json.RawMessage(`{"path":"a.go","old_text":"x","new_text":"y"}`),
		PolicyVersion: "controlled/abc",
	}
}

func mustIntent(t *testing.T, in EffectIntent) EffectIntent {
	t.Helper()
	out, err := NewIntent(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDigestStableUnderKeyOrderAndWhitespace(t *testing.T) {
	a := mustIntent(t, baseIntent())
	variants := []string{
		`{"new_text":"y","old_text":"x","path":"a.go"}`,
		" {\n\t\"old_text\" : \"x\",\r\n \"path\":\"a.go\" , \"new_text\":\"y\"}\n",
		`{"path":"a\u002ego","old_text":"x","new_text":"y"}`,
	}
	for _, v := range variants {
		in := baseIntent()
		in.Arguments = json.RawMessage(v)
		b := mustIntent(t, in)
		if a.Digest() != b.Digest() || string(a.Arguments) != string(b.Arguments) {
			t.Errorf("digest differs for %q: %s vs %s", v, a.Arguments, b.Arguments)
		}
	}
	if got, want := string(a.Arguments), `{"new_text":"y","old_text":"x","path":"a.go"}`; got != want {
		t.Fatalf("canonical = %s, want %s", got, want)
	}
	if len(a.Digest()) != 64 {
		t.Fatalf("digest %q is not hex SHA-256", a.Digest())
	}
}

func TestDigestDiffersForEveryField(t *testing.T) {
	base := mustIntent(t, baseIntent()).Digest()
	mutations := map[string]func(*EffectIntent){
		"arguments": func(i *EffectIntent) { i.Arguments = json.RawMessage(`{"path":"a.go","old_text":"x","new_text":"z"}`) },
		"nested": func(i *EffectIntent) {
			i.Arguments = json.RawMessage(`{"path":"a.go","old_text":"x","new_text":"y","o":{}}`)
		},
		"number": func(i *EffectIntent) {
			i.Arguments = json.RawMessage(`{"path":"a.go","old_text":"x","new_text":"y","n":1}`)
		},
		"call id":    func(i *EffectIntent) { i.CallID = "call-2" },
		"generation": func(i *EffectIntent) { i.CatalogGeneration = 8 },
		"principal":  func(i *EffectIntent) { i.Principal = "other" },
		"run":        func(i *EffectIntent) { i.RunID = "run-2" },
		"tool":       func(i *EffectIntent) { i.Tool = "write" },
		"effect":     func(i *EffectIntent) { i.Effect = HostMutation },
		"policy":     func(i *EffectIntent) { i.PolicyVersion = "unsafe_host/abc" },
		// Field boundaries cannot be shifted: "run" + "-1x" vs "run-1" + "x".
		"boundary": func(i *EffectIntent) { i.Principal = "user\",\"run_id\":\"run-1"; i.RunID = "" },
	}
	seen := map[string]string{base: "base"}
	for name, m := range mutations {
		in := baseIntent()
		m(&in)
		d := mustIntent(t, in).Digest()
		if prev, dup := seen[d]; dup {
			t.Errorf("%s has the same digest as %s", name, prev)
		}
		seen[d] = name
	}
}

func TestCanonicalArgumentsRejects(t *testing.T) {
	bad := map[string]string{
		"array":      `[]`,
		"string":     `"x"`,
		"null":       `null`,
		"dup":        `{"a":1,"a":1}`,
		"nested dup": `{"a":{"b":1,"b":2}}`,
		"trailing":   `{} x`,
		"two":        `{}{}`,
		"utf8":       "{\"a\":\"\xc3\x28\"}",
		"deep":       strings.Repeat("[", 100) + strings.Repeat("]", 100),
		"bad":        `{"a":}`,
		"huge":       `{"a":"` + strings.Repeat("x", MaxIntentArgumentBytes) + `"}`,
	}
	for name, raw := range bad {
		if _, err := CanonicalArguments(json.RawMessage(raw)); !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("%s: err = %v, want ErrInvalidArguments", name, err)
		}
	}
	for raw, want := range map[string]string{
		``:   `{}`,
		`  `: `{}`,
		`{"b":[1, 2.50, -3e2, true, null], "a":"\u003c/x\u003e\n"}`: `{"a":"</x>\n","b":[1,2.50,-3e2,true,null]}`,
		`{"é":1,"e":2,"z":{"y":[],"x":{}}}`:                         `{"e":2,"z":{"x":{},"y":[]},"é":1}`,
	} {
		got, err := CanonicalArguments(json.RawMessage(raw))
		if err != nil || string(got) != want {
			t.Errorf("%q: got %s, %v; want %s", raw, got, err, want)
		}
	}
}

func TestNewIntentBounds(t *testing.T) {
	in := baseIntent()
	in.Principal = strings.Repeat("p", MaxIntentFieldBytes+1)
	if _, err := NewIntent(in); err == nil {
		t.Error("oversized principal accepted")
	}
	in = baseIntent()
	in.CallID = ""
	if _, err := NewIntent(in); err == nil {
		t.Error("empty call id accepted")
	}
	in = baseIntent()
	in.Tool = "\xff"
	if _, err := NewIntent(in); err == nil {
		t.Error("invalid UTF-8 tool accepted")
	}
}

// FuzzCanonicalArguments checks that canonicalization never panics, is
// idempotent, yields valid JSON, and preserves the decoded value.
func FuzzCanonicalArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":1,"a":[true,null,"x"]}`, `{"a":{"b":{"c":"\u003c"}}}`, `{"a":1,"a":2}`, `[1]`, `{"é":"\ud83d\ude00"}`, `{"n":-1.5e10}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := CanonicalArguments(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("error does not wrap ErrInvalidArguments: %v", err)
			}
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form of %q is not JSON: %q", raw, c)
		}
		again, err := CanonicalArguments(c)
		if err != nil || string(again) != string(c) {
			t.Fatalf("not idempotent: %q -> %q (%v)", c, again, err)
		}
		var a, b any
		if json.Unmarshal(raw, &a) == nil {
			if err := json.Unmarshal(c, &b); err != nil {
				t.Fatal(err)
			}
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if string(ja) != string(jb) {
				t.Fatalf("value changed: %s vs %s", ja, jb)
			}
		}
	})
}

func TestWriteJSONStringMatchesEncoder(t *testing.T) {
	for _, s := range []string{"", "plain ascii", "<a&b>", "quote\"", "back\\slash", "tab\t", "nl\n", "\x7f", "é", "\u2028", "\x00", "ctrl\x1b[0m"} {
		var fast bytes.Buffer
		writeJSONString(&fast, s)
		var enc bytes.Buffer
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		_ = e.Encode(s)
		if fast.String()+"\n" != enc.String() {
			t.Errorf("%q: %s vs %s", s, fast.String(), enc.String())
		}
	}
}
