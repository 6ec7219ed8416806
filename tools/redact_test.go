//go:build unix

package tools

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

const testSecret = "sk-proj-TESTKEY-0123456789abcdef"

func TestRedactorString(t *testing.T) {
	r := NewRedactor(testSecret, "short", "")
	if got := r.String("key=" + testSecret + "\nagain " + testSecret); got != "key=[REDACTED]\nagain [REDACTED]" {
		t.Errorf("got %q", got)
	}
	if got := r.String("short values are never secrets"); got != "short values are never secrets" {
		t.Errorf("got %q", got)
	}
	if NewRedactor("", "tiny") != nil {
		t.Error("a redactor of nothing should be nil")
	}
	var none *Redactor
	if none.String(testSecret) != testSecret {
		t.Error("nil redactor changed text")
	}
}

func TestRedactorResultDetails(t *testing.T) {
	r := NewRedactor(testSecret)
	res := r.Result(Result{
		Text: "env: OPENAI_API_KEY=" + testSecret,
		Details: map[string]any{
			"path":   "x/" + testSecret,
			"nested": map[string]any{"list": []any{testSecret, 3}},
			"n":      7,
		},
	})
	all := res.Text + " " + strings.Join([]string{res.Details["path"].(string),
		res.Details["nested"].(map[string]any)["list"].([]any)[0].(string)}, " ")
	if strings.Contains(all, testSecret) || strings.Count(all, RedactedSecret) != 3 {
		t.Errorf("not redacted: %q", all)
	}
	if res.Details["n"] != 7 {
		t.Errorf("non-string detail changed: %v", res.Details["n"])
	}
}

// TestRedactStreamSplits writes a stream holding secrets in every possible
// split of the input, and in random pieces: the output never holds the
// secret, and is exactly the redacted input.
func TestRedactStreamSplits(t *testing.T) {
	r := NewRedactor(testSecret, "another-secret-value")
	in := "a" + testSecret + "b" + testSecret + testSecret + "sk-proj-TEST" + " another-secret-value!" + "sk-proj-"
	want := r.String(in)
	for cut := 0; cut <= len(in); cut++ {
		var out bytes.Buffer
		s := r.Stream(func(b []byte) { out.Write(b) })
		s.Write([]byte(in[:cut]))
		s.Write([]byte(in[cut:]))
		s.Flush()
		if out.String() != want {
			t.Fatalf("cut %d: got %q, want %q", cut, out.String(), want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var out bytes.Buffer
		s := r.Stream(func(b []byte) { out.Write(b) })
		for rest := in; rest != ""; {
			n := min(len(rest), 1+rng.IntN(7))
			s.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		s.Flush()
		if out.String() != want {
			t.Fatalf("random pieces: got %q, want %q", out.String(), want)
		}
	}
}

// TestRedactStreamHoldsOnlyPrefixes: text that cannot start a secret is
// emitted at once, so progress is not delayed by the hold-back.
func TestRedactStreamHoldsOnlyPrefixes(t *testing.T) {
	r := NewRedactor(testSecret)
	var out bytes.Buffer
	s := r.Stream(func(b []byte) { out.Write(b) })
	s.Write([]byte("hello world\n"))
	if out.String() != "hello world\n" {
		t.Errorf("emitted %q before flush", out.String())
	}
	s.Write([]byte("tail sk-pr"))
	if out.String() != "hello world\ntail " {
		t.Errorf("emitted %q; the possible secret start should be held", out.String())
	}
	s.Flush()
	if out.String() != "hello world\ntail sk-pr" {
		t.Errorf("after flush %q", out.String())
	}
}

// TestBrokerRedactsResultsAndProgress: a real bash command that prints the
// host's secret (as `tr '\0' '\n' < /proc/$PPID/environ` would) reaches
// neither the result, its details nor the progress stream.
func TestBrokerRedactsResultsAndProgress(t *testing.T) {
	ws := t.TempDir()
	writeTestFile(t, ws+"/creds.txt", "OPENAI_API_KEY="+testSecret+"\n")
	b := newBash(t, Config{Root: ws})
	br := NewBroker(BrokerConfig{Policy: UnsafeHost, Redactor: NewRedactor(testSecret)})
	var progress strings.Builder
	res, d := br.Dispatch(t.Context(), mustHost(t, b), DispatchRequest{CallID: "c", Tool: "bash",
		Arguments: argsJSON(t, map[string]any{"command": "cat creds.txt; sleep 0.3; cat creds.txt >&2"})},
		DispatchObserver{OnProgress: func(s string) { progress.WriteString(s) }})
	if d.Decision != DecisionAllowed {
		t.Fatalf("decision %+v", d)
	}
	for name, text := range map[string]string{"text": res.Text, "progress": progress.String()} {
		if strings.Contains(text, testSecret) || !strings.Contains(text, "OPENAI_API_KEY="+RedactedSecret) {
			t.Errorf("%s not redacted: %q", name, text)
		}
	}
}

// TestBoundResultNeverExceedsCap: the truncation marker is inside the cap,
// for every limit and text length around it.
func TestBoundResultNeverExceedsCap(t *testing.T) {
	for _, limit := range []int{1, 10, 40, 41, 100, 1000, 50 << 10} {
		for _, n := range []int{limit - 1, limit, limit + 1, limit + 9, 2 * limit, 10*limit + 12345} {
			if n < 0 {
				continue
			}
			text := strings.Repeat("é", n/2) + strings.Repeat("x", n%2)
			r := boundResult(Result{Text: text}, limit)
			if len(r.Text) > limit {
				t.Fatalf("limit %d, text %d: bounded to %d bytes", limit, len(text), len(r.Text))
			}
			if len(text) > limit && limit >= 100 && (!strings.Contains(r.Text, "bytes omitted]") || r.Details["result_truncated"] != true) {
				t.Fatalf("limit %d: marker missing in %q", limit, r.Text[max(0, len(r.Text)-60):])
			}
		}
	}
}
