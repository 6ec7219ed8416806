package provider_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// want is an expected failure.
type want struct {
	phase      provider.Phase
	class      provider.Class
	dispatched bool
	check      func(t *testing.T, e *provider.Error)
}

// TestScriptedFailureClasses drives every scripted fault through each
// transport and checks the typed failure.
func TestScriptedFailureClasses(t *testing.T) {
	body := func(c provider.Class) want { return want{phase: provider.Body, class: c, dispatched: true} }
	// limit is a LimitExceeded whose message names the bound it hit.
	limit := func(bound string) want {
		return want{phase: provider.Body, class: provider.LimitExceeded, dispatched: true, check: func(t *testing.T, e *provider.Error) {
			if !strings.Contains(e.Error(), bound) {
				t.Errorf("limit error %q does not name %q", e.Error(), bound)
			}
		}}
	}
	status503 := want{phase: provider.Opening, class: provider.HTTPStatus, dispatched: true, check: func(t *testing.T, e *provider.Error) {
		if e.Status != 503 || e.Code != "server_error" || e.Type != "server_error" || e.Message != "try later" {
			t.Errorf("status error fields: %+v", e)
		}
		if !e.HasRetryAfter || e.RetryAfter != 7*time.Second {
			t.Errorf("retry-after = %v %v, want 7s", e.RetryAfter, e.HasRetryAfter)
		}
		if e.Permanent() {
			t.Error("server_error reported permanent")
		}
	}}
	cases := []struct {
		name string
		turn providertest.Turn
		cfg  func(*provider.HTTPConfig, *provider.WSConfig)
		want map[string]want // by transport name; "*" for all
	}{
		{name: "status 503 with Retry-After", turn: providertest.Status(503, "server_error", "server_error", "try later").WithRetryAfter("7"),
			want: map[string]want{"*": status503}},
		{name: "status 429 rate limit with hint and headers",
			turn: providertest.Status(429, "requests", "rate_limit_exceeded", "Rate limit reached. Please try again in 1.5s.").
				WithHeader("Retry-After", time.Now().Add(30*time.Second).UTC().Format(http.TimeFormat)).
				WithHeader("X-Ratelimit-Remaining-Requests", "0").WithHeader("X-Ratelimit-Limit-Requests", "500").WithHeader("X-Ratelimit-Reset-Requests", "6m0s"),
			want: map[string]want{"*": {phase: provider.Opening, class: provider.HTTPStatus, dispatched: true, check: func(t *testing.T, e *provider.Error) {
				if e.Code != "rate_limit_exceeded" || e.Status != 429 || e.Permanent() {
					t.Errorf("fields: %+v", e)
				}
				if !e.HasRetryAfter || e.RetryAfter < 25*time.Second || e.RetryAfter > 31*time.Second {
					t.Errorf("HTTP-date retry-after = %v", e.RetryAfter)
				}
				if d, ok := provider.ParseRetryHint(e.Message); !ok || d != 1500*time.Millisecond {
					t.Errorf("retry hint = %v %v", d, ok)
				}
				rl := e.RateLimits.Requests
				if !rl.Present || rl.Limit != 500 || rl.Remaining != 0 || rl.Reset != 6*time.Minute {
					t.Errorf("rate limits = %+v", rl)
				}
				if e.RequestID == "" {
					t.Error("no request id")
				}
			}}},
		},
		{name: "status 400 permanent context_length_exceeded", turn: providertest.Status(400, "invalid_request_error", "context_length_exceeded", "Your input exceeds the context window; try again in 2s"),
			want: map[string]want{"*": {phase: provider.Opening, class: provider.HTTPStatus, dispatched: true, check: func(t *testing.T, e *provider.Error) {
				if !e.Permanent() || e.HasRetryAfter {
					t.Errorf("want permanent without Retry-After: %+v", e)
				}
			}}}},
		{name: "status 502 non-JSON body", turn: providertest.StatusBody(502, "<html>bad gateway</html>"),
			want: map[string]want{"*": {phase: provider.Opening, class: provider.HTTPStatus, dispatched: true, check: func(t *testing.T, e *provider.Error) {
				if e.Status != 502 || !strings.Contains(e.Message, "bad gateway") {
					t.Errorf("fields: %+v", e)
				}
			}}}},
		{name: "drop after 3 events", turn: providertest.Text("one two three four").DropAfter(3), want: map[string]want{"*": body(provider.BodyInterrupted)}},
		{name: "EOF without completion", turn: providertest.Text("one two three four").EOFAfter(4), want: map[string]want{"*": body(provider.TerminalEOF)}},
		{name: "EOF before any event", turn: providertest.Text("x").EOFAfter(0), want: map[string]want{"*": body(provider.TerminalEOF)}},
		{name: "malformed JSON frame", turn: providertest.Text("one two three").MalformedAt(3),
			want: map[string]want{"*": {phase: provider.Body, class: provider.StreamFailure, dispatched: true, check: decodeIs(provider.DecodeJSON)}}},
		{name: "invalid UTF-8 frame", turn: providertest.Text("one two three").InvalidUTF8At(4),
			want: map[string]want{"*": {phase: provider.Body, class: provider.StreamFailure, dispatched: true, check: decodeIs(provider.DecodeInvalidUTF8)}}},
		{name: "response.failed with code", turn: providertest.Failed("server_error", "The server had an error while processing your request."),
			want: map[string]want{"*": {phase: provider.Body, class: provider.ResponsesFailed, dispatched: true, check: func(t *testing.T, e *provider.Error) {
				if e.Code != "server_error" || e.Permanent() || !strings.Contains(e.Message, "server had an error") {
					t.Errorf("fields: %+v", e)
				}
			}}}},
		{name: "response.failed with permanent code", turn: providertest.Failed("misalignment_policy_violation", "denied"),
			want: map[string]want{"*": {phase: provider.Body, class: provider.ResponsesFailed, dispatched: true, check: func(t *testing.T, e *provider.Error) {
				if e.Code != "misalignment_policy_violation" || !e.Permanent() {
					t.Errorf("fields: %+v", e)
				}
			}}}},
		{name: "response.failed without error event", turn: providertest.Events(
			[]byte(`{"type":"response.created","response":{"id":"r1"}}`),
			[]byte(`{"type":"response.failed","response":{"id":"r1","status":"failed","error":{"code":"server_is_overloaded","message":"busy"}}}`)),
			want: map[string]want{"*": {phase: provider.Body, class: provider.ResponsesFailed, dispatched: true, check: func(t *testing.T, e *provider.Error) {
				if e.Code != "server_is_overloaded" || !e.Permanent() || e.Response == nil || e.Response.ID != "r1" {
					t.Errorf("fields: %+v", e)
				}
			}}}},
		{name: "response.incomplete with reason", turn: providertest.Incomplete("max_output_tokens", providertest.Message("partial answer"), providertest.FunctionCall("c1", "read", `{"path":`)),
			want: map[string]want{"*": {phase: provider.Body, class: provider.ResponsesIncomplete, dispatched: true, check: func(t *testing.T, e *provider.Error) {
				if e.IncompleteReason != "max_output_tokens" || e.Response == nil || len(e.Response.Output) != 2 ||
					e.Response.Output[0].Text != "partial answer" || e.Response.Output[1].CallID != "c1" || e.Response.Usage == nil {
					t.Errorf("fields: %+v response %+v", e, e.Response)
				}
			}}}},
		{name: "stall until idle timeout", turn: providertest.Text("never finishes").StallAfter(3),
			cfg: func(h *provider.HTTPConfig, w *provider.WSConfig) {
				h.IdleTimeout, w.IdleTimeout = 150*time.Millisecond, 150*time.Millisecond
			},
			want: map[string]want{"*": body(provider.IdleTimeout)}},
		{name: "frame over the size bound", turn: providertest.Text(strings.Repeat("x", 4000)),
			cfg:  func(h *provider.HTTPConfig, w *provider.WSConfig) { h.MaxFrameBytes, w.MaxFrameBytes = 1024, 1024 },
			want: map[string]want{"*": limit("MaxFrameBytes 1024")}},
		{name: "body over the size bound", turn: providertest.Text(strings.Repeat("word ", 2000)),
			cfg:  func(h *provider.HTTPConfig, w *provider.WSConfig) { h.MaxBodyBytes = 4096 },
			want: map[string]want{"http": limit("MaxBodyBytes 4096"), "inprocess": limit("MaxBodyBytes 4096"), "websocket": {}}},
		{name: "completed without response object", turn: providertest.Events([]byte(`{"type":"response.completed"}`)),
			want: map[string]want{"*": body(provider.ProtocolViolation)}},
		{name: "[DONE] before completion", turn: providertest.Events([]byte(`{"type":"response.created","response":{"id":"r"}}`), []byte(`[DONE]`)),
			want: map[string]want{"http": body(provider.TerminalEOF), "inprocess": body(provider.TerminalEOF),
				"websocket": {phase: provider.Body, class: provider.StreamFailure, dispatched: true, check: decodeIs(provider.DecodeJSON)}}},
		{name: "connection closed after request", turn: providertest.Refuse(),
			want: map[string]want{"http": {phase: provider.Opening, class: provider.ResponseHeaders, dispatched: true},
				"inprocess": {phase: provider.Opening, class: provider.ResponseHeaders, dispatched: true},
				"websocket": body(provider.BodyInterrupted)}},
	}
	for _, tc := range cases {
		for _, tr := range transports {
			w, ok := tc.want[tr.name]
			if !ok {
				w = tc.want["*"]
			}
			if w.class == 0 {
				continue
			}
			t.Run(tc.name+"/"+tr.name, func(t *testing.T) {
				srv := providertest.New(t)
				srv.Enqueue(tc.turn)
				hc := provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey}
				wc := provider.WSConfig{BaseURL: srv.URL(), APIKey: testKey}
				if tc.cfg != nil {
					tc.cfg(&hc, &wc)
				}
				var transport provider.Transport
				switch tr.name {
				case "http":
					transport = provider.NewHTTP(hc)
				case "inprocess":
					hc.RoundTripper = srv.RoundTripper()
					transport = provider.NewHTTP(hc)
				case "websocket":
					ws := provider.NewWebSocket(wc)
					t.Cleanup(func() { ws.Close() })
					transport = ws
				}
				_, err := run(t, transport, simpleRequest())
				if err == nil {
					t.Fatal("stream succeeded, want failure")
				}
				e := asError(t, err)
				if e.Phase != w.phase || e.Class != w.class || e.Dispatched != w.dispatched {
					t.Fatalf("got phase=%v class=%v dispatched=%v (%v); want %v %v %v", e.Phase, e.Class, e.Dispatched, e, w.phase, w.class, w.dispatched)
				}
				if strings.Contains(e.Error(), testKey) {
					t.Fatalf("error text leaks the key: %s", e.Error())
				}
				if w.check != nil {
					w.check(t, e)
				}
				if n := len(srv.Requests()); n != 1 {
					t.Fatalf("server saw %d requests, want exactly 1", n)
				}
			})
		}
	}
}

