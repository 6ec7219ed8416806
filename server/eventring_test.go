package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEventRingMatchesWindow checks the ring against the plain model it
// replaces: the newest events within both bounds, oldest first, and
// after(seq) the ones past seq.
func TestEventRingMatchesWindow(t *testing.T) {
	for _, tc := range []struct{ maxN, maxBytes int }{{1, 1 << 20}, {5, 1 << 20}, {40, 1 << 20}, {1000, 64}, {7, 20}} {
		r := eventRing{maxN: tc.maxN, maxBytes: tc.maxBytes}
		var model []bufferedEvent
		for seq := int64(1); seq <= 300; seq++ {
			e := bufferedEvent{Seq: seq, Method: "m", Params: json.RawMessage(strings.Repeat("x", int(seq%9)))}
			r.add(e)
			model = append(model, e)
			size := 0
			for _, m := range model {
				size += len(m.Params)
			}
			for len(model) > tc.maxN || (size > tc.maxBytes && len(model) > 1) {
				size -= len(model[0].Params)
				model = model[1:]
			}
			for _, after := range []int64{0, max(seq-3, 0), seq - 1, seq} {
				got, trunc := r.after(after, seq)
				var want []bufferedEvent
				for _, m := range model {
					if m.Seq > after {
						want = append(want, m)
					}
				}
				if !slices.EqualFunc(got, want, func(a, b bufferedEvent) bool {
					return a.Seq == b.Seq && bytes.Equal(a.Params, b.Params)
				}) {
					t.Fatalf("%+v seq %d after %d: got %d events, want %d", tc, seq, after, len(got), len(want))
				}
				if wantTrunc := model[0].Seq > 1 && model[0].Seq > after+1; trunc != wantTrunc {
					t.Fatalf("%+v seq %d after %d: truncated %v, want %v", tc, seq, after, trunc, wantTrunc)
				}
			}
		}
	}
}

// TestEventRingEvictionIsConstant checks that adding to a full ring costs
// the same whatever its size: the buffer used to shift every kept event
// on each eviction, so a 64Ki-event ring was thousands of times slower
// per event than a 64-event one.
func TestEventRingEvictionIsConstant(t *testing.T) {
	perAdd := func(n int) time.Duration {
		r := eventRing{maxN: n, maxBytes: 1 << 30}
		p := json.RawMessage(`{}`)
		for i := range n {
			r.add(bufferedEvent{Seq: int64(i + 1), Params: p})
		}
		best := time.Duration(1 << 62)
		seq := int64(n)
		for range 5 {
			start := time.Now()
			for range 2000 {
				seq++
				r.add(bufferedEvent{Seq: seq, Params: p})
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := perAdd(64), perAdd(1<<16)
	if large > 20*small+time.Millisecond {
		t.Fatalf("2000 adds to a full ring: %v at 64 events, %v at 65536: eviction is not O(1)", small, large)
	}
}

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

// BenchmarkEventRingAdd is one event added to a full ring of the default
// size (4,096 events): every event of a long session after its first
// 4,096 pays this.
func BenchmarkEventRingAdd(b *testing.B) {
	r := eventRing{maxN: DefaultEventBuffer, maxBytes: DefaultEventBufferBytes}
	p := json.RawMessage(`{"sessionId":"s","seq":1,"event":{"type":"text_delta","delta":"hello"}}`)
	seq := int64(0)
	for range DefaultEventBuffer {
		seq++
		r.add(bufferedEvent{Seq: seq, Params: p})
	}
	for b.Loop() {
		seq++
		r.add(bufferedEvent{Seq: seq, Params: p})
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
