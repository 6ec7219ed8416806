package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestNoRetry shows that one Open sends exactly one request even for
// failures a policy would retry (503, 500, 408, drop, refuse), on every
// transport: the turn queued behind each fault stays unconsumed.
func TestNoRetry(t *testing.T) {
	faults := []providertest.Turn{
		providertest.Status(503, "server_error", "", "unavailable").WithRetryAfter("0"),
		providertest.Status(500, "server_error", "internal_error", "boom"),
		providertest.Status(408, "timeout", "", "request timeout"),
		providertest.Text("a b c").DropAfter(1),
		providertest.Refuse(),
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			srv := providertest.New(t)
			transport := tr.make(t, srv)
			want := 0
			for _, f := range faults {
				srv.Enqueue(f, providertest.Text("must not be consumed by the faulted call"))
				if _, err := run(t, transport, simpleRequest()); err == nil {
					t.Fatalf("fault %v succeeded", f)
				}
				want++
				if n := len(srv.Requests()); n != want {
					t.Fatalf("after fault %v the server saw %d requests, want %d", f, n, want)
				}
				if srv.Pending() != 1 {
					t.Fatalf("fault %v: the follow-up turn was consumed", f)
				}
				if _, err := run(t, transport, simpleRequest()); err != nil {
					t.Fatalf("explicit follow-up after %v: %v", f, err)
				}
				want++
			}
		})
	}
}

// TestTransportParity checks that HTTP, WebSocket and the in-process
// RoundTripper yield identical event sequences (and identical failures) for
// the same scripts.
func TestTransportParity(t *testing.T) {
	scripts := map[string][]providertest.Turn{
		"tool turn then answer": {
			providertest.Reply(providertest.Reasoning("gAAAA-opaque", "Looking at the file", "then editing"),
				providertest.Message("I will read it."),
				providertest.FunctionCall("call_1", "read", `{"path":"main.go","limit":200}`),
				providertest.FunctionCall("call_2", "search", `{"pattern":"func main"}`)).
				WithUsage(provider.Usage{InputTokens: 1200, CachedTokens: 1024, OutputTokens: 80, ReasoningTokens: 40}),
			providertest.Text("Done — the file has 3 functions. ✓"),
		},
		"custom tool and no usage": {providertest.Reply(providertest.CustomToolCall("call_p", "apply_patch", "*** Begin Patch\n*** End Patch")).WithoutUsage()},
		"failure mid-stream":       {providertest.Text("partial text here").MalformedAt(5)},
		"incomplete":               {providertest.Incomplete("content_filter", providertest.Message("cut"))},
		"failed":                   {providertest.Failed("server_error", "oops")},
		"status":                   {providertest.Status(429, "tokens", "rate_limit_exceeded", "slow down, try again in 250ms")},
	}
	type outcome struct {
		Events [][]provider.Event
		Errs   []string
	}
	for name, turns := range scripts {
		t.Run(name, func(t *testing.T) {
			var results []outcome
			for _, tr := range transports {
				srv := providertest.New(t)
				srv.Enqueue(turns...)
				transport := tr.make(t, srv)
				var o outcome
				for range turns {
					evs, err := run(t, transport, simpleRequest())
					for i := range evs {
						stripRaw(&evs[i])
					}
					o.Events = append(o.Events, evs)
					o.Errs = append(o.Errs, errSummary(err))
				}
				results = append(results, o)
			}
			for i := 1; i < len(results); i++ {
				if diff := cmp.Diff(results[0], results[i]); diff != "" {
					t.Errorf("%s differs from %s (-http +%s):\n%s", transports[i].name, transports[0].name, transports[i].name, diff)
				}
			}
			if len(results[0].Events[0]) == 0 && results[0].Errs[0] == "" {
				t.Fatal("script produced nothing")
			}
		})
	}
}

