package providertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/octet-agent/octet/provider"
)

func usage(in int64) provider.Usage { return provider.Usage{InputTokens: in} }

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/responses", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sseTypes reads an SSE body and returns the event names in order.
func sseTypes(t *testing.T, r io.Reader) []string {
	t.Helper()
	var types []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			types = append(types, v)
		}
	}
	return types
}

func TestServerPlaysTurnsInOrderAndRecords(t *testing.T) {
	s := New(t)
	s.Enqueue(Text("hi there"), Status(503, "server_error", "", "later").WithRetryAfter("3"))
	resp := post(t, s.URL(), `{"model":"m","input":[]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	types := sseTypes(t, resp.Body)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.done", "response.content_part.done",
		"response.output_item.done", "response.completed"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v", types)
	}
	resp = post(t, s.URL(), `{"model":"m2"}`)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "3" {
		t.Fatalf("status turn: %d %v", resp.StatusCode, resp.Header)
	}
	resp = post(t, s.URL(), `not json`)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.Contains(string(b), "script_exhausted") {
		t.Fatalf("exhausted: %d %s", resp.StatusCode, b)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[0].Body["model"] != "m" || reqs[1].Body["model"] != "m2" || reqs[2].Body != nil || string(reqs[2].Raw) != "not json" {
		t.Fatalf("recorded %+v", reqs)
	}
	for _, r := range reqs {
		if r.Header.Get("Authorization") != "[REDACTED]" || r.Transport != "http" {
			t.Fatalf("header not redacted: %v", r.Header)
		}
	}
	if s.Pending() != 0 {
		t.Fatal("pending turns")
	}
}

func TestServerCloseEndsStalls(t *testing.T) {
	s := New(nil)
	s.Enqueue(Stall(), Stall())
	resp := post(t, s.URL(), `{}`)
	c, _, err := websocket.DefaultDialer.Dial(strings.Replace(s.URL(), "http", "ws", 1)+"/responses", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"response.create"}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { _, err := io.ReadAll(resp.Body); done <- err }()
	go func() { _, _, err := c.ReadMessage(); done <- err }()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	s.Close() // idempotent
	for range 2 {
		select {
		case err := <-done:
			if err == nil {
				t.Error("stalled stream ended cleanly; want an abrupt end")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not end a stalled turn")
		}
	}
}

func TestTurnBuilders(t *testing.T) {
	if got := words("  a b  c"); strings.Join(got, "|") != "  a| b|  c" {
		t.Errorf("words = %q", got)
	}
	for _, p := range pieces(`{"k":"héllo wörld ✓✓✓"}`) {
		if !utf8.ValidString(p) || len(p) > 11 {
			t.Errorf("piece %q", p)
		}
	}
	tu := Reply(Reasoning("enc", "a b"), FunctionCall("c", "n", `{"x":1}`)).WithUsage(usage(7))
	var last map[string]any
	for _, f := range tu.rendered() {
		if err := json.Unmarshal(f.data, &last); err != nil {
			t.Fatalf("frame %s: %v", f.typ, err)
		}
		if last["type"] != f.typ {
			t.Fatalf("frame name %s vs type %v", f.typ, last["type"])
		}
	}
	u := last["response"].(map[string]any)["usage"].(map[string]any)
	if u["input_tokens"] != 7.0 {
		t.Errorf("usage %v", u)
	}
	if n := tu.DropAfter(3).cut; n != 3 {
		t.Error("DropAfter")
	}
	if _, err := FromJSONL([]byte("{\"type\":\"a\"}\n{bad\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("FromJSONL error = %v", err)
	}
	raw, err := RawSSE([]byte("event: x\ndata: {\"type\":\"x\"}\n\n"))
	if err != nil || raw.FrameCount() != 1 || !bytes.Contains(raw.SSE(), []byte(`{"type":"x"}`)) {
		t.Errorf("RawSSE: %v %d", err, raw.FrameCount())
	}
	if m := tu.MalformedAt(2).rendered()[2].data; json.Valid(m) {
		t.Error("MalformedAt produced valid JSON")
	}
	if m := tu.InvalidUTF8At(1).rendered()[1].data; utf8.Valid(m) {
		t.Error("InvalidUTF8At produced valid UTF-8")
	}
}

// TestForRequestContaining: a matched turn serves only requests carrying
// its text; others take the next turn that fits.
func TestForRequestContaining(t *testing.T) {
	s := New(t)
	s.Enqueue(Text("for root").ForRequestContaining("ROOT"), Text("for anyone"))
	resp := post(t, s.URL(), `{"model":"child"}`)
	if types := sseTypes(t, resp.Body); len(types) == 0 {
		t.Fatal("no events")
	}
	if s.Pending() != 1 {
		t.Fatalf("pending %d after an unmatched request", s.Pending())
	}
	resp = post(t, s.URL(), `{"model":"child"}`)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.Contains(string(b), "script_exhausted") {
		t.Fatalf("a request without the text took the matched turn: %d %s", resp.StatusCode, b)
	}
	resp = post(t, s.URL(), `{"model":"m","input":"ROOT"}`)
	if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), "for root") || s.Pending() != 0 {
		t.Fatalf("matched turn not served: %s", b)
	}
}

// TestWebSocketStallKeepsServingTheConnection: a response.create sent on
// a connection whose response stalls is recorded and answered as the
// next request. The stall used to read it and drop it, so the request
// never reached the script and its client waited until shutdown.
func TestWebSocketStallKeepsServingTheConnection(t *testing.T) {
	s := New(t)
	s.Enqueue(Stall(), Text("second"))
	c, _, err := websocket.DefaultDialer.Dial(strings.Replace(s.URL(), "http", "ws", 1)+"/responses", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for _, body := range []string{`{"type":"response.create","model":"one"}`, `{"type":"response.create","model":"two"}`} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(body)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.ReadMessage(); err != nil { // response.created
			t.Fatal(err)
		}
	}
	for {
		_, msg, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("the second request was not answered: %v (requests %d)", err, len(s.Requests()))
		}
		var ev struct{ Type string }
		json.Unmarshal(msg, &ev)
		if ev.Type == "response.completed" {
			break
		}
	}
	if reqs := s.Requests(); len(reqs) != 2 || reqs[1].Body["model"] != "two" {
		t.Fatalf("recorded %+v", reqs)
	}
}
