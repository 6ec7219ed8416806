package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// replies decodes the frames a stream wrote: each reply's id (JSON) and
// error code.
func replies(t *testing.T, out []byte) []string {
	t.Helper()
	var got []string
	for len(out) > 0 {
		hdr, rest, ok := bytes.Cut(out, []byte("\r\n\r\n"))
		var n int
		if _, err := fmt.Sscanf(string(hdr), "Content-Length: %d", &n); !ok || err != nil || n > len(rest) {
			t.Fatalf("bad reply framing %q", out)
		}
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rest[:n], &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s:%d", m.ID, m.Error.Code))
		out = rest[n:]
	}
	return got
}

// TestOversizedFrameAnsweredByID: a request over the size limit is
// refused with its id, so the client's call ends: at once when its id
// comes first (vscode-jsonrpc's order), and after the body when the body
// puts it last (Neovim's encoder orders keys as its table does) — then
// after a refusal with the null id, sent at once. A notification's
// refusal has the null id. The same for a frame with a bad header. The
// request after each is served.
func TestOversizedFrameAnsweredByID(t *testing.T) {
	big := strings.Repeat("x", 1<<17)
	next := frame(`{"jsonrpc":"2.0","id":99,"method":"next"}`)
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{"id first", frame(`{"jsonrpc":"2.0","id":7,"method":"octet/prompt","params":{"text":"` + big + `"}}`), []string{"7:-32600"}},
		{"id last", frame(`{"params":{"text":"` + big + `","id":1},"method":"octet/prompt","id":"req-3","jsonrpc":"2.0"}`), []string{"null:-32600", `"req-3":-32600`}},
		{"notification", frame(`{"jsonrpc":"2.0","method":"octet/cancel","params":{"text":"` + big + `"}}`), []string{"null:-32600"}},
		{"bad header", "Content-Length: 40\r\nno colon\r\n\r\n" + `{"id":12,"jsonrpc":"2.0","method":"m"}  `, []string{"12:-32700"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rwc := &pipeRWC{in: strings.NewReader(tc.data + next)}
			s := newTolerantStream(rwc, slog.New(slog.DiscardHandler))
			s.limit = 1 << 16
			msg, _, err := s.Read(context.Background())
			if err != nil || !strings.Contains(fmt.Sprint(msg), "next") {
				t.Fatalf("the request after: %v, %v", msg, err)
			}
			if _, _, err := s.Read(context.Background()); err != io.EOF {
				t.Errorf("then %v, want EOF", err)
			}
			if got := replies(t, rwc.out.Bytes()); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("replies %q, want %q", got, tc.want)
			}
		})
	}
}