// stripRaw drops Raw (byte-identical anyway) so diffs stay readable.
func stripRaw(e *provider.Event) {
	if e.Item != nil {
		it := *e.Item
		it.Raw = nil
		e.Item = &it
	}
	if e.Response != nil {
		r := *e.Response
		r.Output = append([]provider.Item(nil), r.Output...)
		for i := range r.Output {
			r.Output[i].Raw = nil
		}
		e.Response = &r
	}
}

// errSummary is the transport-independent part of an error.
func errSummary(err error) string {
	if err == nil {
		return ""
	}
	pe, ok := errors.AsType[*provider.Error](err)
	if !ok {
		return "untyped: " + err.Error()
	}
	return strings.Join([]string{pe.Phase.String(), pe.Class.String(), pe.Decode.String(), pe.Code, pe.Type, pe.Message, pe.IncompleteReason}, "|")
}

// TestRequestsRecorded checks the wire body both transports send.
func TestRequestsRecorded(t *testing.T) {
	req := &provider.Request{
		Model:        "gpt-5.1-codex",
		Instructions: "You are octet.",
		Input: []provider.Item{
			{Type: provider.ItemMessage, Role: "developer", Text: "env"},
			{Type: provider.ItemMessage, Role: "user", Text: "fix it"},
			{Type: provider.ItemReasoning, ID: "rs_1", Summary: []string{"s1"}, EncryptedContent: "ENC"},
			{Type: provider.ItemMessage, Role: "assistant", Text: "reading", Phase: "commentary", ID: "msg_1"},
			{Type: provider.ItemFunctionCall, ID: "fc_1", CallID: "c1", Name: "read", Arguments: `{"path":"a"}`},
			{Type: provider.ItemFunctionCallOutput, CallID: "c1", Output: "contents"},
			{Type: provider.ItemMessage, Role: "assistant", Refusal: "I can't help with that."},
			{Type: provider.ItemReasoning, EncryptedContent: "ENC2"},
		},
		Tools:             []provider.FunctionTool{{Name: "read", Description: "Read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`), Strict: true}},
		ParallelToolCalls: true,
		Reasoning:         &provider.Reasoning{Effort: "high", Summary: "auto"}, EncryptedReasoning: true,
		PromptCacheKey:  "session-123",
		MaxOutputTokens: 16000,
	}
	wantInput := `[
		{"type":"message","role":"developer","content":[{"type":"input_text","text":"env"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]},
		{"type":"reasoning","summary":[{"type":"summary_text","text":"s1"}],"encrypted_content":"ENC"},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"reading"}],"phase":"commentary"},
		{"type":"function_call","call_id":"c1","name":"read","arguments":"{\"path\":\"a\"}"},
		{"type":"function_call_output","call_id":"c1","output":"contents"},
		{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":"I can't help with that."}]},
		{"type":"reasoning","summary":[],"encrypted_content":"ENC2"}]`
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			srv := providertest.New(t)
			srv.Enqueue(providertest.Text("ok"))
			if _, err := run(t, tr.make(t, srv), req); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			r := reqs[0]
			if got := r.Header.Get("Authorization"); got != "[REDACTED]" {
				t.Errorf("recorded Authorization = %q, want redacted", got)
			}
			if strings.Contains(string(r.Raw), testKey) {
				t.Error("key in body")
			}
			b := r.Body
			var wantIn any
			if err := json.Unmarshal([]byte(wantInput), &wantIn); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantIn, b["input"]); diff != "" {
				t.Errorf("input (-want +got):\n%s", diff)
			}
			checks := map[string]any{
				"model": "gpt-5.1-codex", "instructions": "You are octet.", "store": false, "tool_choice": "auto",
				"parallel_tool_calls": true, "prompt_cache_key": "session-123", "max_output_tokens": 16000.0,
				"include":   []any{"reasoning.encrypted_content"},
				"reasoning": map[string]any{"effort": "high", "summary": "auto"},
				"tools": []any{map[string]any{"type": "function", "name": "read", "description": "Read a file", "strict": true,
					"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}}}},
			}
			for k, v := range checks {
				if diff := cmp.Diff(v, b[k]); diff != "" {
					t.Errorf("%s (-want +got):\n%s", k, diff)
				}
			}
			if tr.name == "websocket" {
				if b["type"] != "response.create" || b["stream"] != nil {
					t.Errorf("websocket frame type=%v stream=%v", b["type"], b["stream"])
				}
				if r.Header.Get("Openai-Beta") != provider.WebSocketBeta {
					t.Errorf("OpenAI-Beta = %q", r.Header.Get("Openai-Beta"))
				}
			} else {
				if b["stream"] != true || b["type"] != nil {
					t.Errorf("http body stream=%v type=%v", b["stream"], b["type"])
				}
				if r.Header.Get("Accept") != "text/event-stream" || r.Method != http.MethodPost || r.Path != "/v1/responses" {
					t.Errorf("http request shape: %s %s accept=%q", r.Method, r.Path, r.Header.Get("Accept"))
				}
			}
		})
	}
}

