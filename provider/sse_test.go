package provider

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

type sseOut struct {
	Event, Data, ID string
}

func readAllSSE(r io.Reader, max int) ([]sseOut, error) {
	s := NewSSEReader(r, max)
	var out []sseOut
	for {
		ev, err := s.Next()
		if err != nil {
			return out, err
		}
		out = append(out, sseOut{string(ev.Event), string(ev.Data), ev.ID})
	}
}

func TestSSEReaderWHATWG(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []sseOut
	}{
		{"LF", "event: a\ndata: 1\n\n", []sseOut{{"a", "1", ""}}},
		{"CRLF", "event: a\r\ndata: 1\r\n\r\n", []sseOut{{"a", "1", ""}}},
		{"CR", "event: a\rdata: 1\r\r", []sseOut{{"a", "1", ""}}},
		{"mixed terminators", "data: x\r\n\ndata: y\r\rdata: z\n\r\n", []sseOut{{"", "x", ""}, {"", "y", ""}, {"", "z", ""}}},
		{"BOM", "\xEF\xBB\xBFdata: bom\n\n", []sseOut{{"", "bom", ""}}},
		{"BOM only once", "\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n", []sseOut{{"", "a", ""}}},
		{"comments and keepalive", ": keepalive\n\n:\ndata: v\n: mid\n\n", []sseOut{{"", "v", ""}}},
		{"multi-line data joined with LF", "data: one\ndata: two\ndata\ndata:three\n\n", []sseOut{{"", "one\ntwo\n\nthree", ""}}},
		{"only one leading space stripped", "data:  two spaces\n\n", []sseOut{{"", " two spaces", ""}}},
		{"empty data dispatches", "data\n\n", []sseOut{{"", "", ""}}},
		{"no data no dispatch, event type reset", "event: lonely\n\ndata: x\n\n", []sseOut{{"", "x", ""}}},
		{"unknown field ignored", "foo: bar\ndata: d\nretry: abc\n\n", []sseOut{{"", "d", ""}}},
		{"id persists", "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", []sseOut{{"", "a", "7"}, {"", "b", "7"}, {"", "c", ""}}},
		{"id with NUL ignored", "id: 1\x002\ndata: a\n\n", []sseOut{{"", "a", ""}}},
		{"partial event at EOF discarded", "data: done\n\ndata: partial\n", []sseOut{{"", "done", ""}}},
		{"unterminated line at EOF discarded", "data: done\n\ndata: partial", []sseOut{{"", "done", ""}}},
		{"DONE sentinel is ordinary data", "data: {}\n\ndata: [DONE]\n\n", []sseOut{{"", "{}", ""}, {"", "[DONE]", ""}}},
		{"field without colon", "data\nevent\n\n", []sseOut{{"", "", ""}}},
		{"colon in value", "data: a: b\n\n", []sseOut{{"", "a: b", ""}}},
		{"llama.cpp error field is an error event", "data: {}\n\nerror: {\"code\":400}\n\ndata: [DONE]\n\n", []sseOut{{"", "{}", ""}, {"error", `{"code":400}`, ""}, {"", "[DONE]", ""}}},
	}
	for _, tc := range cases {
		for _, mode := range []string{"whole", "one-byte", "half"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				var r io.Reader = strings.NewReader(tc.in)
				switch mode {
				case "one-byte":
					r = iotest.OneByteReader(r)
				case "half":
					r = iotest.HalfReader(r)
				}
				got, err := readAllSSE(r, 0)
				if err != io.EOF {
					t.Fatalf("err = %v, want io.EOF", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestSSEReaderRetryAndLimits(t *testing.T) {
	s := NewSSEReader(strings.NewReader("retry: 1500\ndata: x\n\n"), 0)
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	if s.Retry() != 1500*time.Millisecond {
		t.Errorf("retry = %v", s.Retry())
	}
	if _, err := readAllSSE(strings.NewReader("data: "+strings.Repeat("x", 200)+"\n\n"), 64); !errors.Is(err, errFrameTooLarge) {
		t.Errorf("long line: %v", err)
	}
	multi := strings.Repeat("data: 0123456789\n", 20) + "\n"
	if _, err := readAllSSE(strings.NewReader(multi), 100); !errors.Is(err, errFrameTooLarge) {
		t.Errorf("long event: %v", err)
	}
	if _, err := readAllSSE(iotest.ErrReader(io.ErrUnexpectedEOF), 0); err != io.ErrUnexpectedEOF {
		t.Errorf("read error not passed through: %v", err)
	}
	// A line longer than the initial buffer but within the bound grows it.
	big := strings.Repeat("y", 100<<10)
	got, err := readAllSSE(strings.NewReader("data: "+big+"\n\n"), 0)
	if err != io.EOF || len(got) != 1 || got[0].Data != big {
		t.Errorf("big line: %d events, %v", len(got), err)
	}
}

func TestDecoderSkipsUnknownAndAuxiliaryEvents(t *testing.T) {
	var d decoder
	skipped := []string{
		`{"type":"response.in_progress","response":{"id":"r"}}`,
		`{"type":"response.queued"}`,
		`{"type":"response.content_part.added","part":{"type":"output_text"}}`,
		`{"type":"response.output_text.done","text":"x"}`,
		`{"type":"response.reasoning_summary_part.added"}`,
		`{"type":"response.function_call_arguments.done","arguments":"{}"}`,
		`{"type":"keepalive"}`,
		`{"type":"response.output_text.annotation.added","annotation":{}}`,
		`{"type":"response.web_search_call.searching"}`,
		`{"type":"some.future.event","x":[1,2,3]}`,
		`{"no_type":true}`,
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"m"}}`,
	}
	for _, s := range skipped {
		ev, st, err := d.decode([]byte(s))
		if err != nil || st.emit || ev.Type != 0 {
			t.Errorf("%s: emit=%v err=%v", s, st.emit, err)
		}
	}
	bad := map[string]Class{
		`[1,2]`:    StreamFailure,
		`{"type":`: StreamFailure,
		`{"type":"response.output_text.delta","delta":5}`:  StreamFailure,
		`{"type":"response.output_item.done"}`:             ProtocolViolation,
		`{"type":"response.output_item.done","item":null}`: ProtocolViolation,
		`{"type":"response.output_item.done","item":[1]}`:  StreamFailure,
		`{"type":"response.completed","response":null}`:    ProtocolViolation,
		`{"type":"error","code":"x","message":"m"}`:        ResponsesFailed,
	}
	for s, want := range bad {
		_, _, err := d.decode([]byte(s))
		if err == nil || err.Class != want || !err.Dispatched || err.Phase != Body {
			t.Errorf("%s: got %v, want class %v", s, err, want)
		}
	}
	if _, _, err := d.decode([]byte("{\"type\":\"x\",\"delta\":\"\xc3\x28\"}")); err == nil || err.Decode != DecodeInvalidUTF8 {
		t.Errorf("invalid utf-8: %v", err)
	}
}

func TestDecoderOutputOrder(t *testing.T) {
	var d decoder
	for _, s := range []string{
		`{"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","id":"b","call_id":"c","name":"n","arguments":"{}"}}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"type":"message","id":"a","role":"assistant","content":[{"type":"output_text","text":"x"},{"type":"refusal","refusal":"no"}]}}`,
	} {
		if _, _, err := d.decode([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	ev, st, err := d.decode([]byte(`{"type":"response.completed","response":{"id":"r","output":[],"usage":{"input_tokens":5,"input_tokens_details":null,"output_tokens":2,"output_tokens_details":{"reasoning_tokens":1}}}}`))
	if err != nil || !st.final {
		t.Fatal(err)
	}
	r := ev.Response
	if len(r.Output) != 2 || r.Output[0].ID != "a" || r.Output[1].ID != "b" || r.Output[0].Text != "x" || r.Output[0].Refusal != "no" {
		t.Errorf("output = %+v", r.Output)
	}
	if *r.Usage != (Usage{InputTokens: 5, OutputTokens: 2, ReasoningTokens: 1}) {
		t.Errorf("usage = %+v", r.Usage)
	}
	// Without any output_item.done the terminal response's output is used.
	var d2 decoder
	ev, _, _ = d2.decode([]byte(`{"type":"response.completed","response":{"id":"r","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"fallback"}]}]}}`))
	if len(ev.Response.Output) != 1 || ev.Response.Output[0].Text != "fallback" || ev.Response.Usage != nil {
		t.Errorf("fallback output = %+v", ev.Response)
	}
}

func TestParseHelpers(t *testing.T) {
	hints := map[string]time.Duration{
		"Rate limit reached. Please try again in 1.5s.":   1500 * time.Millisecond,
		"Please try again in 250ms.":                      250 * time.Millisecond,
		"try again in 3 seconds":                          3 * time.Second,
		"Try again in 20s":                                20 * time.Second,
		"please TRY AGAIN IN 1 second":                    time.Second,
		"try again in 2 minutes":                          2 * time.Minute,
		"Please try again in 12.345 milliseconds, thanks": 12345 * time.Microsecond,
		// Real OpenAI rate-limit message forms.
		"Rate limit reached for gpt-5 in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 1500. Please try again in 1.898s. Visit https://platform.openai.com/account/rate-limits to learn more.": 1898 * time.Millisecond,
		"Rate limit reached for requests. Please try again in 20ms.":                                    20 * time.Millisecond,
		"Please try again in 1m30s.":                                                                    90 * time.Second,
		"You exceeded your current limit, please try again in 6m0s. Contact us through our help center": 6 * time.Minute,
		"try again in 1.5 s":                                     1500 * time.Millisecond,
		"try again in 1.5s.Thanks":                               1500 * time.Millisecond,
		"try again in 1 hour":                                    time.Hour,
		"try again in 99999999999h":                              24 * time.Hour,
		"try again in 1" + strings.Repeat("0", 400) + " seconds": 24 * time.Hour,
	}
	for msg, want := range hints {
		if d, ok := ParseRetryHint(msg); !ok || d != want {
			t.Errorf("ParseRetryHint(%q) = %v %v, want %v", msg, d, ok, want)
		}
	}
	for _, msg := range []string{"", "try again later", "try again in a bit", "try again in 5 parsecs", "try again in -1s", "try again in NaNs", "try again in 1e3s", "try again in .5s"} {
		if d, ok := ParseRetryHint(msg); ok {
			t.Errorf("ParseRetryHint(%q) = %v, want none", msg, d)
		}
	}
	now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	ra := map[string]time.Duration{
		"5": 5 * time.Second, "0": 0, "1.5": 1500 * time.Millisecond,
		"Sun, 29 Nov 2026 20:00:30 GMT": 30 * time.Second,
		"Sun, 29 Nov 2026 19:00:00 GMT": 0,
		"99999999":                      24 * time.Hour,
		"1" + strings.Repeat("0", 400):  24 * time.Hour,
		"100000000000000000000":         24 * time.Hour, // would overflow a Duration
	}
	for v, want := range ra {
		if d, ok := ParseRetryAfter(v, now); !ok || d != want {
			t.Errorf("ParseRetryAfter(%q) = %v %v, want %v", v, d, ok, want)
		}
	}
	for _, v := range []string{"", "-3", "soon", "Sun, 99 Nov", "NaN", "Inf", "+Inf", "+5", "1e3", "0x10", "1_0", "5.", ".5"} {
		if _, ok := ParseRetryAfter(v, now); ok {
			t.Errorf("ParseRetryAfter(%q) accepted", v)
		}
	}
	for _, v := range []string{"NaN", "Inf", "-5", "1e9"} {
		if d, ok := RetryAfterFromHeader(http.Header{"Retry-After-Ms": {v}}, now); ok {
			t.Errorf("retry-after-ms %q accepted as %v", v, d)
		}
	}
	if rl := ParseRateLimits(http.Header{"X-Ratelimit-Reset-Tokens": {"NaN"}}); rl.Tokens.Present {
		t.Errorf("NaN reset accepted: %+v", rl.Tokens)
	}
	if rl := ParseRateLimits(http.Header{"X-Ratelimit-Reset-Tokens": {"2.5"}}); rl.Tokens.Reset != 2500*time.Millisecond {
		t.Errorf("decimal reset = %+v", rl.Tokens)
	}
	h := http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}
	if d, ok := RetryAfterFromHeader(h, now); !ok || d != 250*time.Millisecond {
		t.Errorf("retry-after-ms = %v %v", d, ok)
	}
	if d, ok := RetryAfterFromHeader(frameHeaders(map[string]any{"retry-after": 4.0}), now); !ok || d != 4*time.Second {
		t.Errorf("numeric frame retry-after = %v %v", d, ok)
	}
	for _, c := range []string{"insufficient_quota", "usage_not_included", "invalid_prompt", "context_length_exceeded",
		"server_is_overloaded", "slow_down", "cyber_policy", "bio_policy", "misalignment_policy_violation", "invalid_api_key"} {
		if !IsPermanentCode(c) {
			t.Errorf("%s not permanent", c)
		}
	}
	for _, c := range []string{"", "server_error", "rate_limit_exceeded", "internal_error", "timeout"} {
		if IsPermanentCode(c) {
			t.Errorf("%s permanent", c)
		}
	}
	var b bytes.Buffer
	b.WriteString((&Error{Phase: Body, Class: StreamFailure, Decode: DecodeJSON, Dispatched: true, Code: "c", Message: "m"}).Error())
	if b.String() != "provider body: stream failure (decode json) code=c: m [dispatched]" {
		t.Errorf("Error() = %q", b.String())
	}
}

func TestModelsAndQualification(t *testing.T) {
	m, ok := LookupModel("gpt-5.1-codex-max")
	if !ok || m.ContextWindow == 0 || m.MaxOutputTokens == 0 || !m.Reasoning || !m.Features.Has(FeatureCodexProfile) {
		t.Fatalf("lookup = %+v %v", m, ok)
	}
	if s, ok := LookupModel("gpt-5-nano-2025-08-07"); !ok || s.Name != "gpt-5-nano-2025-08-07" || s.ContextWindow != 400_000 {
		t.Errorf("snapshot lookup = %+v %v", s, ok)
	}
	for _, n := range []string{"", "gpt-5-codex-fake", "gpt-5-2025-13", "codex"} {
		if _, ok := LookupModel(n); ok {
			t.Errorf("LookupModel(%q) found", n)
		}
	}
	want := FeatureCodexProfile | FeatureWebSocket
	if Qualified(m.Features, 0, want) {
		t.Error("an endpoint with no features qualified")
	}
	if Qualified(0, want, want) {
		t.Error("a model with no features qualified")
	}
	if Qualified(m.Features, FeatureCodexProfile, want) {
		t.Error("partial endpoint qualified for two features")
	}
	if !Qualified(m.Features, want, want) || !Qualified(m.Features, m.Features, FeatureCodexProfile) {
		t.Error("both sides authorize but not qualified")
	}
	if Granted(FeatureWebSocket|FeatureReasoning, FeatureWebSocket) != FeatureWebSocket {
		t.Error("Granted is not the intersection")
	}
	h := NewHTTP(HTTPConfig{APIKey: "k", Features: FeatureCodexProfile})
	if h.EndpointFeatures() != FeatureCodexProfile || NewHTTP(HTTPConfig{APIKey: "k"}).EndpointFeatures() != 0 {
		t.Error("endpoint features not carried")
	}
	if got := WebSocketURL("https://api.openai.com/v1/"); got != "wss://api.openai.com/v1/responses" {
		t.Errorf("ws url %q", got)
	}
	if got := WebSocketURL("http://127.0.0.1:8080/v1"); got != "ws://127.0.0.1:8080/v1/responses" {
		t.Errorf("ws url %q", got)
	}
}

// TestDecoderFoldedKeys checks that the fast delta path and the general
// decoder agree on keys encoding/json folds onto typed fields ("ſ" is a
// case fold of "s").
func TestDecoderFoldedKeys(t *testing.T) {
	for _, p := range []string{
		`{"type":"response.output_text.delta","delta":"x","ſtatus":"not a number"}`,
		`{"type":"response.output_text.delta","delta":"x","ſtatus_code":"nan"}`,
		`{"type":"response.reasoning_summary_text.delta","delta":"x","ſummary_index":"one"}`,
		`{"type":"response.output_text.delta","delta":"x","héaders":1}`,
	} {
		var fast decoder
		slow := decoder{noFast: true}
		ev, st, err := fast.decode([]byte(p))
		sev, sst, serr := slow.decode([]byte(p))
		if (err == nil) != (serr == nil) || st != sst || ev.Delta != sev.Delta {
			t.Errorf("%s: fast %+v %v, general %+v %v", p, ev, err, sev, serr)
		}
	}
}

// TestDecoderErrorFrames checks the WebSocket error frame forms: an error
// status under "status" or "status_code" maps like an HTTP status (with
// its headers), a frame without an error status is a ResponsesFailed.
func TestDecoderErrorFrames(t *testing.T) {
	cases := []struct {
		frame  string
		class  Class
		status int
		code   string
	}{
		{`{"type":"error","status":429,"error":{"type":"usage_limit_reached","code":"rate_limit_exceeded","message":"Please try again in 20ms."},"headers":{"retry-after-ms":"20","x-request-id":"req_1"}}`, HTTPStatus, 429, "rate_limit_exceeded"},
		{`{"type":"error","status_code":503,"error":{"code":"server_is_overloaded","message":"busy"}}`, HTTPStatus, 503, "server_is_overloaded"},
		{`{"type":"error","error":{"code":"websocket_connection_limit_reached","message":"limit"}}`, ResponsesFailed, 0, "websocket_connection_limit_reached"},
		{`{"type":"error","status":200,"code":"odd","message":"not an error status"}`, ResponsesFailed, 0, "odd"},
	}
	for _, c := range cases {
		var d decoder
		_, _, err := d.decode([]byte(c.frame))
		if err == nil || err.Class != c.class || err.Status != c.status || err.Code != c.code || !err.Dispatched {
			t.Errorf("%s: got %+v", c.frame, err)
			continue
		}
		if c.class == HTTPStatus && err.Phase != Opening {
			t.Errorf("%s: a first-frame status error is phase %v, want opening", c.frame, err.Phase)
		}
	}
	var d decoder
	_, _, err := d.decode([]byte(cases[0].frame))
	if !err.HasRetryAfter || err.RetryAfter != 20*time.Millisecond || err.RequestID != "req_1" {
		t.Errorf("frame headers not read: %+v", err)
	}
}

// TestLimitedBody checks the body bound: exactly n bytes end normally, one
// more fails with errBodyTooLarge.
func TestLimitedBody(t *testing.T) {
	if b, err := io.ReadAll(&limitedBody{r: strings.NewReader("abc"), n: 3}); err != nil || string(b) != "abc" {
		t.Errorf("body at the bound: %q %v", b, err)
	}
	if _, err := io.ReadAll(iotest.OneByteReader(&limitedBody{r: strings.NewReader("abc"), n: 3})); err != nil {
		t.Errorf("body at the bound, byte by byte: %v", err)
	}
	if _, err := io.ReadAll(&limitedBody{r: strings.NewReader("abcd"), n: 3}); err != errBodyTooLarge {
		t.Errorf("body over the bound: %v", err)
	}
}

// TestModelTableCodexProfile checks the model side of recovery
// qualification: the GPT-5 family Codex generates with carries the Codex
// runtime profile, a model outside it does not, and an unknown name is
// not found (a name never grants anything).
func TestModelTableCodexProfile(t *testing.T) {
	for _, name := range []string{"gpt-5.3-codex", "gpt-5.1-codex", "gpt-5.2", "gpt-5", "gpt-5-mini", "gpt-5-nano-2025-08-07"} {
		if m, ok := LookupModel(name); !ok || !m.Features.Has(FeatureCodexProfile) {
			t.Errorf("%s: found %v, features %b; want the Codex profile", name, ok, m.Features)
		}
	}
	if m, ok := LookupModel("gpt-4.1"); !ok || m.Features.Has(FeatureCodexProfile) {
		t.Errorf("gpt-4.1: found %v, Codex profile %v; want found without it", ok, m.Features.Has(FeatureCodexProfile))
	}
	if _, ok := LookupModel("my-local-model"); ok {
		t.Error("an unknown name was found")
	}
}
