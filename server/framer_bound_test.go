package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestFrameBufferBounded checks that after a large message the stream no
// longer holds a buffer its size (it used to keep its largest frame's
// buffer for the life of the server).
func TestFrameBufferBounded(t *testing.T) {
	rwc := &pipeRWC{in: strings.NewReader("")}
	s := newTolerantStream(rwc, slog.New(slog.DiscardHandler))
	big := append(append([]byte(`"`), bytes.Repeat([]byte("a"), 8<<20)...), '"')
	for _, body := range [][]byte{[]byte(`{}`), big, []byte(`{"a":1}`)} {
		if _, err := s.writeFrame(body); err != nil {
			t.Fatal(err)
		}
		if cap(s.wbuf) > maxKeptFrame {
			t.Fatalf("after a %d-byte frame the stream keeps a %d-byte buffer (bound %d)", len(body), cap(s.wbuf), maxKeptFrame)
		}
	}
	if want := frame(`{}`) + frame(string(big)) + frame(`{"a":1}`); rwc.out.String() != want {
		t.Fatal("frames written differ from header + body")
	}
}

// BenchmarkFrameAfterLarge writes a small frame after one of 8 MiB and
// reports the buffer the stream keeps (retained-B).
func BenchmarkFrameAfterLarge(b *testing.B) {
	s := newTolerantStream(&pipeRWC{in: strings.NewReader("")}, slog.New(slog.DiscardHandler))
	s.w = discardWriter{}
	big := append(append([]byte(`"`), bytes.Repeat([]byte("a"), 8<<20)...), '"')
	_, _ = s.writeFrame(big)
	small := []byte(`{"jsonrpc":"2.0","method":"octet/event","params":{}}`)
	for b.Loop() {
		_, _ = s.writeFrame(small)
	}
	b.ReportMetric(float64(cap(s.wbuf)), "retained-B")
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
