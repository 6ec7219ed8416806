package provider_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// routeTransport is an HTTP transport of wire format w on the scripted
// server.
func routeTransport(srv *providertest.Server, w provider.WireAPI) *provider.HTTP {
	return provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey, Wire: w})
}

func TestRecordedChatFixtures(t *testing.T) {
	srv := providertest.New(t)
	tr := routeTransport(srv, provider.WireChat)

	tool, err := providertest.RawSSE(readFixture(t, "openai-python__chat-stream-tool-call.sse"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(tool)
	evs, err := run(t, tr, simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	resp := completed(t, evs)
	want := []itemView{{Type: provider.ItemFunctionCall, CallID: "call_4XzlGBLtUe9dy3GVNV4jhq7h", Name: "get_weather", Arguments: `{"city":"New York City"}`}}
	if diff := cmp.Diff(want, view(resp.Output)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if got := deltas(evs, provider.EventToolCallDelta); got != `{"city":"New York City"}` {
		t.Errorf("argument deltas = %q", got)
	}
	if evs[0].Type != provider.EventCreated || evs[0].Response.ID != "chatcmpl-ABfwERreu9s99xXsVuOWtIB2UOx62" {
		t.Errorf("first event = %+v, want created with the chunk id", evs[0])
	}
	if evs[1].Type != provider.EventToolCallStarted || evs[1].CallID != "call_4XzlGBLtUe9dy3GVNV4jhq7h" || evs[1].Name != "get_weather" {
		t.Errorf("second event = %+v, want the call started", evs[1])
	}
	if diff := cmp.Diff(&provider.Usage{InputTokens: 44, OutputTokens: 16}, resp.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}

	length, err := providertest.RawSSE(readFixture(t, "openai-python__chat-stream-finish-length.sse"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(length)
	_, err = run(t, tr, simpleRequest())
	pe := asError(t, err)
	if pe.Class != provider.ResponsesIncomplete || pe.IncompleteReason != "max_output_tokens" || pe.Response == nil {
		t.Fatalf("finish_reason length = %v, want incomplete max_output_tokens with the partial response", err)
	}
	if diff := cmp.Diff([]itemView{{Type: provider.ItemMessage, Text: `{"`}}, view(pe.Response.Output)); diff != "" {
		t.Errorf("partial output (-want +got):\n%s", diff)
	}
	if pe.Response.Usage == nil || pe.Response.Usage.OutputTokens != 1 || pe.Response.Usage.InputTokens != 79 {
		t.Errorf("partial usage = %+v, want 79 in, 1 out", pe.Response.Usage)
	}
}

func TestRecordedAnthropicFixtures(t *testing.T) {
	srv := providertest.New(t)
	tr := routeTransport(srv, provider.WireAnthropic)
	for _, name := range []string{"vercel-ai__anthropic-json-tool.2.jsonl", "vercel-ai__anthropic-clear-thinking.1.jsonl"} {
		turn, err := providertest.FromJSONL(readFixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		srv.Enqueue(turn)
	}

	evs, err := run(t, tr, simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	resp := completed(t, evs)
	args := `{"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]}`
	want := []itemView{
		{Type: provider.ItemMessage, Text: "I'll invoke the JSON response tool."},
		{Type: provider.ItemFunctionCall, CallID: "toolu_01KFbKqPYSuAKujiL6mTfzYA", Name: "json", Arguments: args},
	}
	if diff := cmp.Diff(want, view(resp.Output)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if got := deltas(evs, provider.EventTextDelta); got != "I'll invoke the JSON response tool." {
		t.Errorf("text deltas = %q", got)
	}
	if got := deltas(evs, provider.EventToolCallDelta); got != args {
		t.Errorf("argument deltas = %q", got)
	}
	if diff := cmp.Diff(&provider.Usage{InputTokens: 849, OutputTokens: 47}, resp.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}

	evs, err = run(t, tr, simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	resp = completed(t, evs)
	if len(resp.Output) != 2 || resp.Output[0].Type != provider.ItemReasoning || resp.Output[1].Type != provider.ItemMessage {
		t.Fatalf("output = %+v, want thinking then text", view(resp.Output))
	}
	th := resp.Output[0]
	if th.Summary[0] != deltas(evs, provider.EventReasoningDelta) || !strings.HasPrefix(th.Summary[0], "The previous result was 925.") {
		t.Errorf("thinking = %q, deltas %q", th.Summary, deltas(evs, provider.EventReasoningDelta))
	}
	if !strings.HasSuffix(th.EncryptedContent, "4yzNgvi/EhT6Ca17BgB") {
		t.Errorf("the signature is not kept: %q", th.EncryptedContent)
	}
	// Sent back, the thinking block is exactly what was received.
	body := encodeOn(t, provider.WireAnthropic, &provider.Request{Model: "m", Input: append(resp.Output, provider.Item{Type: provider.ItemMessage, Role: "user", Text: "and?"})})
	msgs := body["messages"].([]any)
	block := msgs[0].(map[string]any)["content"].([]any)[0].(map[string]any)
	if block["type"] != "thinking" || block["thinking"] != th.Summary[0] || !strings.HasPrefix(block["signature"].(string), "EvQBCkYICxgCKkAxhD4") {
		t.Errorf("replayed thinking block = %v", block)
	}
}

// scriptedReply is a response of every kind of output: reasoning, text
// and two parallel tool calls.
func scriptedReply() providertest.Turn {
	return providertest.Reply(
		providertest.Reasoning("sig-opaque", "Let me look at both files."),
		providertest.Message("Reading them now."),
		providertest.FunctionCall("call_a", "read", `{"path":"a.go"}`),
		providertest.FunctionCall("call_b", "read", `{"path":"b.go"}`),
	).WithUsage(provider.Usage{InputTokens: 1200, CachedTokens: 1000, OutputTokens: 40, ReasoningTokens: 7})
}

func TestRoutesStreamEveryOutput(t *testing.T) {
	for _, w := range provider.WireAPIs {
		t.Run(string(w), func(t *testing.T) {
			srv := providertest.New(t)
			srv.Enqueue(scriptedReply())
			evs, err := run(t, routeTransport(srv, w), simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			resp := completed(t, evs)
			got := view(resp.Output)
			if got[0].Type != provider.ItemReasoning || got[0].Summary[0] != "Let me look at both files." {
				t.Errorf("reasoning item = %+v", got[0])
			}
			// Only the Responses and Anthropic routes carry opaque
			// reasoning state; chat reasoning is shown, never replayed.
			if got[0].HasEncrypted != (w != provider.WireChat) {
				t.Errorf("reasoning has opaque state = %v on %s", got[0].HasEncrypted, w)
			}
			want := []itemView{
				{Type: provider.ItemMessage, Text: "Reading them now."},
				{Type: provider.ItemFunctionCall, CallID: "call_a", Name: "read", Arguments: `{"path":"a.go"}`},
				{Type: provider.ItemFunctionCall, CallID: "call_b", Name: "read", Arguments: `{"path":"b.go"}`},
			}
			if diff := cmp.Diff(want, got[1:]); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if d := deltas(evs, provider.EventTextDelta); d != "Reading them now." {
				t.Errorf("text deltas = %q", d)
			}
			if d := deltas(evs, provider.EventReasoningDelta); d != "Let me look at both files." {
				t.Errorf("reasoning deltas = %q", d)
			}
			if d := deltas(evs, provider.EventToolCallDelta); d != `{"path":"a.go"}{"path":"b.go"}` {
				t.Errorf("argument deltas = %q", d)
			}
			var started []string
			for _, e := range evs {
				if e.Type == provider.EventToolCallStarted {
					started = append(started, e.CallID+":"+e.Name)
				}
			}
			if diff := cmp.Diff([]string{"call_a:read", "call_b:read"}, started); diff != "" {
				t.Errorf("calls started (-want +got):\n%s", diff)
			}
			wantUsage := &provider.Usage{InputTokens: 1200, CachedTokens: 1000, OutputTokens: 40, ReasoningTokens: 7}
			if w == provider.WireAnthropic {
				wantUsage.ReasoningTokens = 0 // Anthropic does not count thinking apart
			}
			if diff := cmp.Diff(wantUsage, resp.Usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestChatWithoutUsageIsUnknown(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("hi").WithoutUsage())
	evs, err := run(t, routeTransport(srv, provider.WireChat), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	if u := completed(t, evs).Usage; u != nil {
		t.Errorf("usage = %+v, want nil (unknown) when the server sends none", u)
	}
}

func TestChatReasoningFields(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		srv := providertest.New(t)
		srv.Enqueue(providertest.Reply(providertest.Reasoning("", "hmm, yes"), providertest.Message("ok")).ChatReasoningField(field))
		evs, err := run(t, routeTransport(srv, provider.WireChat), simpleRequest())
		if err != nil {
			t.Fatal(err)
		}
		if d := deltas(evs, provider.EventReasoningDelta); d != "hmm, yes" {
			t.Errorf("%s: reasoning deltas = %q", field, d)
		}
	}
}

// TestChatInterruptedFinish: a stream the server ends with a finish
// reason that says it cut the generation short (vLLM's "abort" and
// "error", DeepSeek's "insufficient_system_resource") is a failed
// response carrying the partial output and the usage, never a completed
// one: the text stops mid-sentence.
func TestChatInterruptedFinish(t *testing.T) {
	for _, reason := range []string{"abort", "error", "insufficient_system_resource"} {
		t.Run(reason, func(t *testing.T) {
			_, err := runChatStream(t, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"The answer is"},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"`+reason+`"}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}

data: [DONE]

`)
			if err == nil {
				t.Fatalf("finish_reason %s: completed, want a failed response", reason)
			}
			pe := asError(t, err)
			if pe.Class != provider.ResponsesFailed || pe.Code != reason || pe.Response == nil {
				t.Fatalf("finish_reason %s: %v, want ResponsesFailed with code %s and the partial response", reason, err, reason)
			}
			if diff := cmp.Diff([]itemView{{Type: provider.ItemMessage, Text: "The answer is"}}, view(pe.Response.Output)); diff != "" {
				t.Errorf("partial output (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(&provider.Usage{InputTokens: 12, OutputTokens: 3}, pe.Response.Usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChatAzurePromptFilterChunk: Azure OpenAI opens a stream with a
// chunk of prompt_filter_results, empty choices and an empty id and
// model; the response is still the one the following chunks name.
func TestChatAzurePromptFilterChunk(t *testing.T) {
	evs, err := runChatStream(t, `data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}

data: {"choices":[{"content_filter_results":{},"delta":{"content":"","refusal":null,"role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":1,"id":"chatcmpl-AZ","model":"gpt-4o-2024-11-20","object":"chat.completion.chunk","system_fingerprint":"fp_1","usage":null}

data: {"choices":[{"content_filter_results":{},"delta":{"content":"Hi."},"finish_reason":null,"index":0,"logprobs":null}],"created":1,"id":"chatcmpl-AZ","model":"gpt-4o-2024-11-20","object":"chat.completion.chunk","system_fingerprint":"fp_1","usage":null}

data: {"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"stop","index":0,"logprobs":null}],"created":1,"id":"chatcmpl-AZ","model":"gpt-4o-2024-11-20","object":"chat.completion.chunk","system_fingerprint":"fp_1","usage":null}

data: [DONE]

`)
	if err != nil {
		t.Fatal(err)
	}
	resp := completed(t, evs)
	if evs[0].Type != provider.EventCreated || evs[0].Response.ID != "chatcmpl-AZ" || resp.ID != "chatcmpl-AZ" || resp.Model != "gpt-4o-2024-11-20" {
		t.Errorf("created %+v, completed id %q model %q; want chatcmpl-AZ and gpt-4o-2024-11-20", evs[0].Response, resp.ID, resp.Model)
	}
}

// TestChatLlamaCppErrorField: llama.cpp's server (builds before
// September 2025) reports a failure in the middle of a stream as a
// non-standard "error:" field, then "data: [DONE]". The failure is the
// server's, with its message and type, not a stream that ended before a
// finish_reason.
func TestChatLlamaCppErrorField(t *testing.T) {
	_, err := runChatStream(t, "error: {\"code\":400,\"message\":\"the request exceeds the available context size. try increasing the context size or enable context shift\",\"type\":\"invalid_request_error\"}\n\ndata: [DONE]\n\n")
	pe := asError(t, err)
	if pe.Class != provider.ResponsesFailed || pe.Type != "invalid_request_error" || pe.Code != "400" ||
		!strings.Contains(pe.Message, "exceeds the available context size") {
		t.Errorf("error = %v (class %v, type %q, code %q), want the server's failure", err, pe.Class, pe.Type, pe.Code)
	}
}

// TestRouteFaults drives every fault the routes report through each
// wire format: each is a typed failure, and each Open sent exactly one
// request (the provider package never replays).
func TestRouteFaults(t *testing.T) {
	type want struct {
		class      provider.Class
		phase      provider.Phase
		status     int
		retryAfter time.Duration
		decode     provider.DecodeKind
		reason     string
		typ        string
	}
	cases := []struct {
		name string
		turn providertest.Turn
		want want
	}{
		{"429 retry-after", providertest.Status(429, "rate_limit_error", "rate_limit_exceeded", "slow down").WithRetryAfter("7"),
			want{class: provider.HTTPStatus, phase: provider.Opening, status: 429, retryAfter: 7 * time.Second, typ: "rate_limit_error"}},
		{"529 overloaded", providertest.Status(529, "overloaded_error", "", "Overloaded"),
			want{class: provider.HTTPStatus, phase: provider.Opening, status: 529, typ: "overloaded_error"}},
		{"503", providertest.Status(503, "api_error", "", "upstream unavailable"),
			want{class: provider.HTTPStatus, phase: provider.Opening, status: 503, typ: "api_error"}},
		{"cut body", scriptedReply().DropAfter(4), want{class: provider.BodyInterrupted, phase: provider.Body}},
		{"clean end before the terminal event", scriptedReply().EOFAfter(4), want{class: provider.TerminalEOF, phase: provider.Body}},
		{"malformed chunk", scriptedReply().MalformedAt(3), want{class: provider.StreamFailure, phase: provider.Body, decode: provider.DecodeJSON}},
		{"invalid utf-8", scriptedReply().InvalidUTF8At(3), want{class: provider.StreamFailure, phase: provider.Body, decode: provider.DecodeInvalidUTF8}},
		{"error in the stream", providertest.FailedAfter("overloaded_error", "Overloaded", providertest.Message("par")),
			want{class: provider.ResponsesFailed, phase: provider.Body, typ: "overloaded_error"}},
		{"output limit", providertest.Incomplete("max_output_tokens", providertest.Message("partial answer")),
			want{class: provider.ResponsesIncomplete, phase: provider.Body, reason: "max_output_tokens"}},
		{"html page", providertest.NotEventStream("text/html; charset=utf-8", "<html>login</html>"),
			want{class: provider.NotEventStream, phase: provider.Opening, status: 200}},
	}
	for _, w := range provider.WireAPIs {
		for _, c := range cases {
			t.Run(string(w)+"/"+c.name, func(t *testing.T) {
				srv := providertest.New(t)
				srv.Enqueue(c.turn)
				_, err := run(t, routeTransport(srv, w), simpleRequest())
				pe := asError(t, err)
				got := want{class: pe.Class, phase: pe.Phase, status: pe.Status, retryAfter: pe.RetryAfter, decode: pe.Decode, reason: pe.IncompleteReason, typ: pe.Type}
				if w == provider.WireChat && c.want.class == provider.ResponsesFailed {
					c.want.typ = "overloaded_error"
				}
				if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(want{})); diff != "" {
					t.Errorf("%v\n(-want +got):\n%s", err, diff)
				}
				if !pe.Dispatched {
					t.Errorf("a fault after sending is not dispatched: %v", err)
				}
				if n := len(srv.Requests()); n != 1 {
					t.Errorf("%d requests, want exactly 1", n)
				}
				if c.want.reason != "" && (pe.Response == nil || len(pe.Response.Output) == 0 || pe.Response.Output[0].Text != "partial answer") {
					t.Errorf("incomplete response = %+v, want the partial output", pe.Response)
				}
				if c.want.class == provider.NotEventStream && (!strings.Contains(err.Error(), srv.URL()) || !strings.Contains(err.Error(), "text/html")) {
					t.Errorf("error %q does not name the URL and the content type", err)
				}
			})
		}
	}
}

func TestRoutesNeverLeakTheKey(t *testing.T) {
	for _, w := range provider.WireAPIs {
		srv := providertest.New(t)
		srv.Enqueue(providertest.Status(401, "authentication_error", "", "invalid x-api-key "+testKey))
		tr := routeTransport(srv, w)
		_, err := run(t, tr, simpleRequest())
		for _, s := range []string{err.Error(), tr.String(), tr.URL()} {
			if strings.Contains(s, testKey) {
				t.Errorf("%s: the key leaks: %s", w, s)
			}
		}
		r := srv.Requests()[0]
		var keyHeader string
		for k, v := range r.Header {
			for _, s := range v {
				if strings.Contains(s, testKey) {
					t.Errorf("%s: header %s recorded unredacted", w, k)
				}
				if s == "[REDACTED]" {
					keyHeader = k
				}
			}
		}
		wantHeader := map[provider.WireAPI]string{provider.WireResponses: "Authorization", provider.WireChat: "Authorization", provider.WireAnthropic: "X-Api-Key"}[w]
		if keyHeader != wantHeader {
			t.Errorf("%s: the key went in %q, want %q", w, keyHeader, wantHeader)
		}
	}
}

func TestRoutePathsAndHeaders(t *testing.T) {
	srv := providertest.New(t)
	for _, w := range provider.WireAPIs {
		srv.Enqueue(providertest.Text("ok"))
		tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey, Wire: w,
			Headers: map[string][]string{"X-Team": {"core"}, "Authorization": {"Bearer stolen"}}})
		if _, err := run(t, tr, simpleRequest()); err != nil {
			t.Fatalf("%s: %v", w, err)
		}
	}
	reqs := srv.Requests()
	for i, path := range []string{"/v1/responses", "/v1/chat/completions", "/v1/messages"} {
		r := reqs[i]
		if r.Path != path {
			t.Errorf("request %d went to %s, want %s", i, r.Path, path)
		}
		if r.Header.Get("X-Team") != "core" {
			t.Errorf("%s: configured header missing: %v", path, r.Header)
		}
		if r.Header.Get("Authorization") == "Bearer stolen" {
			t.Errorf("%s: a configured header set the credential", path)
		}
		if r.Body["stream"] != true {
			t.Errorf("%s: stream = %v", path, r.Body["stream"])
		}
	}
	if v := reqs[2].Header.Get("Anthropic-Version"); v != provider.AnthropicVersion {
		t.Errorf("anthropic-version = %q", v)
	}
	if so, _ := reqs[1].Body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("chat stream_options = %v, want include_usage", reqs[1].Body["stream_options"])
	}
}

// TestAzureQueryAndKeyHeader: a Responses route with Azure's api-key
// header and api-version query parameter.
func TestAzureQueryAndKeyHeader(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("ok"))
	var got *url.URL
	tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey, KeyHeader: provider.KeyAPIKey,
		Query: url.Values{"api-version": {"2025-04-01-preview"}, "sig": {"secret-sig"}}})
	got, _ = url.Parse(tr.URL())
	if _, err := run(t, tr, simpleRequest()); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if r.Header.Get("Api-Key") != "[REDACTED]" || r.Header.Get("Authorization") != "" {
		t.Errorf("key headers: api-key %q, authorization %q", r.Header.Get("Api-Key"), r.Header.Get("Authorization"))
	}
	if q := got.Query(); q.Get("api-version") != "2025-04-01-preview" || q.Get("sig") == "secret-sig" {
		t.Errorf("shown URL %s: api-version must show, other values must not", got)
	}
}

func TestRefusedLoopbackSaysNothingListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for _, w := range provider.WireAPIs {
		tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: "http://" + addr + "/v1", Wire: w})
		_, err := run(t, tr, simpleRequest())
		pe := asError(t, err)
		if pe.Class != provider.Connect || !pe.LocalRefused || pe.Dispatched {
			t.Errorf("%s: %v, want an undispatched Connect with LocalRefused", w, err)
		}
		if !strings.Contains(err.Error(), "is the server running?") || !strings.Contains(err.Error(), addr) {
			t.Errorf("%s: %q does not ask whether the server at %s runs", w, err, addr)
		}
	}
}

// encodeOn returns the body route w sends for req, decoded.
func encodeOn(t *testing.T, w provider.WireAPI, req *provider.Request) map[string]any {
	t.Helper()
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("ok"))
	if _, err := run(t, routeTransport(srv, w), req); err != nil {
		t.Fatal(err)
	}
	return srv.Requests()[0].Body
}

// onePNG is a 1×1 PNG image, onePNGBase64 its base64.
const (
	onePNG       = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\b\x00\x00\x00\x00:~\x9bU\x00\x00\x00\x0eIDATx\x9cbb\x00\x04\x00\x00\xff\xff\x00\x06\x00\x03\xfa\xd0Y\xae\x00\x00\x00\x00IEND\xaeB`\x82"
	onePNGBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAADklEQVR4nGJiAAQAAP//AAYAA/rQWa4AAAAASUVORK5CYII="
)

// conversation is a replayed history with every item kind: a user
// message with an image, an assistant response of reasoning, text and
// two calls, their results (the second with an image, as view_image's),
// and the next user message.
func conversation(reasoning provider.Item) *provider.Request {
	png := provider.Image{MimeType: "image/png", Data: []byte(onePNG)}
	return &provider.Request{
		Model: "m", Instructions: "You are octet.", MaxOutputTokens: 4000,
		Reasoning: &provider.Reasoning{Effort: "medium"},
		Tools:     []provider.FunctionTool{{Name: "read", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}},
		Input: []provider.Item{
			{Type: provider.ItemMessage, Role: "user", Text: "What is in the picture?", Images: []provider.Image{png}},
			reasoning,
			{Type: provider.ItemMessage, Role: "assistant", Text: "Reading both."},
			{Type: provider.ItemFunctionCall, CallID: "call_a", Name: "read", Arguments: `{"path":"a"}`},
			{Type: provider.ItemFunctionCall, CallID: "call_b", Name: "read", Arguments: `{"path":"b"}`},
			{Type: provider.ItemFunctionCallOutput, CallID: "call_a", Output: "A"},
			{Type: provider.ItemFunctionCallOutput, CallID: "call_b", Output: "B", Images: []provider.Image{png}},
			{Type: provider.ItemMessage, Role: "user", Text: "Thanks."},
		},
	}
}

func TestChatRequestShape(t *testing.T) {
	body := encodeOn(t, provider.WireChat, conversation(provider.Item{Type: provider.ItemReasoning, Summary: []string{"shown only"}}))
	want := map[string]any{
		"model": "m", "stream": true, "stream_options": map[string]any{"include_usage": true},
		"max_completion_tokens": 4000.0, "reasoning_effort": "medium", "tool_choice": "auto",
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "read", "description": "Read a file.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}}},
		"messages": []any{
			map[string]any{"role": "system", "content": "You are octet."},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "What is in the picture?"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + onePNGBase64}},
			}},
			map[string]any{"role": "assistant", "content": "Reading both.", "tool_calls": []any{
				map[string]any{"id": "call_a", "type": "function", "function": map[string]any{"name": "read", "arguments": `{"path":"a"}`}},
				map[string]any{"id": "call_b", "type": "function", "function": map[string]any{"name": "read", "arguments": `{"path":"b"}`}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "call_a", "content": "A"},
			map[string]any{"role": "tool", "tool_call_id": "call_b", "content": "B"},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "The images of tool call call_b:"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + onePNGBase64}},
			}},
			map[string]any{"role": "user", "content": "Thanks."},
		},
	}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("chat body (-want +got):\n%s", diff)
	}
}

// TestChatOutputBound: a reasoning model's output bound goes as
// max_completion_tokens, since OpenAI answers max_tokens for its reasoning
// models with 400 "Unsupported parameter: 'max_tokens' is not supported
// with this model. Use 'max_completion_tokens' instead."; any other
// model's as max_tokens, which every Chat Completions server knows.
func TestChatOutputBound(t *testing.T) {
	for _, tc := range []struct {
		reasoning *provider.Reasoning
		field     string
	}{
		{&provider.Reasoning{Effort: "high"}, "max_completion_tokens"},
		{&provider.Reasoning{Effort: "none"}, "max_completion_tokens"},
		{nil, "max_tokens"},
	} {
		req := simpleRequest()
		req.MaxOutputTokens, req.Reasoning = 2048, tc.reasoning
		body := encodeOn(t, provider.WireChat, req)
		var got []string
		for _, k := range []string{"max_tokens", "max_completion_tokens"} {
			if _, ok := body[k]; ok {
				got = append(got, k)
			}
		}
		if len(got) != 1 || got[0] != tc.field || body[tc.field] != 2048.0 {
			t.Errorf("reasoning %+v: bound sent as %v (%v), want only %s: 2048", tc.reasoning, got, body, tc.field)
		}
	}
}

func TestAnthropicRequestShape(t *testing.T) {
	thinking := provider.Item{Type: provider.ItemReasoning, Summary: []string{"I should read both."}, EncryptedContent: "anthropic.thinking:SIG"}
	body := encodeOn(t, provider.WireAnthropic, conversation(thinking))
	eph := map[string]any{"type": "ephemeral"}
	want := map[string]any{
		"model": "m", "stream": true, "max_tokens": 4000.0,
		"thinking":    map[string]any{"type": "enabled", "budget_tokens": 2000.0},
		"system":      []any{map[string]any{"type": "text", "text": "You are octet.", "cache_control": eph}},
		"tool_choice": map[string]any{"type": "auto"},
		"tools": []any{map[string]any{"name": "read", "description": "Read a file.",
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "What is in the picture?"},
				map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": onePNGBase64}},
			}},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "thinking", "thinking": "I should read both.", "signature": "SIG"},
				map[string]any{"type": "text", "text": "Reading both."},
				map[string]any{"type": "tool_use", "id": "call_a", "name": "read", "input": map[string]any{"path": "a"}},
				map[string]any{"type": "tool_use", "id": "call_b", "name": "read", "input": map[string]any{"path": "b"}},
			}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": "call_a", "content": "A"},
				map[string]any{"type": "tool_result", "tool_use_id": "call_b", "content": []any{
					map[string]any{"type": "text", "text": "B"},
					map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": onePNGBase64}},
				}},
				map[string]any{"type": "text", "text": "Thanks.", "cache_control": eph},
			}},
		},
	}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("anthropic body (-want +got):\n%s", diff)
	}
}

// TestAnthropicToolHistoryWithoutTools: a request that offers no tools
// (a compaction, a gate question) over a conversation with tool calls
// still declares the tools its tool_use blocks name, with tool_choice
// none: the Messages API answers 400 "Requests which include tool_use or
// tool_result blocks must define tools" otherwise.
func TestAnthropicToolHistoryWithoutTools(t *testing.T) {
	req := conversation(provider.Item{Type: provider.ItemReasoning})
	req.Tools, req.ToolChoice, req.Reasoning = nil, "none", nil
	req.Input = append(req.Input, provider.Item{Type: provider.ItemFunctionCall, CallID: "call_c", Name: "grep", Arguments: `{}`},
		provider.Item{Type: provider.ItemFunctionCallOutput, CallID: "call_c", Output: "C"},
		provider.Item{Type: provider.ItemMessage, Role: "user", Text: "Summarize."})
	body := encodeOn(t, provider.WireAnthropic, req)
	var names []string
	tools, _ := body["tools"].([]any)
	for _, tl := range tools {
		m := tl.(map[string]any)
		if s, _ := m["input_schema"].(map[string]any); s["type"] != "object" {
			t.Errorf("tool %v: input_schema is not an object schema", m)
		}
		names = append(names, m["name"].(string))
	}
	if diff := cmp.Diff([]string{"read", "grep"}, names); diff != "" {
		t.Errorf("declared tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"type": "none"}, body["tool_choice"]); diff != "" {
		t.Errorf("tool_choice (-want +got):\n%s", diff)
	}

	// Without tool blocks nothing is declared.
	body = encodeOn(t, provider.WireAnthropic, &provider.Request{Model: "m", ToolChoice: "none",
		Input: []provider.Item{{Type: provider.ItemMessage, Role: "user", Text: "hi"}}})
	if _, ok := body["tools"]; ok {
		t.Errorf("tools declared for a conversation without tool blocks: %v", body["tools"])
	}
}

// TestAnthropicImageBounds: images the Messages API would refuse (one
// over 5 MiB of base64, which octet takes up to 20 MiB; beyond 100 in a
// request; beyond 24 MiB of base64 together) are notes in their place,
// the newest images sent first, in a prompt and in a tool result alike,
// so the session they are kept in is not refused on every later request.
func TestAnthropicImageBounds(t *testing.T) {
	note := func(im provider.Image, why string) string {
		return fmt.Sprintf("[a %s image of %d bytes is not shown: %s]", im.MimeType, len(im.Data), why)
	}
	const over, full = "the Messages API takes images of at most 3.75 MiB", "the request already carries the newer images the Messages API takes (100, 24 MiB)"
	big := provider.Image{MimeType: "image/png", Data: pngOf(t, 1, 1, provider.AnthropicMaxImageBase64/4*3+1)}
	small := provider.Image{MimeType: "image/png", Data: pngOf(t, 1, 1, 0)}
	body := encodeOn(t, provider.WireAnthropic, &provider.Request{Model: "m", Input: []provider.Item{
		{Type: provider.ItemMessage, Role: "user", Text: "look", Images: []provider.Image{big, small}},
		{Type: provider.ItemFunctionCall, CallID: "c1", Name: "view_image", Arguments: `{"path":"a.png"}`},
		{Type: provider.ItemFunctionCallOutput, CallID: "c1", Output: "a.png", Images: []provider.Image{big}},
	}})
	raw, _ := json.Marshal(body["messages"])
	if n := strings.Count(string(raw), note(big, over)); n != 2 || strings.Count(string(raw), `"type":"image"`) != 1 || len(raw) > 1<<20 {
		t.Errorf("%d notes, %d images in %d bytes of messages; want 2 notes and the small image", n, strings.Count(string(raw), `"type":"image"`), len(raw))
	}

	// 101 small images: the oldest one is left out.
	many := make([]provider.Image, provider.AnthropicMaxImages+1)
	for i := range many {
		many[i] = provider.Image{MimeType: "image/png", Data: fmt.Appendf(pngOf(t, 1, 1, 0), "%03d", i)}
	}
	body = encodeOn(t, provider.WireAnthropic, &provider.Request{Model: "m", Input: []provider.Item{
		{Type: provider.ItemMessage, Role: "user", Text: "first", Images: many[:1]},
		{Type: provider.ItemMessage, Role: "user", Text: "then", Images: many[1:]},
	}})
	raw, _ = json.Marshal(body["messages"])
	if strings.Count(string(raw), `"type":"image"`) != provider.AnthropicMaxImages || !strings.Contains(string(raw), note(many[0], full)) {
		t.Errorf("101 images: %d sent, the oldest noted %v", strings.Count(string(raw), `"type":"image"`), strings.Contains(string(raw), note(many[0], full)))
	}

	// Seven 3.75 MiB images (5 MiB of base64 each): the newest four fit
	// in 24 MiB, the three oldest are notes.
	mid := provider.Image{MimeType: "image/jpeg", Data: jpegOf(t, 1, 1, provider.AnthropicMaxImageBase64/4*3)}
	seven := []provider.Image{mid, mid, mid, mid, mid, mid, mid}
	body = encodeOn(t, provider.WireAnthropic, &provider.Request{Model: "m", Input: []provider.Item{
		{Type: provider.ItemMessage, Role: "user", Text: "seven", Images: seven},
	}})
	content, _ := body["messages"].([]any)[0].(map[string]any)["content"].([]any)
	var kinds []string
	for _, b := range content {
		b := b.(map[string]any)
		switch {
		case b["type"] == "image":
			kinds = append(kinds, "image")
		case b["text"] == note(mid, full):
			kinds = append(kinds, "note")
		default:
			kinds = append(kinds, "text")
		}
	}
	if strings.Join(kinds, " ") != "text note note note image image image image" {
		t.Errorf("seven 3.75 MiB images: %v", kinds)
	}
}

// TestAnthropicImagePixelBounds: an image over 8000 pixels on a side,
// or over 2000 in a request of more than 20 images (the oldest such
// first, until the rest fit), or whose size cannot be read, is a note in
// its place, saying which bound and its size, so the session it is kept
// in is not refused on every later request.
func TestAnthropicImagePixelBounds(t *testing.T) {
	note := func(im provider.Image, why string) string {
		return fmt.Sprintf("[a %s image of %d bytes is not shown: %s]", im.MimeType, len(im.Data), why)
	}
	count := func(body map[string]any) (images int, raw string) {
		b, _ := json.Marshal(body["messages"])
		return strings.Count(string(b), `"type":"image"`), string(b)
	}
	huge := provider.Image{MimeType: "image/png", Data: pngOf(t, 8001, 1, 0)}
	edge := provider.Image{MimeType: "image/png", Data: pngOf(t, 8000, 3000, 0)}
	broken := provider.Image{MimeType: "image/png", Data: []byte("\x89PNG\r\n\x1a\nnot a header")}
	n, raw := count(encodeOn(t, provider.WireAnthropic, &provider.Request{Model: "m", Input: []provider.Item{
		{Type: provider.ItemMessage, Role: "user", Text: "look", Images: []provider.Image{huge, edge, broken}},
	}}))
	if n != 1 || !strings.Contains(raw, note(huge, "the Messages API takes images of at most 8000×8000 pixels, and this one is 8001×1")) ||
		!strings.Contains(raw, note(broken, "its size in pixels cannot be read from it")) {
		t.Errorf("an 8001-pixel, an 8000-pixel and an unreadable image: %d sent\n%s", n, raw)
	}

	// 22 images, three of them over 2000 pixels (the first and the tenth
	// 2001 wide, the last 2002): the two oldest large ones are left out,
	// then 20 remain.
	var imgs []provider.Image
	for i := range 22 {
		side := 10
		switch i {
		case 0, 9:
			side = 2001
		case 21:
			side = 2002
		}
		imgs = append(imgs, provider.Image{MimeType: "image/png", Data: fmt.Appendf(pngOf(t, side, 1, 0), "%02d", i)})
	}
	n, raw = count(encodeOn(t, provider.WireAnthropic, &provider.Request{Model: "m", Input: []provider.Item{
		{Type: provider.ItemMessage, Role: "user", Text: "many", Images: imgs},
	}}))
	many := func(im provider.Image, side int) string {
		return note(im, fmt.Sprintf("in a request of more than 20 images the Messages API takes images of at most 2000×2000 pixels, and this one is %d×1", side))
	}
	if n != 20 || strings.Count(raw, many(imgs[0], 2001)) != 2 || strings.Contains(raw, many(imgs[21], 2002)) {
		t.Errorf("22 images, 3 over 2000 pixels: %d sent\n%.2000s", n, raw)
	}
	// Twenty of them: every one is sent.
	if n, raw := count(encodeOn(t, provider.WireAnthropic, &provider.Request{Model: "m", Input: []provider.Item{
		{Type: provider.ItemMessage, Role: "user", Text: "twenty", Images: imgs[2:]},
	}})); n != 20 {
		t.Errorf("20 images, 2 over 2000 pixels: %d sent\n%.2000s", n, raw)
	}
}

// pngOf returns a w×h PNG followed by pad zero bytes (a header reader
// stops before them).
func pngOf(t *testing.T, w, h, pad int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return append(b.Bytes(), make([]byte, max(0, pad-b.Len()))...)
}

// jpegOf is pngOf for a JPEG.
func jpegOf(t *testing.T, w, h, pad int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)), nil); err != nil {
		t.Fatal(err)
	}
	return append(b.Bytes(), make([]byte, max(0, pad-b.Len()))...)
}

// TestOpaqueReasoningStaysOnItsRoute: a route is never sent another
// wire format's opaque reasoning state (a session continued on another
// provider), which its API would refuse.
func TestOpaqueReasoningStaysOnItsRoute(t *testing.T) {
	openai := provider.Item{Type: provider.ItemReasoning, Summary: []string{"s"}, EncryptedContent: "gAAAAopaque"}
	claude := provider.Item{Type: provider.ItemReasoning, Summary: []string{"s"}, EncryptedContent: "anthropic.thinking:SIG"}
	user := provider.Item{Type: provider.ItemMessage, Role: "user", Text: "hi"}
	for _, c := range []struct {
		w             provider.WireAPI
		first, second provider.Item
	}{
		{provider.WireResponses, openai, claude},
		{provider.WireAnthropic, claude, openai},
	} {
		body := encodeOn(t, c.w, &provider.Request{Model: "m", Input: []provider.Item{c.first, c.second, user}})
		raw, _ := json.Marshal(body)
		if strings.Contains(string(raw), "gAAAAopaque") == (c.w != provider.WireResponses) {
			t.Errorf("%s: opaque Responses state sent or lost: %s", c.w, raw)
		}
		if strings.Contains(string(raw), "SIG") != (c.w == provider.WireAnthropic) {
			t.Errorf("%s: Anthropic signature sent or lost: %s", c.w, raw)
		}
	}
}

// TestAnthropicUsageCountsCacheWritesAndReads: octet's input is all of
// Anthropic's input (uncached, cache writes, cache reads); the reads are
// the cached part and the writes are reported apart, for pricing.
func TestAnthropicUsageCountsCacheWritesAndReads(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Events(
		[]byte(`{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":12,"cache_creation_input_tokens":3000,"cache_read_input_tokens":9000,"output_tokens":1}}}`),
		[]byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		[]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`),
		[]byte(`{"type":"content_block_stop","index":0}`),
		[]byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`),
		[]byte(`{"type":"message_stop"}`),
	))
	evs, err := run(t, routeTransport(srv, provider.WireAnthropic), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	want := &provider.Usage{InputTokens: 12012, CachedTokens: 9000, CacheWriteTokens: 3000, OutputTokens: 5}
	if diff := cmp.Diff(want, completed(t, evs).Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

// TestAnthropicToolInputAtBlockStart: a Messages stream whose tool_use
// block carries its whole input at content_block_start and sends no
// input_json_delta (a proxy that does not stream arguments) gives the
// call those arguments, as the SDKs read the block (they were "{}");
// deltas, when there are some, are the arguments, as the API sends them
// after an empty start input.
func TestAnthropicToolInputAtBlockStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		deltas [][]byte
		want   string
	}{
		{"no deltas", nil, `{"path":"a.go"}`},
		{"deltas", [][]byte{[]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"b.go\"}"}}`)}, `{"path":"b.go"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := `{"path":"a.go"}`
			if tc.deltas != nil {
				start = `{}`
			}
			frames := [][]byte{
				[]byte(`{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":5,"output_tokens":1}}}`),
				[]byte(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"read","input":` + start + `}}`),
			}
			frames = append(frames, tc.deltas...)
			frames = append(frames,
				[]byte(`{"type":"content_block_stop","index":0}`),
				[]byte(`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`),
				[]byte(`{"type":"message_stop"}`))
			srv := providertest.New(t)
			srv.Enqueue(providertest.Events(frames...))
			evs, err := run(t, routeTransport(srv, provider.WireAnthropic), simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			out := completed(t, evs).Output
			if len(out) != 1 || out[0].Type != provider.ItemFunctionCall || out[0].Arguments != tc.want {
				t.Errorf("output %+v, want one read call with arguments %s", out, tc.want)
			}
		})
	}
}

// TestChatDeepSeekCacheHits: DeepSeek reports a request's cached prompt
// tokens as prompt_cache_hit_tokens, without prompt_tokens_details;
// they are the usage's cached tokens (they were counted as uncached,
// priced as such). A count above the prompt's is not believed.
func TestChatDeepSeekCacheHits(t *testing.T) {
	for _, tc := range []struct {
		hits, want int64
	}{{900, 900}, {5000, 0}} {
		evs, err := runChatStream(t, fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","model":"deepseek-chat","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","model":"deepseek-chat","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":2,"total_tokens":1002,"prompt_cache_hit_tokens":%d,"prompt_cache_miss_tokens":100}}

data: [DONE]

`, tc.hits))
		if err != nil {
			t.Fatal(err)
		}
		want := &provider.Usage{InputTokens: 1000, CachedTokens: tc.want, OutputTokens: 2}
		if diff := cmp.Diff(want, completed(t, evs).Usage); diff != "" {
			t.Errorf("%d hits: usage (-want +got):\n%s", tc.hits, diff)
		}
	}
}

// runChatStream runs the simple request on the chat route against a
// server that answers with the raw SSE stream.
func runChatStream(t *testing.T, stream string) ([]provider.Event, error) {
	t.Helper()
	srv := providertest.New(t)
	turn, err := providertest.RawSSE([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(turn)
	return run(t, routeTransport(srv, provider.WireChat), simpleRequest())
}
