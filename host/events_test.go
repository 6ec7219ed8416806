package host

import (
	"bytes"
	"encoding/json"
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
		r := NewEventRing(tc.maxN, tc.maxBytes)
		var model []Event
		for seq := int64(1); seq <= 300; seq++ {
			e := Event{Seq: seq, Method: "m", Params: json.RawMessage(strings.Repeat("x", int(seq%9)))}
			r.Add(e)
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
				got, trunc := r.After(after, seq)
				var want []Event
				for _, m := range model {
					if m.Seq > after {
						want = append(want, m)
					}
				}
				if !slices.EqualFunc(got, want, func(a, b Event) bool {
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
		r := NewEventRing(n, 1<<30)
		p := json.RawMessage(`{}`)
		for i := range n {
			r.Add(Event{Seq: int64(i + 1), Params: p})
		}
		best := time.Duration(1 << 62)
		seq := int64(n)
		for range 5 {
			start := time.Now()
			for range 2000 {
				seq++
				r.Add(Event{Seq: seq, Params: p})
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

// BenchmarkEventRingAdd is one event added to a full ring of the default
// size (4,096 events): every event of a long session after its first
// 4,096 pays this.
func BenchmarkEventRingAdd(b *testing.B) {
	r := NewEventRing(4096, 16<<20) // the LSP dialect's default buffer
	p := json.RawMessage(`{"sessionId":"s","seq":1,"event":{"type":"text_delta","delta":"hello"}}`)
	seq := int64(0)
	for range 4096 {
		seq++
		r.Add(Event{Seq: seq, Params: p})
	}
	for b.Loop() {
		seq++
		r.Add(Event{Seq: seq, Params: p})
	}
}

// TestStreamReplay: a cursor of the stream's epoch (or none) gets the
// kept events after it; one of another epoch gets all of them, truncated;
// a seq taken but not kept (a snapshot) is neither replayed nor counted
// missing; a dropped ring answers nothing, truncated.
func TestStreamReplay(t *testing.T) {
	st := NewStream(3, 1<<20)
	if st.Epoch() == "" || NewStream(3, 1<<20).Epoch() == st.Epoch() {
		t.Fatal("streams share an epoch")
	}
	keep := func() {
		seq := st.Next()
		st.Keep(Event{Seq: seq, Method: "m", Params: json.RawMessage(`{}`)})
	}
	keep()
	keep()
	st.Next() // a snapshot: numbered, not kept
	keep()
	seqs := func(evs []Event) (out []int64) {
		for _, e := range evs {
			out = append(out, e.Seq)
		}
		return out
	}
	for _, tc := range []struct {
		epoch     string
		after     int64
		want      []int64
		truncated bool
	}{
		{st.Epoch(), 0, []int64{1, 2, 4}, false},
		{"", 1, []int64{2, 4}, false},
		{st.Epoch(), 2, []int64{4}, false},
		{st.Epoch(), -1, []int64{1, 2, 4}, false},
		{st.Epoch(), 4, nil, false},
		{"another", 3, []int64{1, 2, 4}, true},
	} {
		evs, truncated := st.Replay(tc.epoch, tc.after)
		if evs == nil || !slices.Equal(seqs(evs), tc.want) || truncated != tc.truncated {
			t.Errorf("replay(%q, %d) = %v %v, want %v %v", tc.epoch, tc.after, seqs(evs), truncated, tc.want, tc.truncated)
		}
	}
	keep() // 5: seq 1 is evicted (3 kept)
	if evs, truncated := st.Replay("", 0); !slices.Equal(seqs(evs), []int64{2, 4, 5}) || !truncated {
		t.Errorf("after an eviction: %v %v, want [2 4 5] truncated", seqs(evs), truncated)
	}
	if st.LastSeq() != 5 {
		t.Errorf("last seq %d, want 5", st.LastSeq())
	}
	if evs, truncated := Replay(nil, "e", 7, "e", 0); evs == nil || len(evs) != 0 || !truncated {
		t.Errorf("dropped ring: %v %v, want none, truncated", evs, truncated)
	}
}
