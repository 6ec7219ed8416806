package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/host"
)

// rawClient speaks raw bytes to a server, for inputs a jsonrpc2 client
// would never produce.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	in   *bufio.Reader
}

func newRawClient(t *testing.T, opts Options) (*rawClient, chan error) {
	t.Helper()
	cli, srvEnd := net.Pipe()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	served := make(chan error, 1)
	go func() { served <- New(opts).Serve(context.Background(), srvEnd) }()
	t.Cleanup(func() {
		_ = cli.Close()
		select {
		case <-served:
		case <-time.After(editorTimeout):
			t.Error("server did not stop")
		}
	})
	return &rawClient{t: t, conn: cli, in: bufio.NewReader(cli)}, served
}

func frame(body string) string {
	return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
}

func (c *rawClient) write(s string) {
	c.t.Helper()
	_ = c.conn.SetWriteDeadline(time.Now().Add(editorTimeout))
	if _, err := io.WriteString(c.conn, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read returns the next server message.
func (c *rawClient) read() map[string]any {
	c.t.Helper()
	return c.readWithin(editorTimeout)
}

// readWithin is read with its own deadline.
func (c *rawClient) readWithin(d time.Duration) map[string]any {
	c.t.Helper()
	body := c.readRaw(d)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		c.t.Fatalf("server sent invalid JSON %q: %v", body, err)
	}
	return m
}

// readRaw returns the body of the next server frame.
func (c *rawClient) readRaw(d time.Duration) []byte {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(d))
	n := -1
	for {
		line, err := c.in.ReadString('\n')
		if err != nil {
			c.t.Fatalf("read header: %v", err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			fmt.Sscan(v, &n)
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.in, body); err != nil {
		c.t.Fatalf("read body: %v", err)
	}
	return body
}

func errCode(m map[string]any) int {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return 0
	}
	c, _ := e["code"].(float64)
	return int(c)
}

// TestMalformedFrames sends every kind of broken input and checks each is
// answered with the right JSON-RPC error while the server keeps serving.
func TestMalformedFrames(t *testing.T) {
	c, _ := newRawClient(t, Options{Runtime: &host.Runtime{SessionsDir: t.TempDir()}})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"processId":null,"rootUri":null,"capabilities":{},"trace":null}}`
	c.write(frame(init))
	if m := c.read(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	cases := []struct {
		name  string
		input string
		code  int
		id    any
	}{
		{"invalid JSON", frame(`{"jsonrpc":"2.0","id":2,"method":`), -32700, nil},
		{"not an object", frame(`42`), -32600, nil},
		{"batch", frame(`[{"jsonrpc":"2.0","id":3,"method":"octet/session/list"}]`), -32600, nil},
		{"wrong version", frame(`{"jsonrpc":"1.0","id":4,"method":"octet/session/list"}`), -32600, float64(4)},
		{"method not a string", frame(`{"jsonrpc":"2.0","id":5,"method":7}`), -32600, float64(5)},
		{"bad id", frame(`{"jsonrpc":"2.0","id":{"a":1},"method":"octet/session/list"}`), -32600, nil},
		{"no content-length", "Content-Type: application/json\r\n\r\n", -32700, nil},
		{"bad content-length", "Content-Length: lots\r\n\r\n", -32700, nil},
		{"negative content-length", "Content-Length: -5\r\n\r\n", -32700, nil},
		{"garbage line", "hello there\r\n\r\n", -32700, nil},
		{"bad header line, body skipped", "Content-Length: 2\r\nno colon here\r\n\r\n{}", -32700, nil},
		{"short body then header", "Content-Length: 5\r\n\r\n{\"jsonrpc\"" + frame(`{"jsonrpc":"2.0","id":6,"method":"octet/nothing"}`), -32700, nil},
	}
	for _, tc := range cases {
		c.write(tc.input)
		m := c.read()
		if errCode(m) != tc.code || fmt.Sprint(m["id"]) != fmt.Sprint(tc.id) {
			t.Errorf("%s: got %v, want error %d with id %v", tc.name, m, tc.code, tc.id)
		}
		if tc.name == "short body then header" {
			// The 5-byte body was invalid JSON; then the garbage before
			// the next header; then the real request behind it.
			m2 := c.read()
			m3 := c.read()
			if errCode(m2) != -32700 || errCode(m3) != -32601 || m3["id"] != float64(6) {
				t.Errorf("resync: got %v then %v, want -32700 then -32601 for id 6", m2, m3)
			}
		}
	}
	// A frame larger than the limit is drained and refused.
	c.write(fmt.Sprintf("Content-Length: %d\r\n\r\n", maxFrameBytes+1))
	go func() {
		chunk := strings.Repeat(" ", 1<<20)
		for n := 0; n <= maxFrameBytes; n += len(chunk) {
			_, _ = io.WriteString(c.conn, chunk[:min(len(chunk), maxFrameBytes+1-n)])
		}
	}()
	if m := c.read(); errCode(m) != -32600 {
		t.Errorf("oversized frame: got %v, want -32600", m)
	}
	// Still serving, in order.
	c.write(frame(`{"jsonrpc":"2.0","id":9,"method":"octet/session/list","params":null}`))
	if m := c.read(); m["id"] != float64(9) || m["error"] != nil {
		t.Errorf("after malformed input: %v", m)
	}
}

// TestMalformedResponseIgnored checks that a broken response from the
// client is dropped without an answer.
func TestMalformedResponseIgnored(t *testing.T) {
	c, _ := newRawClient(t, Options{Runtime: &host.Runtime{SessionsDir: t.TempDir()}})
	c.write(frame(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	c.read()
	c.write(frame(`{"jsonrpc":"1.0","id":99,"result":{}}`))
	c.write(frame(`{"jsonrpc":"2.0","id":2,"method":"shutdown"}`))
	if m := c.read(); m["id"] != float64(2) || m["error"] != nil {
		t.Errorf("after a malformed response: %v, want the shutdown answer", m)
	}
}

// initializedRawClient is a raw client past initialize.
func initializedRawClient(t *testing.T) *rawClient {
	t.Helper()
	c, _ := newRawClient(t, Options{Runtime: &host.Runtime{SessionsDir: t.TempDir()}})
	c.write(frame(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if m := c.read(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	return c
}

// TestOversizedFrameRefusedAtHeader: a 1 GB Content-Length used to be
// answered only after 1 GB had arrived, and every request sent meanwhile
// was lost. It is refused at header time, and the frame the client sends
// next (it never sent the body) is served.
func TestOversizedFrameRefusedAtHeader(t *testing.T) {
	c := initializedRawClient(t)
	c.write("Content-Length: 1000000000\r\n\r\n")
	if m := c.readWithin(5 * time.Second); errCode(m) != -32600 || m["id"] != nil {
		t.Fatalf("oversized header: got %v, want -32600 with id null at once", m)
	}
	c.write(frame(`{"jsonrpc":"2.0","id":2,"method":"octet/session/list"}`))
	if m := c.readWithin(5 * time.Second); m["id"] != float64(2) || m["error"] != nil {
		t.Errorf("the request after an oversized header: got %v, want its answer", m)
	}
}

// TestFrameOverrunKeepsNextFrame: a body shorter than its Content-Length
// used to swallow the start of the next frame, whose request then went
// unanswered. The short frame is answered (with its id) and the next one is
// served.
func TestFrameOverrunKeepsNextFrame(t *testing.T) {
	c := initializedRawClient(t)
	short := `{"jsonrpc":"2.0","id":2,"method":"octet/session/list"}`
	c.write(fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(short)+40, short) +
		frame(`{"jsonrpc":"2.0","id":3,"method":"octet/session/list"}`))
	m := c.readWithin(5 * time.Second)
	if errCode(m) != -32700 || m["id"] != float64(2) {
		t.Errorf("short frame: got %v, want -32700 for id 2", m)
	}
	if m := c.readWithin(5 * time.Second); m["id"] != float64(3) || m["error"] != nil {
		t.Errorf("the frame after a short one: got %v, want the answer to id 3", m)
	}
}

// TestInvalidUTF8MethodNotEchoed: an unknown method with invalid UTF-8 was
// echoed raw in the error, putting invalid JSON on stdout.
func TestInvalidUTF8MethodNotEchoed(t *testing.T) {
	c := initializedRawClient(t)
	c.write(frame("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"octet/\xff\xfe\"}"))
	body := c.readRaw(5 * time.Second)
	if !utf8.Valid(body) {
		t.Fatalf("reply is not valid UTF-8: %q", body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || errCode(m) != -32600 || m["id"] != float64(2) {
		t.Errorf("reply %s, want -32600 for id 2", body)
	}
	// A well-formed unknown method with invalid UTF-8 in a param is
	// answered normally (only the method is checked at read time).
	c.write(frame("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"workspace/executeCommand\",\"params\":{\"command\":\"x\xff\"}}"))
	if body := c.readRaw(5 * time.Second); !utf8.Valid(body) {
		t.Errorf("reply is not valid UTF-8: %q", body)
	}
}

// TestNullIDRequestAnswered: {"id": null, "method": …} was taken for a
// notification and never answered.
func TestNullIDRequestAnswered(t *testing.T) {
	c := initializedRawClient(t)
	c.write(frame(`{"jsonrpc":"2.0","id":null,"method":"octet/session/list"}`))
	if m := c.readWithin(5 * time.Second); errCode(m) != -32600 || m["id"] != nil {
		t.Errorf("id null: got %v, want -32600 with id null", m)
	}
	c.write(frame(`{"jsonrpc":"2.0","id":4,"method":"octet/session/list"}`))
	if m := c.readWithin(5 * time.Second); m["id"] != float64(4) {
		t.Errorf("after id null: got %v", m)
	}
}

// TestServerRequestIDs: requests the server sends carry string ids
// "octet-N" (the editor contract), and only a response naming one of
// them reaches the server's pending call: a number, jsonrpc2's own
// numbering or a look-alike ("octet-01", "octet-+1", "octet-0") would
// answer the wrong request, so it is dropped.
func TestServerRequestIDs(t *testing.T) {
	call := `{"jsonrpc":"2.0","method":"window/showMessageRequest","params":{"message":"x"},"id":7}`
	if got, want := string(outgoingID([]byte(call))), strings.Replace(call, `"id":7}`, `"id":"octet-7"}`, 1); got != want {
		t.Errorf("outgoingID = %s, want %s", got, want)
	}
	note := `{"jsonrpc":"2.0","method":"octet/event","params":{"id":7}}`
	if got := string(outgoingID([]byte(note))); got != note {
		t.Errorf("a notification's params were renamed: %s", got)
	}
	s := &tolerantStream{log: testLogger(t)}
	for body, want := range map[string]int64{
		`{"jsonrpc":"2.0","id":"octet-7","result":{}}`:                   7,
		`{"jsonrpc":"2.0","id":"octet-12345678901","result":null}`:       12345678901,
		`{"jsonrpc":"2.0","id":7,"result":{}}`:                           0,
		`{"jsonrpc":"2.0","id":1000000007,"result":{}}`:                  0,
		`{"jsonrpc":"2.0","id":"7","result":{}}`:                         0,
		`{"jsonrpc":"2.0","id":"octet-07","result":{}}`:                  0,
		`{"jsonrpc":"2.0","id":"octet-+7","result":{}}`:                  0,
		`{"jsonrpc":"2.0","id":"octet-0","result":{}}`:                   0,
		`{"jsonrpc":"2.0","id":"octet-","result":{}}`:                    0,
		`{"jsonrpc":"2.0","id":"octet-99999999999999999999","result":1}`: 0,
	} {
		msg, err := jsonrpc2.DecodeMessage([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := s.ownResponse(msg.(*jsonrpc2.Response))
		var n int64
		if ok {
			n, _ = got.(*jsonrpc2.Response).ID().Number()
		}
		if n != want {
			t.Errorf("%s answers call %d, want %d (0: dropped)", body, n, want)
		}
	}
	if got := string(cancelParams(jsonrpc2.NewNumberID(7))); got != `{"id":"octet-7"}` {
		t.Errorf("$/cancelRequest params %s", got)
	}
}