func decodeIs(k provider.DecodeKind) func(*testing.T, *provider.Error) {
	return func(t *testing.T, e *provider.Error) {
		if e.Decode != k {
			t.Errorf("decode = %v, want %v", e.Decode, k)
		}
	}
}

// TestStreamErrorIsSticky checks that Next keeps returning the same error.
func TestStreamErrorIsSticky(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("a b c").DropAfter(2))
	st, err := httpTransport(t, srv).Open(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var first error
	for i := 0; i < 10; i++ {
		_, err := st.Next(context.Background())
		if err != nil && first == nil {
			first = err
		} else if first != nil && err != first {
			t.Fatalf("call %d returned %v, want the sticky %v", i, err, first)
		}
	}
	if first == nil {
		t.Fatal("no error")
	}
}

// TestOpeningFailures covers the failures that happen before a response:
// missing credential, refused, TLS, no route, awaiting headers.
func TestOpeningFailures(t *testing.T) {
	closedAddr := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	// silent accepts connections, reads the request and never answers.
	silent := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		t.Cleanup(func() { close(done); ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					buf := make([]byte, 4096)
					c.Read(buf)
					<-done
					c.Close()
				}()
			}
		}()
		return ln.Addr().String()
	}
	unreachable := func(ctx context.Context, network, addr string) (net.Conn, error) {
		// The OS boundary: what connect(2) reports with no route.
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
	}
	cases := []struct {
		name string
		http func(t *testing.T) provider.HTTPConfig
		ws   func(t *testing.T) provider.WSConfig
		want want
	}{
		{name: "no credential",
			http: func(t *testing.T) provider.HTTPConfig {
				return provider.HTTPConfig{BaseURL: "https://api.example.invalid/v1"}
			},
			ws: func(t *testing.T) provider.WSConfig {
				return provider.WSConfig{BaseURL: "https://api.example.invalid/v1"}
			},
			want: want{phase: provider.PreSend, class: provider.AuthUnavailable}},
		{name: "credential source fails",
			http: func(t *testing.T) provider.HTTPConfig {
				return provider.HTTPConfig{BaseURL: "https://api.example.invalid/v1", Credential: func(context.Context) (string, error) { return "", errors.New("keychain locked") }}
			},
			ws: func(t *testing.T) provider.WSConfig {
				return provider.WSConfig{BaseURL: "https://api.example.invalid/v1", Credential: func(context.Context) (string, error) { return "", errors.New("keychain locked") }}
			},
			want: want{phase: provider.PreSend, class: provider.AuthUnavailable}},
		{name: "connection refused",
			http: func(t *testing.T) provider.HTTPConfig {
				return provider.HTTPConfig{BaseURL: "http://" + closedAddr(t) + "/v1", APIKey: testKey}
			},
			ws: func(t *testing.T) provider.WSConfig {
				return provider.WSConfig{BaseURL: "http://" + closedAddr(t) + "/v1", APIKey: testKey}
			},
			want: want{phase: provider.Opening, class: provider.Connect}},
		{name: "TLS handshake against plain server",
			http: func(t *testing.T) provider.HTTPConfig {
				return provider.HTTPConfig{BaseURL: strings.Replace(providertest.New(t).URL(), "http://", "https://", 1), APIKey: testKey}
			},
			ws: func(t *testing.T) provider.WSConfig {
				return provider.WSConfig{BaseURL: strings.Replace(providertest.New(t).URL(), "http://", "https://", 1), APIKey: testKey}
			},
			want: want{phase: provider.Opening, class: provider.Connect}},
		{name: "no route to network",
			http: func(t *testing.T) provider.HTTPConfig {
				return provider.HTTPConfig{BaseURL: "https://api.example.com/v1", APIKey: testKey, Client: &http.Client{Transport: &http.Transport{DialContext: unreachable}}}
			},
			ws: func(t *testing.T) provider.WSConfig {
				return provider.WSConfig{BaseURL: "https://api.example.com/v1", APIKey: testKey, NetDialContext: unreachable}
			},
			want: want{phase: provider.PreSend, class: provider.NetworkUnavailable}},
		{name: "headers never arrive",
			http: func(t *testing.T) provider.HTTPConfig {
				return provider.HTTPConfig{BaseURL: "http://" + silent(t) + "/v1", APIKey: testKey, OpenTimeout: 200 * time.Millisecond}
			},
			want: want{phase: provider.Opening, class: provider.ResponseHeaders, dispatched: true}},
		{name: "handshake never completes",
			ws: func(t *testing.T) provider.WSConfig {
				return provider.WSConfig{BaseURL: "http://" + silent(t) + "/v1", APIKey: testKey, ConnectTimeout: 200 * time.Millisecond}
			},
			want: want{phase: provider.Opening, class: provider.Connect}},
	}
	for _, tc := range cases {
		for _, kind := range []string{"http", "websocket"} {
			var transport provider.Transport
			switch {
			case kind == "http" && tc.http != nil:
				transport = provider.NewHTTP(tc.http(t))
			case kind == "websocket" && tc.ws != nil:
				transport = provider.NewWebSocket(tc.ws(t))
			default:
				continue
			}
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				_, err := run(t, transport, simpleRequest())
				e := asError(t, err)
				if e.Phase != tc.want.phase || e.Class != tc.want.class || e.Dispatched != tc.want.dispatched {
					t.Fatalf("got %v/%v/dispatched=%v (%v), want %v/%v/%v", e.Phase, e.Class, e.Dispatched, e, tc.want.phase, tc.want.class, tc.want.dispatched)
				}
				if strings.Contains(e.Error(), testKey) {
					t.Fatalf("error leaks the key: %s", e)
				}
			})
		}
	}
}