// TestToolFreeRequest checks tool_choice "none" without tools and no
// include without reasoning.
func TestToolFreeRequest(t *testing.T) {
	b, err := (&provider.Request{Model: "m"}).EncodeHTTP()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	if m["tool_choice"] != "none" || m["tools"] != nil || m["include"] != nil || m["reasoning"] != nil || m["store"] != false {
		t.Errorf("tool-free body: %s", b)
	}
	for _, bad := range []*provider.Request{
		{},
		{Model: "m", ToolChoice: "required"},
		{Model: "m", Input: []provider.Item{{Type: "web_search_call"}}},
		{Model: "m", Input: []provider.Item{{Type: provider.ItemMessage, Role: "system"}}},
		{Model: "m", Input: []provider.Item{{Type: provider.ItemFunctionCall, Name: "x"}}},
		{Model: "m", Tools: []provider.FunctionTool{{Name: "t", Parameters: json.RawMessage(`{`)}}},
	} {
		if _, err := bad.EncodeHTTP(); err == nil {
			t.Errorf("EncodeHTTP(%+v) succeeded", bad)
		}
	}
	srv := providertest.New(t)
	_, err = run(t, httpTransport(t, srv), &provider.Request{Model: "m", Input: []provider.Item{{Type: "web_search_call"}}})
	if e := asError(t, err); e.Class != provider.InvalidRequest || e.Phase != provider.PreSend || e.Dispatched {
		t.Errorf("unknown item: %v", e)
	}
	if len(srv.Requests()) != 0 {
		t.Error("invalid request reached the server")
	}
}

