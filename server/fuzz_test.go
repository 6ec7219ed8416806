package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"go.lsp.dev/jsonrpc2"
)

// pipeRWC feeds fixed input and collects output.
type pipeRWC struct {
	in  io.Reader
	mu  sync.Mutex
	out bytes.Buffer
}

func (p *pipeRWC) Read(b []byte) (int, error) { return p.in.Read(b) }
func (p *pipeRWC) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}
func (p *pipeRWC) Close() error { return nil }

// FuzzTolerantStream feeds arbitrary bytes to the framer: it must never
// panic, never return anything but well-formed messages, end only with
// the input, and every byte it writes back must be a well-formed frame.
func FuzzTolerantStream(f *testing.F) {
	f.Add([]byte(frame(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)))
	f.Add([]byte("Content-Length: 5\r\n\r\n{\"a\":" + frame(`{"jsonrpc":"2.0","method":"x"}`)))
	f.Add([]byte("garbage\r\n\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte("Content-Length: 99999999999999999999\r\n\r\n"))
	f.Add([]byte(frame(`[{"jsonrpc":"2.0","id":1,"method":"a"}]`)))
	f.Add([]byte("Content-Length: 1000000000\r\n\r\n" + frame(`{"jsonrpc":"2.0","id":2,"method":"b"}`)))
	f.Add([]byte("Content-Length: 90\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"c\"}" + frame(`{"jsonrpc":"2.0","id":4,"method":"d"}`)))
	f.Add([]byte(frame("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"\xff\"}")))
	f.Add([]byte(frame(`{"jsonrpc":"2.0","id":null,"method":"e"}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		rwc := &pipeRWC{in: bytes.NewReader(data)}
		s := newTolerantStream(rwc, slog.New(slog.DiscardHandler))
		s.limit = 1 << 16
		for range 1000 {
			msg, _, err := s.Read(context.Background())
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatalf("Read error %v", err)
				}
				break
			}
			if msg == nil {
				t.Fatal("nil message without error")
			}
		}
		// Every reply is a complete frame holding a JSON-RPC error.
		out := rwc.out.Bytes()
		for len(out) > 0 {
			var n int
			hdr, rest, ok := bytes.Cut(out, []byte("\r\n\r\n"))
			if !ok || !bytes.HasPrefix(hdr, []byte("Content-Length: ")) {
				t.Fatalf("bad reply framing %q", out)
			}
			for _, c := range hdr[len("Content-Length: "):] {
				n = n*10 + int(c-'0')
			}
			if n > len(rest) {
				t.Fatalf("short reply %q", out)
			}
			msg, err := jsonrpc2.DecodeMessage(rest[:n])
			if err != nil {
				t.Fatalf("reply %q does not decode: %v", rest[:n], err)
			}
			if r, ok := msg.(*jsonrpc2.Response); !ok || r.Err() == nil {
				t.Fatalf("reply %q is not an error response", rest[:n])
			}
			out = rest[n:]
		}
	})
}

// FuzzFrameAfterGarbage: whatever precedes it (a lying Content-Length, a
// short body, an oversized header, garbage), a well-formed frame that
// starts on a new line is read, never swallowed.
func FuzzFrameAfterGarbage(f *testing.F) {
	f.Add([]byte("Content-Length: 1000000000\r\n\r\n"))
	f.Add([]byte("Content-Length: 90\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"c\"}"))
	f.Add([]byte("Content-Length: 5\r\n"))
	f.Add([]byte("garbage"))
	f.Add([]byte(frame(`{"jsonrpc":"2.0","id":1,"method":"a"}`)))
	f.Fuzz(func(t *testing.T, garbage []byte) {
		const sentinel = "octet/sentinel"
		data := append(append(garbage, "\r\n"...), frame(`{"jsonrpc":"2.0","id":"s","method":"`+sentinel+`"}`)...)
		s := newTolerantStream(&pipeRWC{in: bytes.NewReader(data)}, slog.New(slog.DiscardHandler))
		s.limit = 1 << 16
		for range 1000 {
			msg, _, err := s.Read(context.Background())
			if err != nil {
				t.Fatalf("the frame after %q was swallowed (%v)", garbage, err)
			}
			if c, ok := msg.(*jsonrpc2.Call); ok && c.Method() == sentinel {
				return
			}
		}
		t.Fatalf("the frame after %q never arrived", garbage)
	})
}