// TestWebSocketReuseAndExclusivity checks that turns share one connection,
// that a second concurrent Open is refused, and that an abandoned or failed
// stream retires the connection.
func TestWebSocketReuseAndExclusivity(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("one"), providertest.Text("two"), providertest.Text("three four").StallAfter(2),
		providertest.Text("five").DropAfter(1), providertest.Text("six"))
	ws := provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), APIKey: testKey})
	defer ws.Close()
	for range 2 {
		if _, err := run(t, ws, simpleRequest()); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	st, err := ws.Open(ctx, simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Next(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = ws.Open(ctx, simpleRequest())
	if e := asError(t, err); e.Class != provider.InvalidRequest || !errors.Is(e, provider.ErrBusy) || e.Dispatched {
		t.Fatalf("concurrent Open: %v", e)
	}
	st.Close() // abandons the stalled response: the connection must go
	if _, err := run(t, ws, simpleRequest()); err == nil {
		t.Fatal("drop turn succeeded")
	}
	if _, err := run(t, ws, simpleRequest()); err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for _, r := range srv.Requests() {
		keys[r.Header.Get("Sec-Websocket-Key")]++
	}
	// one, two, three share a connection; five (after the abandoned stall)
	// dials anew; six dials again after the drop.
	if len(keys) != 3 {
		t.Fatalf("requests used %d connections, want 3: %v", len(keys), keys)
	}
	if len(srv.Requests()) != 5 {
		t.Fatalf("%d requests, want 5", len(srv.Requests()))
	}
}

// TestWebSocketHandshakeStatus covers 426 (fall back to HTTP) and other
// refused handshakes: nothing was dispatched.
func TestWebSocketHandshakeStatus(t *testing.T) {
	srv := providertest.New(t)
	srv.RejectWebSocket(http.StatusUpgradeRequired)
	srv.RejectWebSocket(http.StatusUnauthorized)
	srv.Enqueue(providertest.Text("over http"))
	ws := provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), APIKey: testKey})
	_, err := run(t, ws, simpleRequest())
	if e := asError(t, err); e.Class != provider.FallbackToHTTP || e.Dispatched || e.Phase != provider.Opening {
		t.Fatalf("426: %v", e)
	}
	_, err = run(t, ws, simpleRequest())
	if e := asError(t, err); e.Class != provider.HTTPStatus || e.Status != 401 || e.Dispatched || e.Code != "websocket_rejected" {
		t.Fatalf("401: %+v", e)
	}
	if len(srv.Requests()) != 0 {
		t.Fatal("a rejected handshake consumed a turn")
	}
	if _, err := run(t, httpTransport(t, srv), simpleRequest()); err != nil {
		t.Fatalf("HTTP fallback: %v", err)
	}
}

// TestCancellation checks that a cancelled context is reported as
// Canceled (wrapping the context error) in each phase.
func TestCancellation(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name+"/body", func(t *testing.T) {
			srv := providertest.New(t)
			srv.Enqueue(providertest.Stall())
			transport := tr.make(t, srv)
			st, err := transport.Open(context.Background(), simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx, cancel := context.WithCancel(context.Background())
			if ev, err := st.Next(ctx); err != nil || ev.Type != provider.EventCreated {
				t.Fatalf("first event %v %v", ev.Type, err)
			}
			time.AfterFunc(50*time.Millisecond, cancel)
			_, err = st.Next(ctx)
			e := asError(t, err)
			if e.Class != provider.Canceled || !errors.Is(err, context.Canceled) || !e.Dispatched || e.Phase != provider.Body {
				t.Fatalf("got %v", e)
			}
			if !provider.IsCanceled(err) {
				t.Error("IsCanceled false")
			}
		})
		t.Run(tr.name+"/before-send", func(t *testing.T) {
			srv := providertest.New(t)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := tr.make(t, srv).Open(ctx, simpleRequest())
			e := asError(t, err)
			if e.Class != provider.Canceled || e.Dispatched || !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v", e)
			}
			if len(srv.Requests()) != 0 {
				t.Fatal("request sent after cancel")
			}
		})
	}
	t.Run("http/awaiting-headers", func(t *testing.T) {
		srv := providertest.New(t)
		tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey, RoundTripper: blockingRT{}})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := tr.Open(ctx, simpleRequest())
		e := asError(t, err)
		if e.Class != provider.Canceled || !errors.Is(err, context.DeadlineExceeded) || !e.Dispatched {
			t.Fatalf("got %v", e)
		}
	})
	t.Run("http/body-outlives-open-context", func(t *testing.T) {
		srv := providertest.New(t)
		srv.Enqueue(providertest.Text("a healthy body"))
		tr := httpTransport(t, srv)
		openCtx, cancel := context.WithCancel(context.Background())
		st, err := tr.Open(openCtx, simpleRequest())
		cancel() // the opening deadline must not cut the body
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for {
			_, err := st.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("body after open ctx ended: %v", err)
			}
		}
	})
}

// blockingRT is an opaque RoundTripper that writes the request (fires the
// trace) and then waits for the request context, like a hung upstream.
type blockingRT struct{}

func (blockingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// TestAPIKeyNeverLeaks checks errors and recorded data for the key, even
// when the server echoes it back.
func TestAPIKeyNeverLeaks(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Status(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: "+testKey))
	_, err := run(t, httpTransport(t, srv), simpleRequest())
	e := asError(t, err)
	if strings.Contains(e.Error(), testKey) || strings.Contains(e.Message, testKey) {
		t.Fatalf("key leaked: %s", e)
	}
	if !e.Permanent() {
		t.Error("invalid_api_key is not permanent")
	}
}

// TestIsLoopbackURL: every way of naming this machine's loopback is
// loopback (127.0.0.0/8, ::1, the IPv4-mapped ::ffff:127.x, localhost),
// and nothing else is.
func TestIsLoopbackURL(t *testing.T) {
	for raw, want := range map[string]bool{
		"http://127.0.0.1:8080/v1":        true,
		"http://127.0.0.2/v1":             true,
		"http://[::1]:11434/v1":           true,
		"http://[::ffff:127.0.0.1]:1/v1":  true,
		"http://localhost:1234/v1":        true,
		"http://LOCALHOST/v1":             true,
		"http://localhost./v1":            true,
		"http://192.0.2.1/v1":             false,
		"http://[::ffff:192.0.2.1]/v1":    false,
		"https://api.openai.com/v1":       false,
		"http://localhost.example.com/v1": false,
		"http://127.0.0.1.nip.io/v1":      false,
		"::not a url":                     false,
	} {
		if got := provider.IsLoopbackURL(raw); got != want {
			t.Errorf("IsLoopbackURL(%q) = %v, want %v", raw, got, want)
		}
	}
}

// TestUntypedErrorFrame: a data frame {"error":{…}} without a "type" (a
// gateway's error in the middle of a stream) fails the response with the
// frame's code and message on every wire, instead of being skipped as an
// unknown event until the stream ends with nothing said.
func TestUntypedErrorFrame(t *testing.T) {
	for _, wire := range []provider.WireAPI{provider.WireResponses, provider.WireChat, provider.WireAnthropic} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"error\":{\"message\":\"upstream overloaded\",\"type\":\"server_error\",\"code\":\"server_error\"}}\n\n")
		}))
		tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL + "/v1", APIKey: testKey, Wire: wire})
		_, err := run(t, tr, simpleRequest())
		srv.Close()
		if e := asError(t, err); e.Class != provider.ResponsesFailed || e.Message != "upstream overloaded" || e.Code != "server_error" {
			t.Errorf("%s: %v, want responses failed server_error: upstream overloaded", wire, err)
		}
	}
}

// TestErrorDocumentUnderEventStream: a gateway that answers 200 with an
// event-stream Content-Type but a JSON error document for body (no event)
// is reported with the document's type, code and message, on every wire,
// as a protocol violation (a retry would repeat it), not as a stream that
// merely ended early; other text without any event stays a terminal EOF
// that quotes it.
func TestErrorDocumentUnderEventStream(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		class      provider.Class
		want       string
	}{
		{"json", `{"error":{"message":"Invalid model name passed in model=foo","type":"invalid_request_error","code":"400"}}` + "\n",
			provider.ProtocolViolation, "only this error: Invalid model name passed in model=foo"},
		{"json without newline", `{"error":"model 'foo' not found"}`, provider.ProtocolViolation, "only this error: model 'foo' not found"},
		{"html", "<html><body>upstream reset</body></html>\n", provider.TerminalEOF, "only: <html><body>upstream reset</body></html>"},
	} {
		for _, wire := range []provider.WireAPI{provider.WireResponses, provider.WireChat, provider.WireAnthropic} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.body)
			}))
			tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL + "/v1", APIKey: testKey, Wire: wire})
			_, err := run(t, tr, simpleRequest())
			srv.Close()
			if e := asError(t, err); e.Class != tc.class || !strings.Contains(e.Message, tc.want) || !e.Dispatched {
				t.Errorf("%s/%s: %v, want %s with %q", tc.name, wire, err, tc.class, tc.want)
			}
		}
	}
}
